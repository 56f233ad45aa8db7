// Swap in and back on a SQLite file with a unique index, through upstream's
// own request handler (issue 48): the in-tree 0.15.48 host refuses a title
// another partition holds; this package, swapped in, keeps uniqueness per
// partition and accepts it; `restoreLayout()` refuses while such a pair
// exists, restores once it is gone; the in-tree host swapped back refuses
// the cross-partition duplicate again, as it did before.
//
//   bun restore.ts <file> [--no-restore]
//
// With --no-restore the swap back skips restoreLayout (the control: the
// in-tree host then accepts the duplicate).
// Prints one JSON line with what each step answered.
import { createHost } from '../../bench/lib/server.mjs';
import { encodeTask, serverSchema, TABLE } from '../../bench/lib/fixture.mjs';
import { core, native, report, server } from './upstream.ts';

const [where, flag] = process.argv.slice(2);
const restore = flag !== '--no-restore';

// The bench's table with its title unique.
const schema = {
  ...serverSchema,
  tables: serverSchema.tables.map((t) => ({
    ...t,
    indexes: [{ name: 'tasks_title_unique', columns: ['title'], unique: true }],
  })),
};

async function close(storage: any) {
  if (typeof storage.close === 'function') await storage.close();
  else storage.db?.close?.();
}

/** A push of one operation on `rowId` (title `title n`) into `partition`: what it answered. */
async function push(storage: any, partition: string, commitId: string, rowId: string, n: number, op = 'upsert') {
  const host = await createHost(server, core, storage, partition, { schema });
  const operation =
    op === 'upsert' ? { table: TABLE, rowId, op, payload: encodeTask(rowId, 'p1', n) } : { table: TABLE, rowId, op };
  let response: Uint8Array;
  try {
    response = await host.handle(host.request(`client-${partition}`, [{ type: 'PUSH_COMMIT', clientCommitId: commitId, operations: [operation] }]));
  } catch (err: any) {
    return { threw: String(err?.message) };
  }
  const frames = core.decodeMessage(response).frames;
  const error = frames.find((f: any) => f.type === 'ERROR');
  if (error) return { error: error.code };
  return { status: frames.find((f: any) => f.type === 'PUSH_RESULT')?.status };
}

async function code(p: Promise<unknown>) {
  try {
    return { value: await p };
  } catch (err: any) {
    return { code: err?.code, message: String(err?.message) };
  }
}

// 1. The in-tree host: a title in one partition, refused in another.
let storage: any = new server.SqliteServerStorage(where);
const first = await push(storage, 'p-a', 'a-1', 'r1', 7);
const refusedBefore = await push(storage, 'p-b', 'b-1', 'r2', 7);
await close(storage);

// 2. Swapped in: the same title in another partition is accepted.
storage = native.createStorage({ url: `sqlite:${where}`, errors: server });
const acceptedByOurs = await push(storage, 'p-b', 'b-2', 'r2', 7);
const conflict = restore ? await code(storage.restoreLayout()) : null;
const deleted = await push(storage, 'p-b', 'b-3', 'r2', 7, 'delete');
const restored = restore ? await code(storage.restoreLayout()) : null;
await close(storage);

// 3. Swapped back: refused again.
storage = new server.SqliteServerStorage(where);
const refusedAfter = await push(storage, 'p-c', 'c-1', 'r3', 7);
const stillServes = await push(storage, 'p-c', 'c-2', 'r4', 8);
await close(storage);

report({ ok: true, first, refusedBefore, acceptedByOurs, conflict, deleted, restored, refusedAfter, stillServes });
