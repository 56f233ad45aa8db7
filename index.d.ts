// Type declarations of syncular-native-storage, written by hand for
// TypeScript hosts of @syncular/server. NativeStorage is structurally a
// `ServerStorage` of @syncular/server 0.24 (and accepts the 0.15.x call
// forms); its transactions are `StorageTransaction`s. The types below are
// self-contained: they name nothing from @syncular/server or
// @syncular/core, so the package type-checks without either installed, and
// the host's own interfaces accept these shapes structurally.
//
// Conventions the runtime keeps and the types state:
// - "absent" is `undefined` (never `null`), except
//   `getActiveClientCursorFloor`, which answers `null` when no cursor is active;
// - optional output fields are omitted, never present with `undefined`;
// - sequence numbers, versions, counts and millisecond timestamps are
//   `number`s (safe integers); only registered-query rows may hold `bigint`s.

// ===================================================================== options

/** SQLite durability of a file database (`PRAGMA synchronous`). */
export type SynchronousMode = 'off' | 'normal' | 'full';

/** Bounds of a commit group (see `NativeStorageOptions.groupCommit`). */
export interface GroupCommitOptions {
  /** Most leases in one group, an integer ≥ 1. Default 64. */
  readonly maxSize?: number | undefined;
  /** Oldest a group may get before the next commit ends it, ms > 0. Default 5. */
  readonly maxWaitMs?: number | undefined;
}

/** Constructors of the error classes a host wants thrown (see `NativeStorageOptions.errors`). */
export interface ErrorClasses {
  /** Built as `new SyncError(code, message)`. */
  readonly SyncError?: new (...args: never[]) => Error;
  /** Built as `new StorageQueryError(code, details?)`. */
  readonly StorageQueryError?: new (...args: never[]) => Error;
  /** Built as `new StorageConstraintError(cause, opIndex?)`. */
  readonly StorageConstraintError?: new (...args: never[]) => Error;
  /** Built as `new DecodeError(message)`; its `code` is set to `sync.invalid_request` when the class sets none. */
  readonly DecodeError?: new (...args: never[]) => Error;
}

export interface NativeStorageOptions {
  /**
   * Where the data lives; the scheme picks the engine.
   * - SQLite (default engine): `sqlite::memory:` (the default: a private
   *   in-memory database per storage), `sqlite:PATH`, `sqlite://PATH`,
   *   `file:PATH`, `:memory:` or a bare file path.
   * - PostgreSQL: `postgres://…` or `postgresql://…` (a libpq-style URL).
   */
  readonly url?: string | undefined;
  /** Alias of `url` (read only when `url` is absent). */
  readonly path?: string | undefined;
  /** Alias of `url` (read only when `url` and `path` are absent). */
  readonly filename?: string | undefined;
  /**
   * The error classes to throw: pass the host's `@syncular/server` namespace
   * (or an object carrying `SyncError`, `StorageQueryError`,
   * `StorageConstraintError`, `DecodeError`) so the host's `instanceof`
   * checks hold. Each class not given falls back to this package's class of
   * the same name (exported below), but for `StorageConstraintError`, which
   * the host module's root does not export: it is taken from what the
   * module's `SqliteServerStorage` throws (README, "Errors through the
   * host's classes").
   */
  readonly errors?: ErrorClasses | undefined;
  /**
   * SQLite only. Default `'full'` (SQLite's own default, as the in-tree
   * storage runs): an acknowledged commit survives a power loss. `'normal'`
   * may lose the newest commits on power loss (never on a process crash).
   * Any other string throws `ERR_SYNCULAR_INVALID_ARGUMENT`.
   */
  readonly synchronous?: SynchronousMode | undefined;
  /**
   * SQLite only. Group commit (default on): a commit made while other
   * writes wait for the write lock is held in the open database
   * transaction, and settles with the one COMMIT (one sync) that ends the
   * group. A lone write never waits. `false` commits every write on its
   * own. Bounds: `maxSize` leases per group (default 64), `maxWaitMs` of
   * age (default 5).
   */
  readonly groupCommit?: boolean | GroupCommitOptions | undefined;
  /**
   * SQLite only. How long, in ms, a write waits for another process's write
   * lock before rejecting with code `SQLITE_BUSY`; an integer ≥ 0.
   * Default 30000. The wait happens off the JS thread.
   */
  readonly busyTimeoutMs?: number | undefined;
  /** PostgreSQL only. Size of the connection pool, an integer ≥ 1. Default 10. */
  readonly maxConnections?: number | undefined;
  /**
   * PostgreSQL only. Confines the storage to this schema (created when
   * missing) through `search_path`. Default: the server's `search_path`.
   */
  readonly schema?: string | undefined;
  /**
   * Time limit, in ms, of each registered query (`queryAuthoritative`, on
   * the storage and on a transaction); an integer ≥ 1. Default 10000. A
   * query over the limit is interrupted and rejects with
   * `ERR_SYNCULAR_QUERY_TIMEOUT`.
   */
  readonly queryTimeoutMs?: number | undefined;
  /**
   * The most rows one registered query may return; an integer ≥ 1. Default
   * 100000. Checked as rows are produced: a query that would return more
   * stops at the first row past it and rejects with
   * `ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE`.
   */
  readonly maxResultRows?: number | undefined;
  /**
   * The largest result one registered query may return, in bytes counted as
   * 32 per cell plus the UTF-8 length of each text and the length of each
   * BLOB; an integer ≥ 1. Default 67108864 (64 MiB). Checked as rows are
   * produced: past it the query stops and rejects with
   * `ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE`.
   */
  readonly maxResultBytes?: number | undefined;
  /**
   * PostgreSQL only. How long, in ms, a call may wait for a connection; an
   * integer ≥ 1. Default 5000. While the server cannot be reached, each
   * call rejects with code `PG_POOL_TIMEOUT` after this long, and
   * connection attempts back off to at most a fifth of it, so the storage
   * serves again within that time of the server answering.
   */
  readonly connectTimeoutMs?: number | undefined;
  /**
   * PostgreSQL only. What sits between the storage and the server.
   * `'none'` (default) or `'session'`: a direct connection, or a pooler in
   * session mode. `'transaction'`: a pooler in transaction mode (PgBouncer
   * `pool_mode = transaction`, Supavisor's port 6543, Neon's `-pooler`
   * endpoint), where each transaction may run on another server session;
   * the storage then keeps nothing on a session between transactions. The
   * url's `pgbouncer=true` means the same. See the README, "Poolers".
   */
  readonly pooling?: 'none' | 'session' | 'transaction' | undefined;
  /**
   * How long, in ms, `close()` lets work begun before it finish: open
   * transactions, begins already asked for, writes already submitted. An
   * integer ≥ 0; default 5000. After it, what is still open is rolled back
   * and its calls reject with `ERR_SYNCULAR_CLOSED`. Calls made after
   * `close()` reject with `ERR_SYNCULAR_CLOSED` at once.
   */
  readonly closeDrainMs?: number | undefined;
  /**
   * A transaction open this long, in ms, is reported once at warn on the
   * `syncular::tx` target (see `logger`), with its partition, age and the
   * last member it called. An integer ≥ 0; default 10000; 0 never warns.
   */
  readonly transactionWarnMs?: number | undefined;
  /**
   * A transaction open this long, in ms, is rolled back (reported on
   * `syncular::tx` with `rolled_back: true`); its later calls, and its
   * `commit()`, reject with `ERR_SYNCULAR_TX_TIMEOUT`. An integer ≥ 0;
   * default 0: never.
   */
  readonly transactionTimeoutMs?: number | undefined;
  /**
   * Receives the native diagnostics (storage calls with their duration,
   * slow statements, write-lock and pool waits, busy retries; see the
   * README's "Logging") instead of stderr. Either a function receiving each
   * {@link NativeLogRecord}, or a console/pino-style object whose
   * `debug`/`info`/`warn`/`error` methods are called as
   * `logger[level](message, { target, ...fields })` (`trace` records go to
   * `trace` when present, else `debug`). Anything else throws
   * `ERR_SYNCULAR_INVALID_ARGUMENT`; a logger that throws is ignored after
   * one process warning.
   *
   * The native sink is process-wide and records do not name their
   * storage: the last storage constructed with a `logger` wins (storages
   * without one leave it in place; `close()` does not remove it). Records
   * arrive asynchronously on the JS thread that installed the logger and
   * never keep the process alive.
   */
  readonly logger?: NativeLogFunction | NativeLogMethods | undefined;
  /**
   * Which events reach `logger`: env-filter directives, e.g. `'warn'`,
   * `'syncular=warn,syncular::call=debug'`, `'off'`. Default: the
   * `SYNCULAR_NATIVE_LOG` environment variable when set, else `'warn'`.
   * Read only with a `logger`. An invalid filter throws
   * `ERR_SYNCULAR_INVALID_ARGUMENT`.
   */
  readonly logFilter?: string | undefined;
}

