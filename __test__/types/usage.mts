// Direct use of the package's declarations by application code: options,
// results, error classes and codes. `@ts-expect-error` lines must stay
// errors (tsc reports an unused one).
import {
  NativeStorage,
  createStorage,
  versions,
  toPrometheus,
  type StorageStats,
  DecodeError,
  StorageConstraintError,
  StorageQueryError,
  SyncError,
  type ErrorCode,
  type NativeStorageOptions,
  type NativeTransaction,
  type StoredRow,
} from 'syncular-native-storage';

const options: NativeStorageOptions = {
  url: 'sqlite:/var/lib/app/sync.db',
  synchronous: 'normal',
  busyTimeoutMs: 5_000,
  queryTimeoutMs: 10_000,
};
const storage = new NativeStorage(options);
// A console/pino-style object (rest parameters, as console's methods have).
const log = (message: string, ...rest: unknown[]): void => void [message, rest];
new NativeStorage({ logger: { debug: log, info: log, warn: log, error: log }, logFilter: 'syncular=warn,syncular::call=debug' });
new NativeStorage({
  logger: (r) => {
    const micros: string | number | boolean | null | undefined = r.fields['micros'];
    void [r.level, r.target, r.message, micros];
  },
});
// @ts-expect-error a logger is a function or an object with log methods
new NativeStorage({ logger: 'console' });
createStorage();
new NativeStorage({});

// @ts-expect-error not a synchronous mode
new NativeStorage({ synchronous: 'fast' });
// @ts-expect-error maxConnections is a number
new NativeStorage({ url: 'postgres://db/app', maxConnections: '4' });
// @ts-expect-error no such option
new NativeStorage({ poolSize: 4 });

export async function read(): Promise<string | undefined> {
  const row: StoredRow | undefined = await storage.getRow('p', 'tasks', 't1');
  // Absent fields are omitted, so reading one gives `Uint8Array | undefined`.
  const versions: Uint8Array | undefined = row?.columnVersions;
  void versions;
  const floor: number | null = await storage.getActiveClientCursorFloor('p', 0);
  void floor;
  const removed: number = await storage.pruneCommitsThrough('p', 5);
  const result = await storage.pruneCommitsThrough('p', { logEpoch: 'e1', throughSeq: 5 });
  const horizon: number = result.horizonSeq + removed;
  void horizon;
  const tx: NativeTransaction = await storage.begin('p');
  await tx.prefetchRows('tasks', ['t1', 't2']);
  await tx.upsertRow('tasks', { rowId: 't1', serverVersion: 1, scopes: { project_id: 'p1' }, payload: new Uint8Array() }, { opIndex: 0 });
  await tx.rollback();
  return storage.getPartitionLogEpoch('p');
}

export function describe(err: unknown): ErrorCode | undefined {
  if (err instanceof StorageConstraintError) {
    const at: number | undefined = err.opIndex;
    void at;
    return undefined;
  }
  if (err instanceof StorageQueryError) {
    const details: Readonly<Record<string, string>> | undefined = err.details;
    void details;
    return err.code;
  }
  if (err instanceof SyncError || err instanceof DecodeError) return err.code;
  if (err instanceof Error && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

export const timeout: ErrorCode = 'ERR_SYNCULAR_QUERY_TIMEOUT';

export async function operations(storage: NativeStorage): Promise<string> {
  const v: string = versions().sqlite;
  const ping = await storage.ping();
  const engine: 'sqlite' | 'postgres' = ping.engine;
  const ms: number = ping.roundTripMs;
  const stats: StorageStats = await storage.stats();
  const calls: number | undefined = stats.members['tx.upsertRow']?.calls;
  const idle: number | undefined = stats.pool?.idle;
  await storage.backup('/backups/sync.db');
  void [v, engine, ms, calls, idle];
  return toPrometheus(stats, { prefix: 'app_' });
}
