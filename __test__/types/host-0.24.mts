// A TypeScript host of the @syncular/server 0.24 storage seam. It declares
// the storage interface the way such a host sees it (written for this test
// from the contract's member list, not imported from upstream) and must
// accept a NativeStorage, and its transactions, without casts.
//
// The types are written the way upstream declares them: interfaces stay
// interfaces (an interface has no implicit index signature, so it does not
// assign to `{ [key: string]: unknown }`), `@syncular/core`'s result types
// keep their mutable fields, and optional fields carry no `| undefined`
// (upstream compiles with exactOptionalPropertyTypes). A restatement in
// friendlier words would hide exactly the mismatches a real host hits;
// `npm run test:upstream-types` checks the real declarations.
import { NativeStorage, createStorage } from 'syncular-native-storage';

// ---- the host's value types -------------------------------------------------

type ScopeMap = Record<string, string[]>;
type RowValue = string | number | boolean | Uint8Array | null;

interface RowColumn {
  readonly name: string;
  readonly type: 'string' | 'integer' | 'float' | 'boolean' | 'json' | 'bytes' | 'blob_ref' | 'crdt';
  readonly nullable: boolean;
  readonly crdtType?: string;
  readonly encrypted?: boolean;
}

interface CompiledTable {
  readonly name: string;
  readonly columns: readonly RowColumn[];
  readonly primaryKeyIndex: number;
  readonly scopePatterns: readonly { readonly variable: string; readonly prefix: string; readonly column: string; readonly columnIndex: number }[];
  readonly indexes: readonly { readonly name: string; readonly columns: readonly string[]; readonly unique?: boolean }[];
  readonly materialize: boolean;
  readonly columnIndex: ReadonlyMap<string, number>;
  readonly declaredVariables: ReadonlySet<string>;
  readonly blobRefColumnIndices: readonly number[];
  readonly crdtColumns: readonly { readonly index: number; readonly crdtType: string }[];
  readonly encryptedColumnIndices: readonly number[];
}

interface CompiledSchema {
  readonly version: number;
  readonly tables: ReadonlyMap<string, CompiledTable>;
  readonly declaredVariables: ReadonlySet<string>;
}

// @syncular/core (rejection-details.ts, message.ts), as upstream writes them;
// `conflictColumns` arrived with wire version 3 (before 0.24).
export interface RejectionDetails {
  readonly fieldPaths?: readonly string[];
  readonly reason?: string;
  readonly requiredAction?: string;
  readonly references?: Readonly<Record<string, string>>;
}

export type PushOperationResult =
  | { opIndex: number; status: 'applied' }
  | {
      opIndex: number;
      status: 'conflict';
      code: string;
      message: string;
      serverVersion: number;
      serverRow: Uint8Array;
      conflictColumns: Uint8Array;
    }
  | {
      opIndex: number;
      status: 'error';
      code: string;
      message: string;
      retryable: boolean;
      details?: RejectionDetails;
    };

interface StoredRow {
  readonly rowId: string;
  readonly serverVersion: number;
  readonly scopes: Record<string, string>;
  readonly payload: Uint8Array;
  readonly columnVersions?: Uint8Array;
}

interface Change {
  readonly table: string;
  readonly rowId: string;
  readonly op: 'upsert' | 'delete';
  readonly rowVersion?: number;
  readonly scopes: Record<string, string>;
  readonly payload?: Uint8Array;
}

interface NewCommit {
  readonly clientId: string;
  readonly clientCommitId: string;
  readonly actorId: string;
  readonly createdAtMs: number;
  readonly changes: readonly Change[];
}

interface StoredCommit {
  readonly commitSeq: number;
  readonly createdAtMs: number;
  readonly actorId: string;
  readonly changes: readonly Change[];
}

interface StoredPushResult {
  readonly status: 'applied' | 'rejected';
  readonly commitSeq?: number;
  readonly recordedAtMs?: number;
  readonly cacheIdentity?: string;
  readonly results: readonly PushOperationResult[];
}

interface CheckpointDeclaration {
  readonly partition: string;
  readonly name: string;
  readonly schemaVersion: number;
}

interface StoredCheckpoint extends CheckpointDeclaration {
  readonly state: 'declared' | 'backfilling' | 'activated';
  readonly watermark: number;
  readonly ownerEpoch: number;
  readonly observedRows: number;
  readonly updatedAtMs: number;
}

