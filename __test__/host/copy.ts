// The move to PostgreSQL through upstream's real handler (issue 51,
// docs/copy.md): a host on a SQLite file writes a history through the
// handler; `storage.copyTo(url, { finalPass: true, verify: true })` moves
// it while the storage is open; a host started on the PostgreSQL copy with
// the same schema answers the same pull requests (incremental windows from
// several cursors, and a paged bootstrap) byte for byte, and writes on.
//
//   bun __test__/host/copy.ts <sqlite file> <postgres schema>
//
// Prints one JSON line: { ok, requests, identical, firstDiff?, verify, commits }.
import { fill, pushSequential } from '../../bench/lib/server.mjs';
import { firstDifference, pullAnswers, startHost } from './pulls.ts';
import { report, server } from './upstream.ts';
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');
const [path, schema] = process.argv.slice(2);
const url = process.env.SYNCULAR_TEST_PG_URL as string;
const PARTITION = 'p1';

const start = (storage: any) => startHost(storage, PARTITION);
const answers = (host: any) => pullAnswers(host, PARTITION, 'copy');

// 1. The SQLite host writes the history: new rows, then updates of old ones.
const source = new NativeStorage({ url: `sqlite:${path}`, errors: server });
let host = await start(source);
await fill(host, 'a', 60, 3);
await pushSequential(host, 2, 8);
const before = await answers(host);

// 2. The move, with the storage open.
const moved = await source.copyTo(url, { schema, finalPass: true, verify: true });
let refused = '';
try {
  await fill(host, 'late', 1, 1);
} catch (err: any) {
  refused = String(err?.code ?? err?.message ?? err);
}
await source.close();

// 3. A host on the copy answers the same requests, byte for byte.
const target = new NativeStorage({ url, schema, errors: server, maxConnections: 4 });
host = await start(target);
const after = await answers(host);
const firstDiff = firstDifference(before.bytes, after.bytes);
// And it writes on, continuing the same log.
await fill(host, 'b', 5, 1);
const finalMax = Number(await target.getMaxCommitSeq(PARTITION));
await target.close();

report({
  ok: firstDiff === undefined && moved.verify.equal === true,
  requests: before.bytes.length,
  identical: firstDiff === undefined,
  ...(firstDiff !== undefined ? { firstDiff } : {}),
  verify: moved.verify.equal,
  writesHeldMs: moved.finalPass.writesHeldMs,
  refusedAfterMove: refused,
  commits: { before: before.max, after: after.max, final: finalMax },
});
