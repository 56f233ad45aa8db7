// Runs the runaway-query scenario of contract/isolation.mjs in a process of
// its own: a query the engine fails to stop would otherwise keep a thread
// (SQLite) or a server backend (PostgreSQL) busy and the test process alive.
// Prints one JSON line per step ({ step, ... }) so a parent that has to
// kill this process still knows how far it got.
// argv: engine name, query timeout in ms.
import { engines } from './engines.mjs';
import { fixtureSchema } from './schema.mjs';
import { taskRow, writeCommit } from './harness.mjs';
import { OWN, attempt, planFor, seedTenants, scanAnswer } from './isolation.mjs';

export const RUNAWAY = 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r';
// Names a table, so the plan form and table coverage have something to check.
export const RUNAWAY_TABLE =
  'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT (SELECT count(*) FROM r) AS n, title FROM tasks';

const [name, timeoutArg, scenario] = process.argv.slice(2);
if (name !== undefined) {
  const engine = engines.find((e) => e.name === name);
  const queryTimeoutMs = Number(timeoutArg);
  const deadline = queryTimeoutMs + 5000;
  const say = (step, o) => process.stdout.write(`${JSON.stringify({ step, ...o })}\n`);
  const summary = (o, t0) => ({
    kind: o.kind,
    code: o.code,
    message: o.message,
    ms: Date.now() - t0,
    scan: o.kind === 'answered' ? scanAnswer(o.value) : undefined,
  });
  const timed = async (fn, ms = deadline) => {
    const t0 = Date.now();
    return summary(await attempt(fn, ms), t0);
  };

  const storage = engine.create({ queryTimeoutMs: scenario === 'close' ? 600_000 : queryTimeoutMs });
  await storage.ensureSchema(fixtureSchema());
  await seedTenants(storage);
  say('ready', {});

  if (scenario === 'legacy') {
    // Storage-level legacy form, with other calls issued meanwhile.
    const t0 = Date.now();
    const runaway = attempt(() => storage.queryAuthoritative(OWN, { sql: RUNAWAY, params: [], tables: [] }), deadline);
    await new Promise((r) => setTimeout(r, 50));
    say('others-start', {});
    const others = await Promise.all([
      timed(() => storage.getRow(OWN, 'tasks', 'own-1').then((r) => ({ rows: [{ rowId: r?.rowId }] }))),
      timed(() => storage.queryAuthoritative(OWN, { sql: "SELECT title FROM tasks WHERE id = 'own-1'", params: [], tables: ['tasks'] })),
      timed(() => writeCommit(storage, OWN, [{ table: 'tasks', row: taskRow('own-during', { project: 'p-own', title: 'written meanwhile' }) }]).then((seq) => ({ rows: [{ seq }] }))),
    ]);
    say('others', { others });
    say('runaway', { runaway: summary(await runaway, t0) });
  } else if (scenario === 'plan') {
    const plan = planFor(RUNAWAY_TABLE, ['tasks']);
    say('runaway', { runaway: await timed(() => storage.queryAuthoritative(OWN, { plan: plan.plan, params: [], tables: plan.tables })) });
  } else if (scenario === 'tx') {
    // The transaction-bound form: the query stops, the push carries on.
    const tx = await storage.begin(OWN);
    await tx.lockPartitionForPush();
    say('runaway', { runaway: await timed(() => tx.queryAuthoritative({ sql: RUNAWAY_TABLE, params: [], tables: ['tasks'] })) });
    say('after', { after: await timed(() => tx.getRow('tasks', 'own-1').then((row) => ({ rows: [{ rowId: row?.rowId }] }))) });
    await attempt(() => tx.rollback(), 5000);
  } else if (scenario === 'close') {
    // close() while a runaway query runs under a long limit.
    const l0 = Date.now();
    const pending = attempt(() => storage.queryAuthoritative(OWN, { sql: RUNAWAY, params: [], tables: [] }), 10_000);
    await new Promise((r) => setTimeout(r, 300));
    say('close', { close: await timed(() => storage.close(), 10_000) });
    say('runaway', { runaway: summary(await pending, l0) });
    process.exit(0);
  }
  say('later', { query: await timed(() => storage.queryAuthoritative(OWN, { sql: 'SELECT count(*) AS n FROM tasks', params: [], tables: ['tasks'] })) });
  say('close', { close: await timed(() => storage.close(), 10_000) });
  process.exit(0);
}