/** One native diagnostic event, as a `logger` function receives it. */
export interface NativeLogRecord {
  readonly level: 'error' | 'warn' | 'info' | 'debug' | 'trace';
  /** `syncular::call`, `syncular::slow`, `syncular::lock`, `syncular::pool`, `syncular::busy` (or a dependency's target). */
  readonly target: string;
  /** e.g. `'storage call'`, `'slow statement'`, `'write lock wait'`. */
  readonly message: string;
  /** The event's fields (`member`, `engine`, `micros`, `kind`, `site`, `sql`, `partition`, …). */
  readonly fields: Readonly<Record<string, string | number | boolean | null>>;
}

/** A `logger` given as a function. */
export type NativeLogFunction = (record: NativeLogRecord) => void;

/** A `logger` given as a console/pino-style object. */
export interface NativeLogMethods {
  debug(message: string, fields: Readonly<Record<string, string | number | boolean | null>>): unknown;
  info(message: string, fields: Readonly<Record<string, string | number | boolean | null>>): unknown;
  warn(message: string, fields: Readonly<Record<string, string | number | boolean | null>>): unknown;
  error(message: string, fields: Readonly<Record<string, string | number | boolean | null>>): unknown;
  trace?(message: string, fields: Readonly<Record<string, string | number | boolean | null>>): unknown;
}

// =================================================================== values

/** A row's scope values, one per scope variable. */
export type StoredScopes = Record<string, string>;

/** A scope filter: per variable, the values to match (any of them). */
export type ScopeMap = Record<string, string[]>;

/** A scope filter as the storage accepts it (read-only arrays are fine). */
export type ScopeFilter = { readonly [variable: string]: readonly string[] };

/** A column value in a row-codec payload or an index lookup. */
export type RowValue = string | number | boolean | Uint8Array | null;

/** The column types of the row codec. */
export type ColumnType = 'string' | 'integer' | 'float' | 'boolean' | 'json' | 'bytes' | 'blob_ref' | 'crdt';

/** The parts of a compiled column the storage reads. */
export interface SchemaColumn {
  readonly name: string;
  readonly type: ColumnType;
  readonly nullable: boolean;
}

/** The parts of a host's compiled table the storage reads (others are ignored). */
export interface SchemaTable {
  readonly name: string;
  readonly columns: readonly SchemaColumn[];
  /** Default 0. */
  readonly primaryKeyIndex?: number;
  /** Whether the table has a relational projection; defaults as the host's compiler does. */
  readonly materialize?: boolean;
  readonly indexes?: readonly { readonly name: string; readonly columns: readonly string[]; readonly unique?: boolean }[];
  readonly scopePatterns?: readonly { readonly columnIndex: number }[];
  readonly encryptedColumnIndices?: readonly number[];
}

/**
 * The host's `CompiledSchema` as the storage reads it: `tables` is the
 * host's `Map` (a plain object or an array of tables is accepted too).
 */
export interface CompiledSchemaLike {
  readonly version: number;
  readonly tables: ReadonlyMap<string, SchemaTable> | readonly SchemaTable[] | { readonly [name: string]: SchemaTable };
}

export interface StoredRow {
  readonly rowId: string;
  readonly serverVersion: number;
  readonly scopes: StoredScopes;
  /** Full row-codec bytes. */
  readonly payload: Uint8Array;
  /** (ordinal, version) pairs of columns above version 1; omitted when none is stored. */
  readonly columnVersions?: Uint8Array;
}

/** A row as `upsertRow` accepts it. */
export interface RowInput {
  readonly rowId: string;
  readonly serverVersion: number;
  readonly scopes: StoredScopes;
  readonly payload: Uint8Array;
  readonly columnVersions?: Uint8Array | undefined;
}

export interface NewChange {
  readonly table: string;
  readonly rowId: string;
  readonly op: 'upsert' | 'delete';
  /** Upserts only. */
  readonly rowVersion?: number | undefined;
  readonly scopes: StoredScopes;
  /** Upserts only. */
  readonly payload?: Uint8Array | undefined;
}

export interface NewCommit {
  readonly clientId: string;
  readonly clientCommitId: string;
  readonly actorId: string;
  readonly createdAtMs: number;
  readonly changes: readonly NewChange[];
}

export interface StoredChange {
  readonly table: string;
  readonly rowId: string;
  readonly op: 'upsert' | 'delete';
  /** Upserts only; omitted on deletes. */
  readonly rowVersion?: number;
  readonly scopes: StoredScopes;
  /** Upserts only; omitted on deletes. */
  readonly payload?: Uint8Array;
}

