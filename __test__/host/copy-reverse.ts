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
import { createHost, fill, pushSequential } from '../../bench/lib/server.mjs';
import { serverSchema, TABLE } from '../../bench/lib/fixture.mjs';
import { core, report, server } from './upstream.ts';
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');
const [path, schema] = process.argv.slice(2);
const url = process.env.SYNCULAR_TEST_PG_URL as string;
const PARTITION = 'p1';

async function start(storage: any) {
  if (typeof server.ensureSyncServerReady === 'function') {
    await server.ensureSyncServerReady({ schema: serverSchema, storage });
  }
  return createHost(server, core, storage, PARTITION);
}

/** The pull requests copy.ts compares: windows from several cursors, then a bootstrap to its end. */
async function answers(host: any) {
  const max = Number(await host.storage.getMaxCommitSeq(PARTITION));
  const frames = (cursor: number, limitCommits: number, state?: unknown) => [
    { type: 'PULL_HEADER', limitCommits, limitSnapshotRows: 7, maxSnapshotPages: 2, accept: 0b0011 },
    {
      type: 'SUBSCRIPTION',
      id: 'tasks',
      table: TABLE,
      scopes: { project_id: ['p1'] },
      cursor,
      ...(state !== undefined ? { bootstrapState: state } : {}),
    },
  ];
  const bytes: Uint8Array[] = [];
  for (const cursor of [0, 1, Math.floor(max / 2), max - 1, max]) {
    for (const limit of [1, 10, 100]) bytes.push(await host.handle(host.request('copy-puller', frames(cursor, limit))));
  }
  let state: unknown;
  for (let page = 0; page < 100; page++) {
    const answer = await host.handle(host.request('copy-bootstrapper', frames(-1, 100, state)));
    bytes.push(answer);
    const message = core.decodeMessage(answer);
    const sub = message.frames.find((f: any) => f.type === 'SUB_END' || f.type === 'SUB_START');
    state = message.frames.find((f: any) => f.bootstrapState !== undefined && f.bootstrapState !== null)?.bootstrapState;
    if (state === undefined || sub === undefined) break;
  }
  for (const b of bytes) host.decode(b); // throws on an ERROR frame
  return { bytes, max };
}

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
let firstDiff: number | undefined;
for (let i = 0; i < Math.max(before.bytes.length, after.bytes.length); i++) {
  const x = before.bytes[i];
  const y = after.bytes[i];
  if (!x || !y || x.length !== y.length || !x.every((v, j) => v === y[j])) {
    firstDiff = i;
    break;
  }
}
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
