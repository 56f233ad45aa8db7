// One process of the generated attack run (stress/attack.mjs): queries
// `start`…`end - 1` of the run against a seeded storage, one JSON line per
// query on stdout. A call that does not settle within queryTimeoutMs +
// margin is a hang: the line says so and the process exits, because a
// runaway native call may hold a thread (or the JS thread) for good; the
// parent goes on from the next index in a new process.
// argv[2]: JSON { engine: 'sqlite-memory' | 'sqlite-file' | 'postgres', url?,
// schemaPrefix?, dir?, start, end, seed, queryTimeoutMs, marginMs }.
import { join } from 'node:path';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { OWN, attempt, digest, scanAnswer, seedTenants } from '../../__test__/support/isolation.mjs';
import { generate } from './attack-grammar.mjs';

const cfg = JSON.parse(process.argv[2]);
const dialect = cfg.engine === 'postgres' ? 'postgres' : 'sqlite';
const deadline = cfg.queryTimeoutMs + cfg.marginMs;
let generation = 0;

async function open() {
  generation += 1;
  const opts = { queryTimeoutMs: cfg.queryTimeoutMs };
  let storage;
  if (cfg.engine === 'sqlite-memory') storage = new NativeStorage({ url: 'sqlite::memory:', ...opts });
  else if (cfg.engine === 'sqlite-file') storage = new NativeStorage({ url: `sqlite:${join(cfg.dir, `attack-${process.pid}-${generation}.db`)}`, ...opts });
  else storage = new NativeStorage({ url: cfg.url, schema: `${cfg.schemaPrefix}_${process.pid}_${generation}`, maxConnections: 4, ...opts });
  await storage.ensureSchema(fixtureSchema());
  await seedTenants(storage);
  return storage;
}

const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

let storage = await open();
let baseline = await digest(storage, { light: true });

for (let i = cfg.start; i < cfg.end; i += 1) {
  const q = generate(cfg.seed, i, dialect);
  const body = q.form.includes('plan') ? { plan: q.plan, params: q.params, tables: q.tables } : { sql: q.sql, params: q.params, tables: q.tables };
  const line = { i, form: q.form, tags: q.tags };
  // Tells the parent's watchdog a call is under way (a synchronous runaway call blocks this thread).
  out({ start: i });
  let outcome;
  if (q.form.startsWith('tx')) {
    const tx = await storage.begin(OWN);
    try {
      await tx.lockPartitionForPush();
      outcome = await attempt(() => tx.queryAuthoritative(body), deadline);
      if (outcome.kind !== 'hang') {
        // The push goes on after the query, refused or not, and commits what it staged.
        const own = await attempt(() => tx.getRow('tasks', 'own-1'), deadline);
        const committed = own.kind === 'hang' ? own : await attempt(() => tx.commit(), deadline);
        if (own.kind !== 'answered' || own.value?.rowId !== 'own-1' || committed.kind !== 'answered') {
          line.txBroken = `${own.kind} ${own.code ?? ''} / commit ${committed.kind} ${committed.code ?? ''}`;
        }
        if (own.kind === 'hang' || committed.kind === 'hang') outcome = { kind: 'hang' };
      }
    } finally {
      if (outcome?.kind !== 'hang') await attempt(() => tx.rollback(), deadline);
    }
  } else {
    outcome = await attempt(() => storage.queryAuthoritative(OWN, body), deadline);
  }
  line.kind = outcome.kind;
  if (outcome.code !== undefined) line.code = outcome.code;
  if (outcome.kind === 'answered') {
    const { foreign, internal } = scanAnswer(outcome.value);
    if (foreign.length) line.foreign = foreign.slice(0, 3);
    if (internal.length) line.internal = internal.slice(0, 3);
  }
  if (outcome.kind === 'hang') {
    out({ ...line, sql: q.sql, params: q.params });
    process.exit(0);
  }
  // A refused storage-level call runs in a transaction that is rolled back;
  // the digest checks it now and then, every other call every time.
  if (outcome.kind === 'answered' || q.form.startsWith('tx') || i % 10 === 0) {
    const now = await attempt(() => digest(storage, { light: true }), deadline * 4);
    if (now.kind !== 'answered' || now.value !== baseline) {
      line.write = true;
      // Start over on a fresh storage: the next query must not meet this one's damage.
      await attempt(() => storage.close(), deadline);
      storage = await open();
      baseline = await digest(storage, { light: true });
    }
  }
  if (outcome.kind === 'uncoded') line.message = outcome.message;
  if (line.foreign || line.internal || line.write || line.txBroken || outcome.kind === 'uncoded') {
    line.sql = q.sql;
    line.params = q.params;
    if (outcome.message) line.message = outcome.message;
  }
  out(line);
}
await attempt(() => storage.close(), deadline);
process.exit(0);