export interface StoredCommit {
  readonly commitSeq: number;
  readonly createdAtMs: number;
  readonly actorId: string;
  readonly changes: readonly StoredChange[];
}

// ------------------------------------------------------------ push outcomes

/**
 * Host rejection metadata, the shape of `@syncular/core`'s `RejectionDetails`.
 * A type alias, not an interface: an object type written this way has an
 * implicit index signature, so a stored result's `details` assigns both to
 * upstream's interface and to a host's `Record<string, unknown>`.
 */
export type RejectionDetails = {
  readonly fieldPaths?: readonly string[];
  readonly reason?: string;
  readonly requiredAction?: string;
  readonly references?: Readonly<Record<string, string>>;
};

export type PushOperationResult =
  | { readonly opIndex: number; readonly status: 'applied' }
  | {
      readonly opIndex: number;
      readonly status: 'conflict';
      readonly code: string;
      readonly message: string;
      readonly serverVersion: number;
      readonly serverRow: Uint8Array;
      readonly conflictColumns: Uint8Array;
    }
  | {
      readonly opIndex: number;
      readonly status: 'error';
      readonly code: string;
      readonly message: string;
      readonly retryable: boolean;
      /** Stored and returned as given (JSON). */
      readonly details?: RejectionDetails;
    };

/** An operation result as `putPushResult` accepts it (`conflictColumns` may be missing on old hosts). */
export type PushOperationResultInput =
  | { readonly opIndex: number; readonly status: 'applied' }
  | {
      readonly opIndex: number;
      readonly status: 'conflict';
      readonly code: string;
      readonly message: string;
      readonly serverVersion: number;
      readonly serverRow: Uint8Array;
      readonly conflictColumns?: Uint8Array | undefined;
    }
  | {
      readonly opIndex: number;
      readonly status: 'error';
      readonly code: string;
      readonly message: string;
      readonly retryable: boolean;
      /** Upstream's `RejectionDetails` (an interface) or any JSON object; stored as given. */
      readonly details?: RejectionDetails | { readonly [key: string]: unknown } | undefined;
    };

export interface StoredPushResult {
  readonly status: 'applied' | 'rejected';
  /** Present exactly when applied. */
  readonly commitSeq?: number;
  readonly recordedAtMs?: number;
  readonly cacheIdentity?: string;
  readonly results: readonly PushOperationResult[];
}

export interface PushResultInput {
  readonly status: 'applied' | 'rejected';
  readonly commitSeq?: number | undefined;
  readonly recordedAtMs?: number | undefined;
  readonly cacheIdentity?: string | undefined;
  readonly results: readonly PushOperationResultInput[];
}

// ---------------------------------------------------------------- partitions

export interface PartitionRegistryEntry {
  readonly partition: string;
  readonly logEpoch: string;
  readonly epochRequired: boolean;
  readonly lastAuthenticatedAtMs: number;
}

export interface CommitPruneQuery {
  /** Must equal the partition's current log epoch; non-empty. */
  readonly logEpoch: string;
  /** A safe integer ≥ 0. */
  readonly throughSeq: number;
}

export interface CommitPruneResult {
  readonly previousHorizonSeq: number;
  readonly horizonSeq: number;
  readonly removedCommits: number;
}

// ------------------------------------------------- checkpoints and serve gate

export type CheckpointState = 'declared' | 'backfilling' | 'activated';

export interface CheckpointDeclaration {
  readonly partition: string;
  readonly name: string;
  readonly schemaVersion: number;
}

export interface StoredCheckpoint {
  readonly partition: string;
  readonly name: string;
  readonly schemaVersion: number;
  readonly state: CheckpointState;
  /** Highest source commitSeq the backfill covers. */
  readonly watermark: number;
  /** Claim counter; each claim gets the next one. */
  readonly ownerEpoch: number;
  readonly observedRows: number;
  readonly updatedAtMs: number;
}

export interface ServeGate {
  /** Published schema version; 0 when none. */
  readonly storedSchemaVersion: number;
  /** This partition's log epoch; `undefined` (never `null`) when unregistered. */
  readonly logEpoch: string | undefined;
  /** Incomplete checkpoints of every partition at the running version. */
  readonly pending: readonly { readonly partition: string; readonly name: string }[];
}

export type SourceChangeState = 'clean' | 'changed' | 'unverifiable';
export type ActivationOutcome = 'activated' | 'stale' | 'unverifiable';

// ------------------------------------------------------------------- clients

export interface ClientSubscription {
  readonly id: string;
  readonly table: string;
  readonly scopes: ScopeMap;
  /** 0.30.6: the schema version the subscription was made at; omitted when the host gave none. */
  readonly schemaVersion?: number;
}

export interface ClientRecord {
  readonly clientId: string;
  readonly actorId: string;
  readonly wireVersion: number;
  readonly cursor: number;
  readonly updatedAtMs: number;
  readonly subscriptions: readonly ClientSubscription[];
}

export interface ClientRecordInput {
  readonly clientId: string;
  readonly actorId: string;
  /** Default 1. */
  readonly wireVersion?: number | undefined;
  readonly cursor: number;
  readonly updatedAtMs: number;
  readonly subscriptions: readonly {
    readonly id: string;
    readonly table: string;
    readonly scopes: ScopeFilter;
    readonly schemaVersion?: number | undefined;
  }[];
}

export interface ClientCursorInfo {
  readonly clientId: string;
  readonly cursor: number;
  readonly updatedAtMs: number;
}

// ------------------------------------------------------------------- queries

export interface CommitWindowQuery {
  readonly table: string;
  readonly scopeFilter: ScopeFilter;
  /** Exclusive. */
  readonly afterSeq: number;
  /** Inclusive. */
  readonly throughSeq: number;
  readonly limitChanges: number;
}

export interface RowScanQuery {
  readonly table: string;
  readonly scopeFilter: ScopeFilter;
  /** Exclusive keyset cursor; `null` starts at the beginning. */
  readonly afterRowId: string | null;
  readonly limit: number;
}

export interface IndexRowScanQuery {
  readonly table: string;
  /** A declared index of a materialized table. */
  readonly index: string;
  /** One value per index column. */
  readonly values: readonly RowValue[];
  readonly afterRowId?: string | null | undefined;
  /** An integer from 1 to 1000. */
  readonly limit: number;
}

/** `latestScopedChangeSeq`'s query (post-0.24). */
export interface ScopedChangeQuery {
  readonly table: string;
  readonly scopeFilter: ScopeFilter;
}

