// Refusals whose code upstream's StorageQueryError does not know, thrown
// through the host's classes (`errors: server`). Prints, for each, what an
// operator would see of it: String(err), err.message, the stack's first
// line, a JSON logger's view, Bun's inspect, and whether it is still the
// host's class.
//
//   bun query-errors.ts sqlite <path>
//   bun query-errors.ts postgres <url> <pg-schema>
import { serverSchema } from '../../bench/lib/fixture.mjs';
import { native, report, server } from './upstream.ts';

const [engine, where, pgSchema] = process.argv.slice(2);
const compiled = server.compileSchema(serverSchema);
const open = () =>
  engine === 'sqlite'
    ? native.createStorage({ url: `sqlite:${where}`, errors: server })
    : native.createStorage({ url: where, schema: pgSchema, errors: server });

function seen(err: any) {
  return {
    instanceOfHost: err instanceof server.StorageQueryError,
    name: err?.name,
    code: err?.code ?? null,
    details: err?.details ?? null,
    message: err?.message,
    string: String(err),
    stackHead: typeof err?.stack === 'string' ? err.stack.split('\n')[0] : null,
    json: JSON.parse(JSON.stringify(err)),
    inspect: Bun.inspect(err),
  };
}

async function caught(run: () => unknown) {
  try {
    await run();
  } catch (err) {
    return seen(err);
  }
  return null;
}

// A row table missing an app column at the stored schema version: on SQLite
// in a database upstream's own storage wrote, on PostgreSQL in the table
// this package created.
if (engine === 'sqlite') {
  const inTree = new server.SqliteServerStorage(where);
  await inTree.ensureSchema(compiled);
  inTree.db.exec('ALTER TABLE tasks DROP COLUMN title');
  inTree.db.close();
} else {
  const first = open();
  await first.ensureSchema(compiled);
  await first.close();
  const sql = new Bun.SQL(where);
  await sql.unsafe(`ALTER TABLE "${pgSchema}"."tasks" DROP COLUMN title`);
  await sql.close();
}

const storage = open();
const layout = await caught(() => storage.ensureSchema(compiled));
const prune = await caught(() => storage.pruneCommitsThrough('p1', { throughSeq: -1, logEpoch: 'e' }));
await storage.close();
report({ layout, prune });