interface ServeGate {
  readonly storedSchemaVersion: number;
  readonly logEpoch: string | undefined;
  readonly pending: readonly { readonly partition: string; readonly name: string }[];
}

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };
type ReactionStatus = 'pending' | 'leased' | 'completed' | 'dead-letter';

interface ReactionFailure {
  readonly code: string;
  readonly atMs: number;
  readonly details?: { readonly [key: string]: Json };
}

interface NewReaction {
  readonly idempotencyKey: string;
  readonly type: string;
  readonly version: number;
  readonly payload: Json;
  readonly sourceClientId: string;
  readonly sourceClientCommitId: string;
  readonly sourceCommitSeq: number;
  readonly createdAtMs: number;
  readonly maxAttempts: number;
}

interface StoredReaction extends NewReaction {
  readonly status: ReactionStatus;
  readonly attempts: number;
  readonly availableAtMs: number;
  readonly leaseOwner?: string;
  readonly leaseExpiresAtMs?: number;
  readonly completedAtMs?: number;
  readonly lastFailure?: ReactionFailure;
}

interface ClientSubscription {
  readonly id: string;
  readonly table: string;
  readonly scopes: ScopeMap;
}

interface ClientRecord {
  readonly clientId: string;
  readonly actorId: string;
  readonly wireVersion: number;
  readonly cursor: number;
  readonly updatedAtMs: number;
  readonly subscriptions: readonly ClientSubscription[];
}

interface PartitionEntry {
  readonly partition: string;
  readonly logEpoch: string;
  readonly epochRequired: boolean;
  readonly lastAuthenticatedAtMs: number;
}

interface RowScan {
  readonly table: string;
  readonly scopeFilter: ScopeMap;
  readonly afterRowId: string | null;
  readonly limit: number;
}

interface IndexScan {
  readonly table: string;
  readonly index: string;
  readonly values: readonly RowValue[];
  readonly afterRowId?: string | null;
  readonly limit: number;
}

type QueryValue = string | number | bigint | boolean | Uint8Array | null;

interface QueryRequest {
  readonly plan: {
    readonly sql: string;
    readonly relations: readonly { readonly table: string; readonly start: number; readonly end: number; readonly alias?: string }[];
  };
  readonly params: readonly QueryValue[];
  readonly tables: readonly string[];
}

interface QueryResult {
  readonly rows: readonly Readonly<Record<string, unknown>>[];
  readonly maxCommitSeq: number;
}

// ---- the host's storage interface (0.24: 20 + 46 members) --------------------