export type AuthoritativeQueryValue = string | number | bigint | boolean | Uint8Array | null;

/** A registered query's SQL with the positions of each table occurrence (0.24 form). */
export interface AuthoritativeRelationPlan {
  readonly sql: string;
  readonly relations: readonly {
    readonly table: string;
    /** Offset of the occurrence in `sql`, in UTF-16 code units. */
    readonly start: number;
    readonly end: number;
    readonly alias?: string | undefined;
  }[];
}

export interface AuthoritativeQueryRequest {
  readonly plan: AuthoritativeRelationPlan;
  readonly params: readonly AuthoritativeQueryValue[];
  readonly tables: readonly string[];
}

/** The 0.15.x request form: the host's already wrapped SQL. */
export interface LegacyAuthoritativeQueryRequest {
  readonly sql: string;
  readonly params: readonly AuthoritativeQueryValue[];
  readonly tables: readonly string[];
}

export interface AuthoritativeQueryResult {
  /** Column values may be `bigint` (integers beyond the safe range). */
  readonly rows: readonly Readonly<Record<string, unknown>>[];
  readonly maxCommitSeq: number;
}

// ----------------------------------------------------------------- reactions

/** JSON that survives a round trip through the database. */
export type DurableJsonValue =
  | null
  | boolean
  | number
  | string
  | readonly DurableJsonValue[]
  | { readonly [key: string]: DurableJsonValue };

export type ReactionStatus = 'pending' | 'leased' | 'completed' | 'dead-letter';

export interface ReactionFailure {
  readonly code: string;
  readonly atMs: number;
  readonly details?: { readonly [key: string]: DurableJsonValue };
}

export interface NewReaction {
  readonly idempotencyKey: string;
  readonly type: string;
  readonly version: number;
  readonly payload: DurableJsonValue;
  readonly sourceClientId: string;
  readonly sourceClientCommitId: string;
  readonly sourceCommitSeq: number;
  readonly createdAtMs: number;
  readonly maxAttempts: number;
}

export interface StoredReaction extends NewReaction {
  readonly status: ReactionStatus;
  readonly attempts: number;
  readonly availableAtMs: number;
  readonly leaseOwner?: string;
  readonly leaseExpiresAtMs?: number;
  readonly completedAtMs?: number;
  readonly lastFailure?: ReactionFailure;
}

export interface ReactionClaimQuery {
  readonly leaseOwner: string;
  readonly types: readonly string[];
  readonly nowMs: number;
  readonly leaseDurationMs: number;
  readonly limit: number;
}

export interface ReactionListQuery {
  readonly statuses?: readonly ReactionStatus[] | undefined;
  readonly types?: readonly string[] | undefined;
  readonly limit: number;
}

export interface ReactionFailureUpdate {
  readonly leaseOwner: string;
  readonly failure: ReactionFailure;
  /** When to retry; absent: the reaction goes to dead-letter. */
  readonly retryAtMs?: number | undefined;
}

export interface ReactionPruneQuery {
  readonly completedBeforeMs: number;
  readonly deadLetterBeforeMs: number;
  readonly limit: number;
}

export interface PrunedReactionCounts {
  readonly completed: number;
  readonly deadLetter: number;
}

// ------------------------------------------------------------- admin and blobs

export interface CommitMetadata {
  readonly commitSeq: number;
  readonly clientId: string;
  readonly clientCommitId: string;
  readonly actorId: string;
  readonly createdAtMs: number;
  readonly changeCount: number;
  readonly tables: readonly string[];
}

export interface CommitMetadataQuery {
  readonly afterSeq: number;
  readonly limit: number;
  readonly table?: string | undefined;
}

export interface ScopeCommitActivity {
  readonly commitSeq: number;
  readonly table: string;
  readonly createdAtMs: number;
  readonly actorId: string;
  readonly changeCount: number;
}

export interface ScopeActivityQuery {
  readonly variable: string;
  readonly value: string;
  readonly limit: number;
}

export interface RowScopes {
  serverVersion: number;
  scopes: StoredScopes;
}

export interface BlobReferencingRow {
  readonly table: string;
  readonly rowId: string;
  readonly scopes: StoredScopes;
}

// ================================================================ transaction

/**
 * One push commit's transaction, from `NativeStorage.begin(partition)`
 * (a type only: the class is not exported);
 * every member is bound to that partition. Finish it with `commit`,
 * `rollback` or `commitRejectedPushResult`: an unfinished transaction holds
 * the storage's write lease until it is garbage-collected.
 */
export interface NativeTransaction {
  /** The row as this transaction sees it (its own writes included); `undefined` when absent. */
  getRow(table: string, rowId: string): Promise<StoredRow | undefined>;
  /** commitSeq of the row's newest retained delete; `undefined` when none. */
  getTombstoneSeq(table: string, rowId: string): Promise<number | undefined>;
  clearTombstone(table: string, rowId: string): Promise<void>;
  /** Rejects with `SyncError` `sync.idempotency_cache_miss` when a stored record is unreadable. */
  getPushResult(clientId: string, clientCommitId: string): Promise<StoredPushResult | undefined>;
  /** Rejects with `StorageQueryError` `sync.storage.scan_requires_scope` for an empty filter. */
  scanRows(query: RowScanQuery): Promise<StoredRow[]>;
  scanRowsByIndex(query: IndexRowScanQuery): Promise<StoredRow[]>;
  /** A registered query on this transaction's connection, over its staged writes; no serve gate. */
  queryAuthoritative(query: AuthoritativeQueryRequest | LegacyAuthoritativeQueryRequest): Promise<AuthoritativeQueryResult>;
  lockPartitionForPush(): Promise<void>;
  /** @deprecated The 0.15.x name of `lockPartitionForPush`. */
  lockPartitionForCommitValidation(): Promise<void>;
  /** Discards the staged writes, stores the rejection (first writer wins) and commits; finishes the transaction. */
  commitRejectedPushResult(clientId: string, clientCommitId: string, result: PushResultInput): Promise<void>;
  /** A relational constraint failure rejects with `StorageConstraintError` carrying `context.opIndex`. */
  upsertRow(table: string, row: RowInput, context?: { readonly opIndex: number } | undefined): Promise<void>;
  deleteRow(table: string, rowId: string): Promise<void>;
  /** Allocates and returns the partition's next commitSeq. */
  appendCommit(commit: NewCommit): Promise<number>;
  enqueueReactions(reactions: readonly NewReaction[]): Promise<void>;
  /** Stores the idempotency outcome unless one exists (first writer wins). */
  putPushResult(clientId: string, clientCommitId: string, result: PushResultInput): Promise<void>;
  /** Owner-epoch compare-and-set inside this transaction; `false` for a superseded owner. */
  advanceCheckpoint(name: string, ownerEpoch: number, watermark: number, observedRows: number, nowMs: number): Promise<boolean>;
  readServeGate(runningSchemaVersion: number): Promise<ServeGate>;
  setBlobRefs(table: string, rowId: string, blobIds: readonly string[]): Promise<void>;
  /**
   * Post-0.24 hint: reads the named rows (and absent rows' tombstones) in one
   * call, so the following `getRow` / `getTombstoneSeq` / `clearTombstone`
   * for them answer without a native call.
   */
  prefetchRows(table: string, rowIds: readonly string[]): Promise<void>;
  commit(): Promise<void>;
  /** A no-op once the transaction is finished. */
  rollback(): Promise<void>;
}

