// The copy back from PostgreSQL into a SQLite file through upstream's real
// handler (issue 51, docs/copy.md): a host on a PostgreSQL schema writes a
// history through the handler; `storage.copyTo('sqlite:…', { verify: true })`
// takes a snapshot of it while the storage stays open; a host started on
// the SQLite file with the same schema answers the same pull requests
// (incremental windows from several cursors, and a paged bootstrap) byte
// for byte, and writes on.
//
//   bun __test__/host/copy-reverse.ts <sqlite file> <postgres schema>
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

// 1. The PostgreSQL host writes the history: new rows, then updates of old ones.
const source = new NativeStorage({ url, schema, errors: server, maxConnections: 4 });
let host = await start(source);
await fill(host, 'a', 60, 3);
await pushSequential(host, 2, 8);
const before = await answers(host);

// 2. The snapshot, with the storage open; a write after it is not in the copy.
const copied = await source.copyTo(`sqlite:${path}`, { verify: true });
await fill(host, 'late', 1, 1);
const sourceMax = Number(await source.getMaxCommitSeq(PARTITION));
await source.close();

// 3. A host on the SQLite file answers the same requests, byte for byte.
const target = new NativeStorage({ url: `sqlite:${path}`, errors: server });
host = await start(target);
const after = await answers(host);
const firstDiff = firstDifference(before.bytes, after.bytes);
// And it writes on, continuing the same log from the snapshot.
await fill(host, 'b', 5, 1);
const finalMax = Number(await target.getMaxCommitSeq(PARTITION));
await target.close();

report({
  ok: firstDiff === undefined && copied.verify.equal === true,
  requests: before.bytes.length,
  identical: firstDiff === undefined,
  ...(firstDiff !== undefined ? { firstDiff } : {}),
  verify: copied.verify.equal,
  rows: copied.rows,
  commits: { before: before.max, after: after.max, source: sourceMax, final: finalMax },
});
