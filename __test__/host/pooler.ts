// A host on this package through a connection pooler in transaction mode,
// driven through upstream's own request handler: 10 clients push 30
// one-row commits each at once (300 requests), then every client pulls
// from its cursor and a fresh one bootstraps, then 16 registered queries
// run at once. Prints what was acknowledged, served and stored, and every
// error met.
//
//   bun pooler.ts <url> <pg-schema>
import { bootstrap, createHost } from '../../bench/lib/server.mjs';
import { encodeTask, TABLE } from '../../bench/lib/fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const [url, pgSchema] = process.argv.slice(2);
const storage = native.createStorage({ url, schema: pgSchema, maxConnections: 8, errors: server });
const partition = 'p-pooler';
const host = await createHost(server, core, storage, partition);
const errors: string[] = [];

function frames(bytes: Uint8Array) {
  return core.decodeMessage(bytes).frames as any[];
}

const CLIENTS = 10;
const EACH = 30;
const acked: { clientCommitId: string; commitSeq: number }[] = [];
await Promise.all(
  Array.from({ length: CLIENTS }, async (_, w) => {
    for (let c = 0; c < EACH; c++) {
      const clientCommitId = `c${w}-${c}`;
      const bytes = host.request(`client-${w}`, [
        {
          type: 'PUSH_COMMIT',
          clientCommitId,
          operations: [{ table: TABLE, rowId: `r${w}-${c % 5}`, op: 'upsert', payload: encodeTask(`r${w}-${c % 5}`, 'p1', c) }],
        },
      ]);
      try {
        for (const f of frames(await host.handle(bytes))) {
          if (f.type === 'ERROR') errors.push(`push ${clientCommitId}: ${f.code} ${f.message}`);
          if (f.type === 'PUSH_RESULT') {
            if (f.status === 'applied') acked.push({ clientCommitId, commitSeq: Number(f.commitSeq) });
            else errors.push(`push ${clientCommitId}: ${f.status} ${JSON.stringify(f.results)}`);
          }
        }
      } catch (e: any) {
        errors.push(`push ${clientCommitId}: threw ${e?.code} ${e?.message}`);
      }
    }
  }),
);

// Every client pulls the whole log incrementally from cursor 0.
let pulledChanges = 0;
const pulls = await Promise.all(
  Array.from({ length: CLIENTS }, async (_, w) => {
    const bytes = host.request(`client-${w}`, [
      { type: 'PULL_HEADER', limitCommits: 1000, limitSnapshotRows: 1000, maxSnapshotPages: 4, accept: 0b0011 },
      { type: 'SUBSCRIPTION', id: 'tasks', table: TABLE, scopes: { project_id: ['p1'] }, cursor: 0 },
    ]);
    try {
      const out = frames(await host.handle(bytes));
      const err = out.find((f) => f.type === 'ERROR');
      if (err) errors.push(`pull client-${w}: ${err.code} ${err.message}`);
      let changes = 0;
      for (const f of out) if (f.type === 'COMMIT') changes += f.changes.length;
      pulledChanges += changes;
      return out.find((f) => f.type === 'SUB_START')?.status ?? 'none';
    } catch (e: any) {
      errors.push(`pull client-${w}: threw ${e?.code} ${e?.message}`);
      return 'threw';
    }
  }),
);
let bootstrapRows = 0;
try {
  bootstrapRows = (await bootstrap(host, 'fresh-client', CLIENTS * 5)).rows;
} catch (e: any) {
  errors.push(`bootstrap: ${e?.message}`);
}

// 16 registered queries at once, in the 0.15.x request form.
const queries = await Promise.all(
  Array.from({ length: 16 }, async (_, i) => {
    try {
      const r = await storage.queryAuthoritative(partition, {
        sql: 'SELECT count(*) AS n FROM tasks WHERE id LIKE ?',
        params: [`r${i % CLIENTS}-%`],
        tables: ['tasks'],
      });
      return Number(r.rows[0]?.n ?? r.rows[0]?.[0]);
    } catch (e: any) {
      errors.push(`query ${i}: ${e?.code} ${e?.message}`);
      return -1;
    }
  }),
);

report({
  acked: acked.length,
  seqs: acked.map((a) => a.commitSeq).sort((a, b) => a - b),
  maxCommitSeq: Number(await storage.getMaxCommitSeq(partition)),
  pulls,
  pulledChanges,
  bootstrapRows,
  queries,
  errors,
});
await storage.close();