// ================================================================ storage.db

/** A value `storage.db` binds: upstream's `SqliteValue` (a boolean binds as 1 or 0). */
export type SqliteValue = string | number | bigint | boolean | Uint8Array | null;

/** What a statement that ran reports (numbers; `bigint` beyond 2^53). */
export interface SqliteRunResult {
  readonly changes: number | bigint;
  readonly lastInsertRowid: number | bigint;
}

/**
 * A statement from `storage.db.query(sql)`. Row values come back as
 * upstream's drivers give them: INTEGER as a number (a `bigint` beyond
 * 2^53), REAL as a number, TEXT as a string, BLOB as a `Uint8Array`, NULL
 * as `null`.
 */
export interface SqliteStatement<Row, Params extends readonly SqliteValue[]> {
  run(...params: Params): SqliteRunResult;
  /** The first row, or `null`. */
  get(...params: Params): Row | null;
  all(...params: Params): Row[];
}

/**
 * `storage.db`: upstream's synchronous `SqliteDatabase` on the storage's own
 * SQLite connection, for `new SqliteSegmentStore(storage.db)`,
 * `new SqliteBlobStore(storage.db)` and `new SqliteLeaseStore(storage.db)`
 * (one file, one copy of SQLite). Each call runs at once. A statement made
 * while a storage transaction is open joins it (durable with its COMMIT,
 * kept if it rolls back); otherwise it commits on its own, waiting up to
 * `busyTimeoutMs` for another process's lock. Refused with
 * `ERR_SYNCULAR_DB_REFUSED`: transaction control (BEGIN, COMMIT, ROLLBACK,
 * SAVEPOINT, RELEASE) and pragmas that set the connection's behaviour.
 * Bad values: `ERR_SYNCULAR_INVALID_ARGUMENT` (`undefined` included); SQLite
 * errors carry their `SQLITE_*` code.
 */
export interface NativeSqliteDatabase {
  exec(sql: string): void;
  run(sql: string, bindings?: readonly SqliteValue[]): SqliteRunResult;
  /** Compiles `sql` (one statement) at once; statements are cached by text. */
  query<Row = Record<string, SqliteValue>, Params extends readonly SqliteValue[] = SqliteValue[]>(
    sql: string,
  ): SqliteStatement<Row, Params>;
  /** Ends this handle (later calls: `ERR_SYNCULAR_CLOSED`); the connection closes with the storage. */
  close(): void;
}

// ==================================================================== storage

/**
 * A `ServerStorage` for @syncular/server (0.24 interface; also accepts the
 * 0.15.x call forms). The constructor is synchronous and opens nothing; the
 * database opens on the first call. Every member is an own, writable,
 * bound function and returns a promise; failures are rejections carrying a
 * string `code` (see `NativeErrorCode`, `StorageQueryErrorCode`). A
 * `partition` is a string, always: any other value is refused with
 * `ERR_SYNCULAR_INVALID_ARGUMENT` before anything runs (it is never taken
 * for a transaction's lease).
 */
export declare class NativeStorage {
  /** Throws a `TypeError` with code `ERR_SYNCULAR_INVALID_ARGUMENT` for a malformed option. */
  constructor(options?: NativeStorageOptions);

  /**
   * SQLite engines: the storage's connection for upstream's SQLite segment,
   * blob and lease stores (see `NativeSqliteDatabase`). A PostgreSQL storage
   * has none: reading it throws `ERR_SYNCULAR_DB_UNSUPPORTED`.
   */
  readonly db: NativeSqliteDatabase;

  // ---- schema and partitions
  /** Creates or migrates the row tables; memoized per schema version. */
  ensureSchema(schema: CompiledSchemaLike, checkpoints?: readonly CheckpointDeclaration[] | undefined): Promise<void>;
  touchPartition(partition: string, authenticatedAtMs: number, initialLogEpoch: string): Promise<PartitionRegistryEntry>;
  rotatePartitionLogEpoch(partition: string, logEpoch: string, authenticatedAtMs: number): Promise<PartitionRegistryEntry>;
  listPartitionRegistry(): Promise<PartitionRegistryEntry[]>;
  getPartitionLogEpoch(partition: string): Promise<string | undefined>;
  listPartitions(): Promise<string[]>;

  // ---- transactions and the commit log
  /** Waits for the storage's write lease (never fails because another transaction is open). */
  begin(partition: string): Promise<NativeTransaction>;
  getMaxCommitSeq(partition: string): Promise<number>;
  getHorizonSeq(partition: string): Promise<number>;
  /** Monotonic: keeps the larger of the stored and the given horizon. */
  setHorizonSeq(partition: string, seq: number): Promise<void>;
  /** 0.24 form: epoch-checked prune; `sync.storage.invalid_prune_cursor` / `sync.storage.prune_epoch_mismatch`. */
  pruneCommitsThrough(partition: string, query: CommitPruneQuery): Promise<CommitPruneResult>;
  /** 0.15.x form: prunes through `seq` and resolves with the number of commits removed. */
  pruneCommitsThrough(partition: string, seq: number): Promise<number>;
  getCommitSeqBefore(partition: string, createdBeforeMs: number): Promise<number>;

  // ---- checkpoints and serve gate
  readCheckpoints(partition: string): Promise<StoredCheckpoint[]>;
  readServeGate(partition: string, runningSchemaVersion: number): Promise<ServeGate>;
  claimCheckpoint(partition: string, name: string, schemaVersion: number, nowMs: number): Promise<StoredCheckpoint>;
  advanceCheckpoint(
    partition: string,
    name: string,
    ownerEpoch: number,
    watermark: number,
    observedRows: number,
    nowMs: number,
  ): Promise<boolean>;
  sourceCoverageSeq(partition: string, tables: readonly string[]): Promise<number>;
  hasSourceChangesAbove(partition: string, tables: readonly string[], seq: number): Promise<SourceChangeState>;
  declareCheckpoint(partition: string, name: string, schemaVersion: number, nowMs: number): Promise<StoredCheckpoint>;
  activateCheckpoint(
    partition: string,
    name: string,
    ownerEpoch: number,
    watermark: number,
    sources: readonly string[],
    nowMs: number,
  ): Promise<ActivationOutcome>;
  /** Not a 0.24 member: whether the partition's writer fence admits `writerVersion` (true without a fence). */
  writerFenceAllows(partition: string, writerVersion: number): Promise<boolean>;

