// The misconfiguration storage.db exists to avoid: upstream's stores on
// bun:sqlite (a second copy of SQLite in this process) on the storage's own
// file. The storage refuses to write, with a coded error naming the fix,
// instead of sharing the file with broken locks.
//
// Usage: bun foreign-sqlite.ts DIR. Two files: on `before.db` bun:sqlite
// opens the file before the storage does, on `after.db` after the storage
// has written to it. Prints the codes seen; the caller checks both files
// with the sqlite3 shell afterwards.
import { linkSync } from 'node:fs';
import { join } from 'node:path';
import { createHost } from '../../bench/lib/server.mjs';
import { core, native, report, server } from './upstream.ts';

const dir = process.argv[2];
if (!dir) throw new Error('usage: foreign-sqlite.ts DIR');

async function codeOf(run: () => Promise<unknown>) {
  try {
    await run();
    return null;
  } catch (e) {
    return { code: (e as { code?: string }).code ?? null, message: String((e as Error).message) };
  }
}

// 1. bun:sqlite first (the stores a host built at startup), then the storage.
const before = join(dir, 'before.db');
const bunFirst = new server.BunSqliteDatabase(before);
const segmentsFirst = new server.SqliteSegmentStore(bunFirst);
new server.SqliteBlobStore(bunFirst);
const s1 = new native.NativeStorage({ url: `sqlite:${before}` });
const atOpen = await codeOf(() => createHost(server, core, s1, 'p', { segments: segmentsFirst }));
const atOpenAgain = await codeOf(() => s1.touchPartition('p', Date.now(), 'epoch'));
await s1.close();
bunFirst.close();

// 2. The storage first, writing; then bun:sqlite opens the same file and
// runs its stores' statements; the storage's next writes are refused.
const afterPath = join(dir, 'after.db');
const s2 = new native.NativeStorage({ url: `sqlite:${afterPath}` });
await createHost(server, core, s2, 'p');
await s2.touchPartition('p', Date.now(), 'bench-log-epoch');
const bunLater = new server.BunSqliteDatabase(afterPath);
new server.SqliteLeaseStore(bunLater);
const t = performance.now();
let later = null;
let writesBeforeRefusal = 0;
while (performance.now() - t < 5000) {
  later = await codeOf(() => s2.touchPartition('p', Date.now(), 'bench-log-epoch'));
  if (later !== null) break;
  writesBeforeRefusal++;
  await new Promise((r) => setTimeout(r, 25));
}
const refusedAfterMs = Math.round(performance.now() - t);
const dbWrite = await codeOf(async () => s2.db.exec('CREATE TABLE IF NOT EXISTS side(a)'));
const readsStill = (await s2.listPartitions()).includes('p') && s2.db.query('SELECT 1 AS one').get().one === 1;
// The storage's descriptors stay open until its close; bun's close comes
// after, so neither drops the other's locks while it is still in use.
await s2.close();
bunLater.close();

// 3. The storage first; then bun:sqlite opens a hard link of the file (a
// name of its own, so its own -wal and -shm beside it).
const linkedPath = join(dir, 'linked.db');
const s3 = new native.NativeStorage({ url: `sqlite:${linkedPath}` });
await createHost(server, core, s3, 'p');
await s3.touchPartition('p', Date.now(), 'bench-log-epoch');
linkSync(linkedPath, join(dir, 'alias.db'));
const bunAlias = new server.BunSqliteDatabase(join(dir, 'alias.db'));
new server.SqliteLeaseStore(bunAlias);
const t3 = performance.now();
let linked = null;
while (performance.now() - t3 < 5000) {
  linked = await codeOf(() => s3.touchPartition('p', Date.now(), 'bench-log-epoch'));
  if (linked !== null) break;
  await new Promise((r) => setTimeout(r, 25));
}
await s3.close();
bunAlias.close();

report({ atOpen, atOpenAgain, later, dbWrite, refusedAfterMs, writesBeforeRefusal, readsStill, linked });
