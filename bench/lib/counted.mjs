// One workload for bench/instructions.sh, run under callgrind:
//
//   <runtime> bench/lib/counted.mjs PACKAGE_DIR WORKLOAD N
//
// PACKAGE_DIR holds a built checkout of this package (index.js, lib/,
// native/). WORKLOAD is one of push1, push10, conc16 (16 pushers, 16
// partitions, N commits in all), window (N 100-change window reads over
// 300 commits), touch (N rounds of touchPartition + getMaxCommitSeq) or
// request (N rounds of the point calls a pull request makes around its
// reads: getClientRecord twice, getMaxCommitSeq, getHorizonSeq,
// putClientRecord, touchPartition) or pull (N rounds of what a window
// pull makes: getClientRecord, a 100-change window read, putClientRecord
// and touchPartition, so each read follows two commits) or scan (N
// 1,000-row scope scans, a bootstrap page, over 2,000 rows of one scope)
// or index100 / index1000 (N scanRowsByIndex lookups of 100 or 1,000 rows
// over 2,000 rows of one indexed value), on a SQLite file at
// synchronous=NORMAL.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import * as W from './workloads.mjs';
import { schema, TABLE } from './fixture.mjs';
import { push } from './host.mjs';

const [dir, workload, count] = process.argv.slice(2);
const N = Number(count);
if (!dir || !Number.isSafeInteger(N) || N < 16) throw new Error('usage: counted.mjs PACKAGE_DIR WORKLOAD N (N >= 16)');
const { NativeStorage } = createRequire(import.meta.url)(join(resolve(dir), 'index.js'));
const tmp = mkdtempSync(join(tmpdir(), 'syncular-counted-'));
const storage = new NativeStorage({ url: `sqlite:${join(tmp, 'db.sqlite')}`, synchronous: 'normal' });
try {
  if (workload === 'push1') await W.pushSequential(storage, 1, N);
  else if (workload === 'push10') await W.pushSequential(storage, 10, N);
  else if (workload === 'conc16') await W.pushConcurrent(storage, 16, Math.floor(N / 16), 16);
  else if (workload === 'window') {
    await W.populate(storage, 0, 300);
    await W.windowReads(storage, N);
  } else if (workload === 'scan') {
    await storage.ensureSchema(schema);
    for (let c = 0; c < 20; c++) await push(storage, 'bootstrap', `boot-${c}`, W.batch(`b${c}`, 'p1', 100, c), c);
    for (let i = 0; i < N; i++) {
      const rows = await storage.scanRows('bootstrap', { table: TABLE, scopeFilter: { project_id: ['p1'] }, afterRowId: i % 2 ? 'b1' : null, limit: 1000 });
      if (rows.length !== 1000) throw new Error(`scan: ${rows.length} rows`);
    }
  } else if (workload === 'index100' || workload === 'index1000') {
    await W.populateIndexed(storage);
    await W.indexLookups(storage, N, workload === 'index100' ? 100 : 1000);
  } else if (workload === 'touch') {
    await storage.ensureSchema(schema);
    for (let i = 0; i < N; i++) {
      await storage.touchPartition('p', i, 'epoch');
      await storage.getMaxCommitSeq('p');
    }
  } else if (workload === 'request') {
    await storage.ensureSchema(schema);
    const client = { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 0, subscriptions: [], updatedAtMs: 0 };
    await storage.putClientRecord('p', client);
    for (let i = 0; i < N; i++) {
      await storage.getClientRecord('p', 'c');
      await storage.getMaxCommitSeq('p');
      await storage.getHorizonSeq('p');
      await storage.getClientRecord('p', 'c');
      await storage.putClientRecord('p', { ...client, updatedAtMs: i });
      await storage.touchPartition('p', i, 'epoch');
    }
  } else if (workload === 'pull') {
    await W.populate(storage, 0, 300);
    const max = await storage.getMaxCommitSeq('window');
    const client = { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 0, subscriptions: [], updatedAtMs: 0 };
    await storage.putClientRecord('window', client);
    for (let i = 0; i < N; i++) {
      await storage.getClientRecord('window', 'c');
      const afterSeq = (i * 97) % Math.max(1, max - 100);
      const commits = await storage.readCommitWindow('window', { table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterSeq, throughSeq: max, limitChanges: 100 });
      if (commits.length === 0) throw new Error('pull: an empty window');
      await storage.putClientRecord('window', { ...client, cursor: afterSeq, updatedAtMs: i });
      await storage.touchPartition('window', i, 'epoch');
    }
  } else throw new Error(`unknown workload ${workload}`);
} finally {
  await storage.close();
  rmSync(tmp, { recursive: true, force: true });
}