  // ---- rows and idempotency
  getRow(partition: string, table: string, rowId: string): Promise<StoredRow | undefined>;
  getPushResult(partition: string, clientId: string, clientCommitId: string): Promise<StoredPushResult | undefined>;

  // ---- reactions
  claimReactions(partition: string, query: ReactionClaimQuery): Promise<StoredReaction[]>;
  completeReaction(partition: string, idempotencyKey: string, leaseOwner: string, completedAtMs: number): Promise<boolean>;
  extendReactionLease(partition: string, idempotencyKey: string, leaseOwner: string, leaseExpiresAtMs: number): Promise<boolean>;
  failReaction(partition: string, idempotencyKey: string, update: ReactionFailureUpdate): Promise<boolean>;
  retryReaction(partition: string, idempotencyKey: string, nowMs: number): Promise<boolean>;
  getReaction(partition: string, idempotencyKey: string): Promise<StoredReaction | undefined>;
  listReactions(partition: string, query: ReactionListQuery): Promise<StoredReaction[]>;
  pruneReactions(partition: string, query: ReactionPruneQuery): Promise<PrunedReactionCounts>;

  // ---- pull reads
  readCommitWindow(partition: string, query: CommitWindowQuery): Promise<StoredCommit[]>;
  /** Post-0.24: an upper bound of the newest commitSeq a window read over this filter could deliver. */
  latestScopedChangeSeq(partition: string, query: ScopedChangeQuery): Promise<number>;
  scanRows(partition: string, query: RowScanQuery): Promise<StoredRow[]>;
  /**
   * A registered query over committed state of one partition, gated on the
   * serve gate when the host exports `serveGateRefusal`/`serveNotReadyError`
   * (then a refusal rejects with the host's `SyncError` `sync.schema_not_ready`).
   */
  queryAuthoritative(
    partition: string,
    query: AuthoritativeQueryRequest | LegacyAuthoritativeQueryRequest,
    checkpoints?: readonly CheckpointDeclaration[] | undefined,
  ): Promise<AuthoritativeQueryResult>;
  scanRowsByIndex(partition: string, query: IndexRowScanQuery): Promise<StoredRow[]>;

  // ---- clients
  getClientRecord(partition: string, clientId: string): Promise<ClientRecord | undefined>;
  putClientRecord(partition: string, record: ClientRecordInput): Promise<void>;
  advanceClientCursor(
    partition: string,
    clientId: string,
    actorId: string,
    logEpoch: string,
    cursor: number,
    updatedAtMs: number,
  ): Promise<void>;
  updateClientCursor(partition: string, clientId: string, cursor: number, updatedAtMs: number): Promise<void>;
  /** Lowest cursor among clients updated at or after `cutoffMs`; `null` (not `undefined`) when none. */
  getActiveClientCursorFloor(partition: string, cutoffMs: number): Promise<number | null>;
  listClientCursors(partition: string): Promise<ClientCursorInfo[]>;

  // ---- blobs and admin
  listRowsReferencingBlob(partition: string, blobId: string): Promise<BlobReferencingRow[]>;
  listReferencedBlobIds(partition: string): Promise<string[]>;
  listClientRecords(partition: string): Promise<ClientRecord[]>;
  listCommitMetadata(partition: string, query: CommitMetadataQuery): Promise<CommitMetadata[]>;
  scopeActivity(partition: string, query: ScopeActivityQuery): Promise<ScopeCommitActivity[]>;
  getRowScopes(partition: string, table: string, rowId: string): Promise<RowScopes | undefined>;

  // ---- operations (docs/operations.md)
  /** One round trip to the database, not queued behind writes. */
  ping(): Promise<PingResult>;
  /** Calls and errors per member, waits, commits, pool and WAL gauges. */
  stats(): Promise<StorageStats>;
  /**
   * SQLite: an online copy of the database into a new file at `path`
   * (refused when it exists), holding every commit acknowledged before the
   * call; writes go on meanwhile. PostgreSQL rejects with
   * `ERR_SYNCULAR_BACKUP_UNSUPPORTED` (use `pg_dump`).
   */
  backup(path: string): Promise<void>;
  /**
   * Swap back: the declared indexes that the first `ensureSchema` rebuilt
   * to lead with `_sync_partition` get back the form the older version
   * created (recorded at the repair; a 0.15.48 `unique` index spans
   * partitions again). Resolves with their physical names (`sync_ix_*`).
   * Rejects with `ERR_SYNCULAR_RESTORE_CONFLICT`, changing nothing, when
   * rows written since violate an original form. Run it last, before the
   * host swaps back: a later `ensureSchema` of this storage repairs again.
   */
  restoreLayout(): Promise<string[]>;
  /**
   * Copies this storage's database (SQLite) into the PostgreSQL database
   * `url` while the storage stays open (docs/copy.md): one consistent
   * snapshot loaded with `COPY` in one transaction. Rejects with
   * `ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY` when the target holds sync data,
   * `ERR_SYNCULAR_COPY_UNSUPPORTED` on a target of the same engine,
   * `ERR_SYNCULAR_COPY_VALUE` on a stored value the target type cannot
   * hold. With `verifyOnly`, copies nothing and resolves with the
   * comparison (a `VerifyReport`).
   *
   * On a PostgreSQL storage, `url` is a new (or empty) SQLite file
   * (`sqlite:./backup.db`): one consistent snapshot of this storage's
   * schema while it keeps serving (writes after it are not in the copy).
   * `schema` is refused there (`ERR_SYNCULAR_INVALID_ARGUMENT`), and
   * `finalPass` and `resume` with `ERR_SYNCULAR_COPY_UNSUPPORTED`.
   */
  copyTo(url: string, options?: CopyOptions): Promise<CopyReport | VerifyReport>;

  /** Releases the connections. */
  close(): Promise<void>;
}

/** Factory form of `new NativeStorage(options)`. */
export declare function createStorage(options?: NativeStorageOptions): NativeStorage;

// ================================================================= operations

/** What this process runs: from `versions()`. */
export interface Versions {
  /** This package's version (package.json). */
  readonly package: string;
  /** The native addon's crate version. */
  readonly addon: string;
  readonly addonProfile: 'release' | 'debug';
  /** The SQLite library compiled into the addon. */
  readonly sqlite: string;
  readonly node: string;
}

