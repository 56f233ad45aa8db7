// Two clients push rows that violate a unique index, through upstream's own
// request handler. Prints what each request answered (or threw), what the
// retry of the violating commit answered, and what the storage holds.
//
//   bun constraint-push.ts native <url> [pg-schema]   this package, errors: server
//   bun constraint-push.ts in-tree <path>             upstream's SQLite storage (the reference)
import { createHost } from '../../bench/lib/server.mjs';
import { encodeTask, serverSchema, TABLE } from '../../bench/lib/fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const [kind, where, pgSchema] = process.argv.slice(2);

// The bench's table with its title unique: two rows with one title collide.
const schema = {
  ...serverSchema,
  tables: serverSchema.tables.map((t) => ({
    ...t,
    indexes: [{ name: 'tasks_title_unique', columns: ['title'], unique: true }],
  })),
};

const storage =
  kind === 'in-tree'
    ? new server.SqliteServerStorage(where)
    : native.createStorage({ url: where, errors: server, ...(pgSchema ? { schema: pgSchema } : {}) });

const host = await createHost(server, core, storage, 'p-unique', { schema });

/** One commit upserting `rows` ([rowId, n]: the title is `title n`). */
function push(clientId: string, commitId: string, rows: [string, number][]) {
  return host.request(clientId, [
    {
      type: 'PUSH_COMMIT',
      clientCommitId: commitId,
      operations: rows.map(([rowId, n]) => ({ table: TABLE, rowId, op: 'upsert', payload: encodeTask(rowId, 'p1', n) })),
    },
  ]);
}

/** What one request answered: its PUSH_RESULT, an ERROR frame, or what it threw. */
async function answer(bytes: Uint8Array) {
  let response: Uint8Array;
  try {
    response = await host.handle(bytes);
  } catch (err: any) {
    return { threw: { name: err?.name, code: err?.code, message: String(err?.message) } };
  }
  const frames = core.decodeMessage(response).frames;
  const error = frames.find((f: any) => f.type === 'ERROR');
  if (error) return { error: { code: error.code, message: error.message } };
  const result = frames.find((f: any) => f.type === 'PUSH_RESULT');
  return {
    status: result?.status,
    commitSeq: result?.commitSeq ?? null,
    results: (result?.results ?? []).map((r: any) => ({ opIndex: r.opIndex, status: r.status, code: r.code ?? null })),
  };
}

const first = await answer(push('client-a', 'a-1', [['r1', 7]]));
// Its second operation takes r1's title; the first alone would apply.
const violating: [string, number][] = [['r3', 8], ['r2', 7]];
const second = await answer(push('client-b', 'b-1', violating));
// The same commit again (a client retrying after a lost response).
const retry = await answer(push('client-b', 'b-1', violating));
const stored = await storage.getPushResult('p-unique', 'client-b', 'b-1');
const rows = await storage.scanRows('p-unique', { table: TABLE, scopeFilter: { project_id: ['p1'] }, limit: 10 });
report({
  first,
  second,
  retry,
  stored: stored === undefined ? null : { status: stored.status, codes: stored.results.map((r: any) => r.code ?? null) },
  rowIds: rows.map((r: any) => r.rowId).sort(),
  maxCommitSeq: Number(await storage.getMaxCommitSeq('p-unique')),
});
await storage.close?.();