export interface StorageTransaction {
  getRow(table: string, rowId: string): Promise<StoredRow | undefined>;
  getTombstoneSeq(table: string, rowId: string): Promise<number | undefined>;
  clearTombstone(table: string, rowId: string): Promise<void>;
  getPushResult?(clientId: string, clientCommitId: string): Promise<StoredPushResult | undefined>;
  scanRows?(query: RowScan): Promise<StoredRow[]>;
  scanRowsByIndex?(query: IndexScan): Promise<StoredRow[]>;
  queryAuthoritative?(query: QueryRequest): Promise<QueryResult>;
  lockPartitionForPush?(): Promise<void>;
  lockPartitionForCommitValidation?(): Promise<void>;
  commitRejectedPushResult?(clientId: string, clientCommitId: string, result: StoredPushResult): Promise<void>;
  upsertRow(table: string, row: StoredRow, context?: { readonly opIndex: number }): Promise<void>;
  deleteRow(table: string, rowId: string): Promise<void>;
  appendCommit(commit: NewCommit): Promise<number>;
  enqueueReactions?(reactions: readonly NewReaction[]): Promise<void>;
  putPushResult(clientId: string, clientCommitId: string, result: StoredPushResult): Promise<void>;
  advanceCheckpoint(name: string, ownerEpoch: number, watermark: number, observedRows: number, nowMs: number): Promise<boolean>;
  readServeGate(runningSchemaVersion: number): Promise<ServeGate>;
  setBlobRefs?(table: string, rowId: string, blobIds: readonly string[]): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

export interface ServerStorage {
  ensureSchema(schema: CompiledSchema, checkpoints?: readonly CheckpointDeclaration[]): Promise<void>;
  touchPartition(partition: string, authenticatedAtMs: number, initialLogEpoch: string): Promise<PartitionEntry>;
  rotatePartitionLogEpoch(partition: string, logEpoch: string, authenticatedAtMs: number): Promise<PartitionEntry>;
  listPartitionRegistry(): Promise<PartitionEntry[]>;
  getPartitionLogEpoch(partition: string): Promise<string | undefined>;
  begin(partition: string): Promise<StorageTransaction>;
  getMaxCommitSeq(partition: string): Promise<number>;
  getHorizonSeq(partition: string): Promise<number>;
  setHorizonSeq(partition: string, seq: number): Promise<void>;
  pruneCommitsThrough(
    partition: string,
    query: { readonly logEpoch: string; readonly throughSeq: number },
  ): Promise<{ readonly previousHorizonSeq: number; readonly horizonSeq: number; readonly removedCommits: number }>;
  getCommitSeqBefore(partition: string, createdBeforeMs: number): Promise<number>;
  readCheckpoints(partition: string): Promise<StoredCheckpoint[]>;
  readServeGate(partition: string, runningSchemaVersion: number): Promise<ServeGate>;
  claimCheckpoint(partition: string, name: string, schemaVersion: number, nowMs: number): Promise<StoredCheckpoint>;
  advanceCheckpoint(partition: string, name: string, ownerEpoch: number, watermark: number, observedRows: number, nowMs: number): Promise<boolean>;
  sourceCoverageSeq(partition: string, tables: readonly string[]): Promise<number>;
  hasSourceChangesAbove(partition: string, tables: readonly string[], seq: number): Promise<'clean' | 'changed' | 'unverifiable'>;
  declareCheckpoint(partition: string, name: string, schemaVersion: number, nowMs: number): Promise<StoredCheckpoint>;
  activateCheckpoint(
    partition: string,
    name: string,
    ownerEpoch: number,
    watermark: number,
    sources: readonly string[],
    nowMs: number,
  ): Promise<'activated' | 'stale' | 'unverifiable'>;
  getRow(partition: string, table: string, rowId: string): Promise<StoredRow | undefined>;
  getPushResult(partition: string, clientId: string, clientCommitId: string): Promise<StoredPushResult | undefined>;
  claimReactions?(
    partition: string,
    query: { readonly leaseOwner: string; readonly types: readonly string[]; readonly nowMs: number; readonly leaseDurationMs: number; readonly limit: number },
  ): Promise<StoredReaction[]>;
  completeReaction?(partition: string, idempotencyKey: string, leaseOwner: string, completedAtMs: number): Promise<boolean>;
  extendReactionLease?(partition: string, idempotencyKey: string, leaseOwner: string, leaseExpiresAtMs: number): Promise<boolean>;
  failReaction?(
    partition: string,
    idempotencyKey: string,
    update: { readonly leaseOwner: string; readonly failure: ReactionFailure; readonly retryAtMs?: number },
  ): Promise<boolean>;
  retryReaction?(partition: string, idempotencyKey: string, nowMs: number): Promise<boolean>;
  getReaction?(partition: string, idempotencyKey: string): Promise<StoredReaction | undefined>;
  listReactions?(
    partition: string,
    query: { readonly statuses?: readonly ReactionStatus[]; readonly types?: readonly string[]; readonly limit: number },
  ): Promise<StoredReaction[]>;
  pruneReactions?(
    partition: string,
    query: { readonly completedBeforeMs: number; readonly deadLetterBeforeMs: number; readonly limit: number },
  ): Promise<{ readonly completed: number; readonly deadLetter: number }>;
  readCommitWindow(
    partition: string,
    query: { readonly table: string; readonly scopeFilter: ScopeMap; readonly afterSeq: number; readonly throughSeq: number; readonly limitChanges: number },
  ): Promise<StoredCommit[]>;
  scanRows(partition: string, query: RowScan): Promise<StoredRow[]>;
  queryAuthoritative?(partition: string, query: QueryRequest, checkpoints?: readonly CheckpointDeclaration[]): Promise<QueryResult>;
  scanRowsByIndex?(partition: string, query: IndexScan): Promise<StoredRow[]>;
  getClientRecord(partition: string, clientId: string): Promise<ClientRecord | undefined>;
  putClientRecord(partition: string, record: ClientRecord): Promise<void>;
  advanceClientCursor(partition: string, clientId: string, actorId: string, logEpoch: string, cursor: number, updatedAtMs: number): Promise<void>;
  updateClientCursor(partition: string, clientId: string, cursor: number, updatedAtMs: number): Promise<void>;
  getActiveClientCursorFloor(partition: string, cutoffMs: number): Promise<number | null>;
  listClientCursors(partition: string): Promise<{ readonly clientId: string; readonly cursor: number; readonly updatedAtMs: number }[]>;
  listRowsReferencingBlob?(partition: string, blobId: string): Promise<{ readonly table: string; readonly rowId: string; readonly scopes: Record<string, string> }[]>;
  listReferencedBlobIds?(partition: string): Promise<string[]>;
  listClientRecords?(partition: string): Promise<ClientRecord[]>;
  listCommitMetadata?(
    partition: string,
    query: { readonly afterSeq: number; readonly limit: number; readonly table?: string },
  ): Promise<
    {
      readonly commitSeq: number;
      readonly clientId: string;
      readonly clientCommitId: string;
      readonly actorId: string;
      readonly createdAtMs: number;
      readonly changeCount: number;
      readonly tables: readonly string[];
    }[]
  >;
  scopeActivity?(
    partition: string,
    query: { readonly variable: string; readonly value: string; readonly limit: number },
  ): Promise<
    { readonly commitSeq: number; readonly table: string; readonly createdAtMs: number; readonly actorId: string; readonly changeCount: number }[]
  >;
  getRowScopes?(partition: string, table: string, rowId: string): Promise<{ serverVersion: number; scopes: Record<string, string> } | undefined>;
  listPartitions(): Promise<string[]>;
}

/**
 * A newer host (after 0.24): one more required storage member, a transaction
 * hint, and (0.30.6) the schema version of each stored subscription.
 */
export interface NewerServerStorage extends ServerStorage {
  latestScopedChangeSeq(partition: string, query: { readonly table: string; readonly scopeFilter: ScopeMap }): Promise<number>;
  begin(partition: string): Promise<NewerStorageTransaction>;
  getClientRecord(partition: string, clientId: string): Promise<NewerClientRecord | undefined>;
  putClientRecord(partition: string, record: NewerClientRecord): Promise<void>;
  listClientRecords?(partition: string): Promise<NewerClientRecord[]>;
}

export interface NewerClientSubscription extends ClientSubscription {
  readonly schemaVersion?: number;
}

export interface NewerClientRecord extends ClientRecord {
  readonly subscriptions: readonly NewerClientSubscription[];
}

export interface NewerStorageTransaction extends StorageTransaction {
  prefetchRows?(table: string, rowIds: readonly string[]): Promise<void>;
}

// ---- the assignments under test -----------------------------------------------

declare const server: {
  readonly SyncError: new (code: 'sync.idempotency_cache_miss' | 'sync.schema_not_ready', message?: string, details?: string) => Error;
  readonly StorageQueryError: new (code: string, details?: Readonly<Record<string, string>>) => Error;
  readonly serveGateRefusal: (gate: ServeGate, running: number, checkpoints: readonly CheckpointDeclaration[] | undefined) => unknown;
};

export const storage: ServerStorage = new NativeStorage({ url: 'sqlite::memory:', errors: server, synchronous: 'full' });
// Every optional member is present too, with the host's signature.
export const complete: Required<ServerStorage> = new NativeStorage();
export const newer: NewerServerStorage = createStorage({
  url: 'postgres://app@db/app',
  maxConnections: 4,
  schema: 'tenant_a',
  queryTimeoutMs: 2_000,
  errors: server,
});

// Upstream declares its members as methods, whose parameters TypeScript
// compares both ways. Restated as function-typed properties they compare
// strictly (strictFunctionTypes): every argument the host passes is accepted.
type Strictly<T> = {
  [K in keyof T]-?: NonNullable<T[K]> extends (...args: infer A) => infer R ? (...args: A) => R : T[K];
};
export const strictStorage: Strictly<NewerServerStorage> = new NativeStorage();
export const strictTransaction: Promise<Strictly<NewerStorageTransaction>> = new NativeStorage().begin('p');

export async function push(s: ServerStorage, schema: CompiledSchema): Promise<number> {
  await s.ensureSchema(schema, [{ partition: 'p', name: 'cp', schemaVersion: schema.version }]);
  const tx = await s.begin('p');
  // Every optional transaction member is present too.
  const all: Required<NewerStorageTransaction> = await new NativeStorage().begin('p');
  void all;
  const seq = await tx.appendCommit({ clientId: 'c', clientCommitId: 'k', actorId: 'a', createdAtMs: 0, changes: [] });
  await tx.commit();
  return seq;
}