export declare function versions(): Versions;

export interface PingResult {
  readonly engine: 'sqlite' | 'postgres';
  /** Milliseconds from the call to the answer. */
  readonly roundTripMs: number;
  /** PostgreSQL: `server_version`; SQLite: the library's version. */
  readonly serverVersion: string;
}

export interface MemberStats {
  readonly calls: number;
  readonly errors: number;
}

export interface StorageStats {
  readonly engine: 'sqlite' | 'postgres';
  /** Members called at least once; transaction members as `tx.<name>`. */
  readonly members: Readonly<Record<string, MemberStats>>;
  /** SQLite: waits for the write lock (behind another write of this storage, or another process). PostgreSQL: partition row locks transactions took, and the time taking them took. */
  readonly lockWaits: { readonly count: number; readonly totalMs: number };
  /** SQLite: physical commits, the acknowledged transactions they made durable (sum), and the largest group. */
  readonly groupCommit: { readonly count: number; readonly sum: number; readonly max: number } | undefined;
  /** PostgreSQL: the pool's connections, and the calls that took one from it. */
  readonly pool:
    | { readonly size: number; readonly idle: number; readonly waiting: number; readonly acquires: number; readonly acquireMs: number }
    | undefined;
  /** SQLite: the WAL file's size; a file database's checkpoint thread's last lag and passes. */
  readonly wal:
    | { readonly bytes: number; readonly checkpointLagFrames: number | undefined; readonly checkpoints: number | undefined }
    | undefined;
}

export interface PrometheusOptions {
  /** Metric name prefix; default `syncular_storage_`. */
  readonly prefix?: string | undefined;
}

/** `stats` in the Prometheus text exposition format (labels `engine`, `member`). */
export declare function toPrometheus(stats: StorageStats, options?: PrometheusOptions): string;

// ===================================================================== errors

/** Codes of `StorageQueryError`s this package raises. */
export type StorageQueryErrorCode =
  | 'sync.storage.scan_requires_scope'
  | 'sync.storage.invalid_limit'
  | 'sync.storage.index_not_materialized'
  | 'sync.storage.index_not_found'
  | 'sync.storage.index_value_count_mismatch'
  | 'sync.storage.invalid_prune_cursor'
  | 'sync.storage.prune_epoch_mismatch'
  | 'sync.storage.checkpoint_incomplete'
  | 'sync.storage.checkpoint_not_declared'
  | 'sync.storage.checkpoint_fence_missing'
  | 'sync.storage.stored_layout_mismatch'
  | 'sync.storage.physical_layout_mismatch';

/** Codes of `SyncError`s this package raises (the gate refusal is built by the host). */
export type SyncErrorCode = 'sync.idempotency_cache_miss' | 'sync.schema_not_ready';

/** Codes of this package's plain `Error`s and `TypeError`s. */
export type NativeErrorCode =
  | 'ERR_SYNCULAR_INVALID_ARGUMENT'
  | 'ERR_SYNCULAR_ADDON_MISSING'
  | 'ERR_SYNCULAR_BACKUP_UNSUPPORTED'
  | 'ERR_SYNCULAR_CLOSED'
  | 'ERR_SYNCULAR_CORRUPT_VALUE'
  | 'ERR_SYNCULAR_DB_REFUSED'
  | 'ERR_SYNCULAR_DB_UNSUPPORTED'
  | 'ERR_SYNCULAR_FOREIGN_SQLITE'
  | 'ERR_SYNCULAR_EMPTY_EPOCH'
  | 'ERR_SYNCULAR_INTERNAL'
  | 'ERR_SYNCULAR_MIGRATION_REFUSED'
  | 'ERR_SYNCULAR_NOT_PERSISTED'
  | 'ERR_SYNCULAR_NO_PARTITION'
  | 'ERR_SYNCULAR_NO_SAVEPOINT'
  | 'ERR_SYNCULAR_NO_SCHEMA'
  | 'ERR_SYNCULAR_OPEN'
  | 'ERR_SYNCULAR_POOLER'
  | 'ERR_SYNCULAR_QUERY_PLAN'
  | 'ERR_SYNCULAR_QUERY_REFUSED'
  | 'ERR_SYNCULAR_QUERY_TIMEOUT'
  | 'ERR_SYNCULAR_RESTORE_CONFLICT'
  | 'ERR_SYNCULAR_SCHEMA_NEWER'
  | 'ERR_SYNCULAR_TX_ABORTED'
  | 'ERR_SYNCULAR_TX_FINISHED'
  | 'ERR_SYNCULAR_UNKNOWN_TABLE'
  | 'ERR_SYNCULAR_UNSUPPORTED_VALUE'
  | 'ERR_SYNCULAR_WRITER_BUSY';

/**
 * Every `code` a rejection of this package can carry: the codes above,
 * `sync.invalid_request` (`DecodeError`), and raw engine codes passed
 * through: `SQLITE_*` result-code names, PostgreSQL SQLSTATEs (five
 * characters), `PG_ERROR`, `PG_POOL_TIMEOUT` and `PG_CONNECTION` (the
 * connection to PostgreSQL failed inside a transaction; the connection is
 * closed). Opening the pool: `PG_CONNECT_REFUSED`, `PG_CONNECT_FAILED`
 * (unreachable, unknown host) and `PG_CONNECT_TIMEOUT`, or the server's
 * SQLSTATE when it rejected the login (`28P01`, `28000`, `3D000`), each
 * naming host and port. SQLite codes are the exact extended names
 * (`SQLITE_IOERR_WRITE`, `SQLITE_BUSY_SNAPSHOT`, …); open failures name
 * the path and the reason.
 */
export type ErrorCode =
  | StorageQueryErrorCode
  | SyncErrorCode
  | NativeErrorCode
  | 'sync.invalid_request'
  | `SQLITE_${string}`
  | 'PG_ERROR'
  | 'PG_POOL_TIMEOUT'
  | 'PG_CONNECTION'
  | 'PG_CONNECT_REFUSED'
  | 'PG_CONNECT_FAILED'
  | 'PG_CONNECT_TIMEOUT'
  | (string & {});

/**
 * The package's own `SyncError`, thrown when no host class was given in
 * `options.errors`. The host's class (with `category`, `retryable`, …) is
 * thrown instead when given.
 */
export declare class SyncError extends Error {
  constructor(code: string, message?: string, details?: string);
  readonly name: 'SyncError';
  readonly code: string;
  /** JSON text; present only when given. */
  readonly details?: string;
}

