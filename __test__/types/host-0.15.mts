// A 0.15.x-era host: older call forms of the storage seam (contract §8.2).
// The same NativeStorage must satisfy its interface as well.
import { NativeStorage } from 'syncular-native-storage';

type ScopeMap = Record<string, string[]>;

interface StoredRow {
  readonly rowId: string;
  readonly serverVersion: number;
  readonly scopes: Record<string, string>;
  readonly payload: Uint8Array;
}

interface CompiledSchema {
  readonly version: number;
  readonly tables: ReadonlyMap<
    string,
    {
      readonly name: string;
      readonly columns: readonly { readonly name: string; readonly type: 'string' | 'integer' | 'float' | 'boolean' | 'json' | 'bytes'; readonly nullable: boolean }[];
      readonly primaryKeyIndex: number;
      readonly scopePatterns: readonly { readonly variable: string; readonly columnIndex: number }[];
      readonly indexes: readonly { readonly name: string; readonly columns: readonly string[] }[];
    }
  >;
  readonly declaredVariables: ReadonlySet<string>;
}

// @syncular/core's declarations, as upstream writes them (an interface for
// the details, mutable result fields, no `| undefined` on optional fields).
interface RejectionDetails {
  readonly fieldPaths?: readonly string[];
  readonly reason?: string;
  readonly requiredAction?: string;
  readonly references?: Readonly<Record<string, string>>;
}

type PushOperationResult =
  | { opIndex: number; status: 'applied' }
  | { opIndex: number; status: 'conflict'; code: string; message: string; serverVersion: number; serverRow: Uint8Array }
  | { opIndex: number; status: 'error'; code: string; message: string; retryable: boolean; details?: RejectionDetails };

interface LegacyPushResult {
  readonly status: 'applied' | 'rejected';
  readonly commitSeq?: number;
  readonly results: readonly PushOperationResult[];
}

interface LegacyTransaction {
  getRow(table: string, rowId: string): Promise<StoredRow | undefined>;
  scanRows?(query: { readonly table: string; readonly scopeFilter: ScopeMap; readonly afterRowId: string | null; readonly limit: number }): Promise<StoredRow[]>;
  lockPartitionForCommitValidation?(): Promise<void>;
  commitRejectedPushResult?(clientId: string, clientCommitId: string, result: LegacyPushResult): Promise<void>;
  upsertRow(table: string, row: StoredRow, context?: { readonly opIndex: number }): Promise<void>;
  deleteRow(table: string, rowId: string): Promise<void>;
  appendCommit(commit: {
    readonly clientId: string;
    readonly clientCommitId: string;
    readonly actorId: string;
    readonly createdAtMs: number;
    readonly changes: readonly {
      readonly table: string;
      readonly rowId: string;
      readonly op: 'upsert' | 'delete';
      readonly rowVersion?: number;
      readonly scopes: Record<string, string>;
      readonly payload?: Uint8Array;
    }[];
  }): Promise<number>;
  putPushResult(clientId: string, clientCommitId: string, result: LegacyPushResult): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

export interface LegacyServerStorage {
  /** No checkpoint argument yet. */
  ensureSchema(schema: CompiledSchema): Promise<void>;
  begin(partition: string): Promise<LegacyTransaction>;
  getMaxCommitSeq(partition: string): Promise<number>;
  getHorizonSeq(partition: string): Promise<number>;
  setHorizonSeq(partition: string, seq: number): Promise<void>;
  /** The 0.15 form: a plain sequence number in, the number of removed commits out. */
  pruneCommitsThrough(partition: string, seq: number): Promise<number>;
  getCommitSeqBefore(partition: string, createdBeforeMs: number): Promise<number>;
  getRow(partition: string, table: string, rowId: string): Promise<StoredRow | undefined>;
  getPushResult(partition: string, clientId: string, clientCommitId: string): Promise<LegacyPushResult | undefined>;
  scanRows(
    partition: string,
    query: { readonly table: string; readonly scopeFilter: ScopeMap; readonly afterRowId: string | null; readonly limit: number },
  ): Promise<StoredRow[]>;
  /** The 0.15 request: already wrapped SQL instead of a relation plan. */
  queryAuthoritative?(
    partition: string,
    query: { readonly sql: string; readonly params: readonly (string | number | bigint | boolean | Uint8Array | null)[]; readonly tables: readonly string[] },
  ): Promise<{ readonly rows: readonly Readonly<Record<string, unknown>>[]; readonly maxCommitSeq: number }>;
  touchPartition(partition: string, authenticatedAtMs: number, initialLogEpoch: string): Promise<{ readonly partition: string; readonly logEpoch: string }>;
  listPartitions(): Promise<string[]>;
}

export const legacy: LegacyServerStorage = new NativeStorage({ url: 'sqlite:/var/lib/app/sync.db' });
export const legacyComplete: Required<LegacyServerStorage> = new NativeStorage();

export async function prune(s: LegacyServerStorage): Promise<number> {
  await s.setHorizonSeq('p', 10);
  return s.pruneCommitsThrough('p', 10);
}

// @syncular/server's synchronous SQLite surface (sqlite-driver.ts), which its
// SqliteSegmentStore, SqliteBlobStore and SqliteLeaseStore take.
type SqliteValue = string | number | bigint | boolean | Uint8Array | null;
interface SqliteRunResult {
  readonly changes: number | bigint;
  readonly lastInsertRowid: number | bigint;
}
interface SqliteStatement<Row, Params extends readonly SqliteValue[]> {
  run(...params: Params): SqliteRunResult;
  get(...params: Params): Row | null;
  all(...params: Params): Row[];
}
interface SqliteDatabase {
  exec(sql: string): void;
  run(sql: string, bindings?: readonly SqliteValue[]): SqliteRunResult;
  query<Row = Record<string, SqliteValue>, Params extends readonly SqliteValue[] = SqliteValue[]>(sql: string): SqliteStatement<Row, Params>;
  close(): void;
}

export const storesDb: SqliteDatabase = new NativeStorage({ url: 'sqlite:/var/lib/app/sync.db' }).db;
export function segmentRow(db: SqliteDatabase): { segment_id: string } | null {
  return db.query<{ segment_id: string }, [string]>('SELECT segment_id FROM sync_segments WHERE segment_id=?').get('s1');
}