/** The package's own `StorageQueryError` (see `SyncError` on host classes). */
export declare class StorageQueryError extends Error {
  constructor(code: StorageQueryErrorCode | (string & {}), details?: Readonly<Record<string, string>>);
  readonly name: 'StorageQueryError';
  readonly code: StorageQueryErrorCode | (string & {});
  /** Present only when given (the layout-mismatch codes carry it). */
  readonly details?: Readonly<Record<string, string>>;
}

/**
 * The package's own `StorageConstraintError`: a relational constraint
 * failed in `upsertRow`. `cause` is an `Error` with code `SQLITE_CONSTRAINT`.
 */
export declare class StorageConstraintError extends Error {
  constructor(cause: unknown, opIndex?: number);
  readonly name: 'StorageConstraintError';
  /** The `opIndex` of the `upsertRow` context; `undefined` without one. */
  readonly opIndex: number | undefined;
}

/** A payload that does not decode under the schema (code `sync.invalid_request`). */
export declare class DecodeError extends Error {
  constructor(message: string);
  readonly name: 'DecodeError';
  readonly code: 'sync.invalid_request';
}

// ================================================================= copy (docs/copy.md)

export interface CopyOptions {
  /** The PostgreSQL side's schema (as the storage's `schema` option): the target's, or with a PostgreSQL `from`, the source's. */
  readonly schema?: string | undefined;
  /** Compare source and target after copying (`report.verify`). */
  readonly verify?: boolean | undefined;
  /** Copy nothing: only compare. */
  readonly verifyOnly?: boolean | undefined;
  /** Continue from where the target records the last copy stood (catch-up passes); a target without a record gets a fresh copy. */
  readonly resume?: boolean | undefined;
  /**
   * After the snapshot (or, `copyStorage`, the resumed copy), catch-up
   * passes, then a last pass under the write lock, which marks the SQLite
   * file moved: every later write to its sync tables, in any process, is
   * refused with `ERR_SYNCULAR_MOVED` naming the target (reads go on)
   * until the mark is cleared (`movedMark(file, { clear: true })`).
   * `copyTo`: under this storage's own write lease. `copyStorage` (the
   * command's `--final`): the command takes the file's write lock itself,
   * so the host's writes wait for it as for any other process's.
   */
  readonly finalPass?: boolean | undefined;
  /** `copyStorage` with `finalPass`: how long to wait for the file's write lock (ms, default 30000). */
  readonly lockTimeoutMs?: number | undefined;
  /** Called as the copy or the comparison goes on. */
  readonly onProgress?: ((progress: CopyProgress) => void) | undefined;
}

export interface CopyProgress {
  readonly phase: 'copy' | 'catch-up' | 'final' | 'verify';
  readonly table: string;
  readonly rows: number;
  /** Rows of the snapshot (copy; 0 while verifying). */
  readonly rowsTotal: number;
  readonly bytes: number;
  readonly elapsedMs: number;
  readonly rowsPerSec: number;
  readonly mbPerSec: number;
  /** Estimated from the rate so far. */
  readonly etaMs: number;
}

export interface CopyReport {
  readonly tables: readonly { readonly table: string; readonly rows: number; readonly bytes: number }[];
  readonly rows: number;
  readonly bytes: number;
  readonly elapsedMs: number;
  readonly rowsPerSec: number;
  readonly mbPerSec: number;
  /** Indexes of the source not copied (not declared by the schema). */
  readonly skippedIndexes: readonly string[];
  /** Where the source stood at the last step (what `resume` continues from); not in a copy from PostgreSQL. */
  readonly positions?: unknown;
  /** A copy from PostgreSQL: each partition's `[last commit, horizon]` in the snapshot. */
  readonly snapshot?: { readonly partitions: Readonly<Record<string, readonly [number, number]>> };
  /** A copy from PostgreSQL: `sync_…` tables of the source that are not the storage's (upstream's own stores). */
  readonly notCopied?: readonly string[];
  /** `finalPass` / `resume`: each catch-up pass. */
  readonly catchUp?: readonly CopyPass[];
  /**
   * `finalPass`: the last pass, and how long writes waited for it
   * (`startedAtMs`: asked for the write lock; `endedAtMs`: the mark
   * committed). From `copyStorage` also how long it waited for the lock,
   * when it got it and the target named in the mark.
   */
  readonly finalPass?: CopyPass & {
    readonly writesHeldMs: number;
    readonly startedAtMs: number;
    readonly endedAtMs: number;
    readonly lockWaitMs?: number;
    readonly lockedAtMs?: number;
    readonly movedTo?: string;
  };
  readonly verify?: VerifyReport;
}

export interface CopyPass {
  readonly commits: number;
  readonly rows: number;
  readonly bytes: number;
  readonly elapsedMs: number;
  readonly positions: unknown;
}

export interface VerifyReport {
  readonly equal: boolean;
  readonly tables: number;
  /** The source's sums per table and partition. */
  readonly partitions: readonly {
    readonly table: string;
    readonly partition: string;
    readonly count: number;
    readonly maxSeq: number | null;
    readonly sha256: string;
  }[];
  readonly rows: number;
  /** The first difference by table, partition and key; null when equal. */
  readonly firstDifference: {
    readonly table: string;
    readonly partition: string;
    readonly kind: 'differs' | 'missing in target' | 'only in target' | 'order or count';
    readonly key: Record<string, string | number | null> | null;
    readonly source: { readonly count: number; readonly maxSeq: number | null } | null;
    readonly target: { readonly count: number; readonly maxSeq: number | null } | null;
  } | null;
}

/**
 * Copies the SQLite database `from` (`sqlite:./sync.db` or a path) into the
 * PostgreSQL database `to`, or the PostgreSQL database `from` (its schema
 * `options.schema`) into the new SQLite file `to` (one snapshot), or
 * compares them with `verifyOnly`; the command
 * `syncular-native-storage copy` calls it.
 */
export declare function copyStorage(from: string, to: string, options?: CopyOptions): Promise<CopyReport | VerifyReport>;

/** The mark a move left in a SQLite file (docs/copy.md, "The mark in the file"). */
export interface MovedMark {
  /** Where the file says it moved (the url without its password), and when; null: not marked. */
  readonly moved: { readonly target: string; readonly movedAtMs: number } | null;
  /** With `clear`: whether there was a mark to remove. */
  readonly cleared: boolean | null;
}

/**
 * Reads the moved mark of the SQLite database `from`; with `clear`,
 * removes it first (under the file's write lock), so the file takes
 * writes again: an operator moving back to SQLite. A storage that ran the
 * final pass itself keeps refusing until it is opened again. The command
 * `syncular-native-storage moved FILE [--clear]` calls it.
 */
export declare function movedMark(from: string, options?: { readonly clear?: boolean | undefined }): Promise<MovedMark>;
