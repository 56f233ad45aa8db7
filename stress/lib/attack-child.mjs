// One process of the generated attack run (stress/attack.mjs): queries
// `start`…`end - 1` of the run against a seeded storage, one JSON line per
// query on stdout. A call that does not settle within queryTimeoutMs +
// margin is a hang: the line says so and the process exits, because a
// runaway native call may hold a thread (or the JS thread) for good; the
// parent goes on from the next index in a new process.
// argv[2]: JSON { engine: 'sqlite-memory' | 'sqlite-file' | 'postgres', url?,
// schemaPrefix?, dir?, start, end, seed, queryTimeoutMs, marginMs,
// overrunMs?, stallMs?, maxResultBytes? }.
// Beyond the answer scan, each call is judged by:
// - a differential oracle: a storage-level call that answered is run again
//   on a control storage holding the same own partition but other data in
//   every other partition and internal table; any difference is a leak
//   (row counts, EXISTS, aggregates carry no marker to scan for);
// - its error message, scanned for the other partitions' markers;
// - its duration (past queryTimeoutMs + overrunMs is an overrun), the
//   longest event-loop stall while it ran (past stallMs is a stall) and the
//   growth of the process's RSS while it ran (past maxResultBytes +
//   rssSlack(maxResultBytes) is a memory overrun);
// - for a partition that is not a string: anything but a refusal with
//   ERR_SYNCULAR_INVALID_ARGUMENT is a leak.
// Storages also hold more tenants' rows (30 on PostgreSQL, 4 on SQLite),
// and the PostgreSQL and SQLite-file ones are ANALYZEd, so the planner has
// the choice of plans that would leak.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { TIME_SCALE } from '../../__test__/support/emulation.mjs';
import { measured } from '../../__test__/support/measure.mjs';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { taskRow, writeCommit } from '../../__test__/support/harness.mjs';
import { INTERNAL_MARK, OWN, VICTIM, VICTIM_MARK, attempt, digest, scanAnswer, seedTenants } from '../../__test__/support/isolation.mjs';
import { generate } from './attack-grammar.mjs';
import { Psql } from './sql.mjs';

/** How far past its limit a call may settle (issue 28's acceptance; tests on a debug build pass more). */
export const OVERRUN_MS = 100 * TIME_SCALE;
/** The longest event-loop stall a call may cause (likewise; both times SYNCULAR_TEST_TIME_SCALE on a slower machine). */
export const STALL_MS = 50 * TIME_SCALE;
/** The result bound the attacked storages run with. */
export const MAX_RESULT_BYTES = 16 << 20;
/**
 * How far past maxResultBytes the process's RSS may grow during one call:
 * the rows the engine held before a refusal (up to the bound) and their JS
 * copies (about the bound again), the allocator's and V8's slack.
 */
export const rssSlack = (maxResultBytes) => 2 * maxResultBytes + (64 << 20);

const cfg = JSON.parse(process.argv[2]);
const overrunMs = cfg.overrunMs ?? OVERRUN_MS;
const stallMs = cfg.stallMs ?? STALL_MS;
const maxResultBytes = cfg.maxResultBytes ?? MAX_RESULT_BYTES;
const dialect = cfg.engine === 'postgres' ? 'postgres' : 'sqlite';
const deadline = cfg.queryTimeoutMs + cfg.marginMs;
let generation = 0;

/** A seeded storage; `tenants` more partitions of `rows` marked rows each (`variant` changes their data). */
async function openOne(name, { tenants, rows, variant }) {
  const opts = { queryTimeoutMs: cfg.queryTimeoutMs, maxResultBytes };
  let storage;
  let schema;
  const file = join(cfg.dir ?? '', `attack-${process.pid}-${generation}-${name}.db`);
  if (cfg.engine === 'sqlite-memory') storage = new NativeStorage({ url: 'sqlite::memory:', ...opts });
  else if (cfg.engine === 'sqlite-file') storage = new NativeStorage({ url: `sqlite:${file}`, ...opts });
  else {
    schema = `${cfg.schemaPrefix}_${process.pid}_${generation}_${name}`;
    storage = new NativeStorage({ url: cfg.url, schema, maxConnections: 4, ...opts });
  }
  await storage.ensureSchema(fixtureSchema());
  await seedTenants(storage);
  for (let t = 0; t < tenants; t += 1) {
    const ops = [];
    for (let k = 0; k < rows; k += 1) {
      const title = `${VICTIM_MARK} t${t} r${k} ${variant}`;
      ops.push({ table: 'tasks', row: taskRow(`${VICTIM_MARK}-t${t}-${k}`, { title, project: `${VICTIM_MARK}-p${t}`, owner: `${VICTIM_MARK}`, count: 777001 }) });
    }
    await writeCommit(storage, `${VICTIM}-${t}`, ops, { clientId: `${VICTIM_MARK}-client-${variant}` });
  }
  if (cfg.engine === 'sqlite-file') {
    // Statistics (sqlite_stat1), read when the storage opens the file again.
    await storage.close();
    execFileSync('sqlite3', [file, 'ANALYZE']);
    storage = new NativeStorage({ url: `sqlite:${file}`, ...opts });
    await storage.ensureSchema(fixtureSchema());
  }
  if (schema !== undefined) {
    // Statistics, as autovacuum would have them: the planner's choice of plans is open.
    const psql = new Psql(cfg.url, { schema });
    try {
      await psql.exec('ANALYZE tasks, accounts');
    } finally {
      await psql.close();
    }
  }
  return storage;
}

async function open() {
  generation += 1;
  const many = dialect === 'postgres' ? 30 : 4;
  const storage = await openOne('a', { tenants: many, rows: 20, variant: 'a' });
  // The control: the same own partition, different data everywhere else.
  const control = await openOne('b', { tenants: many + 3, rows: 23, variant: 'b' });
  return { storage, control };
}

/** A call's outcome, with its duration, the longest event-loop stall and the RSS growth while it ran. */
async function timed(fn, deadlineMs) {
  const m = await measured(() => attempt(fn, deadlineMs));
  if (!m.ok) throw m.error;
  return { outcome: m.value, ms: m.ms, stall: m.stall, rss: m.rss };
}

/** Rows in a comparable form (bytes spelled out, order ignored). */
function canonical(value) {
  const rows = (value?.rows ?? []).map((r) => JSON.stringify(r, (_, x) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? Buffer.from(x).toString('hex') : x)));
  return JSON.stringify(rows.sort());
}

const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

let { storage, control } = await open();
let baseline = await digest(storage, { light: true });

for (let i = cfg.start; i < cfg.end; i += 1) {
  const q = generate(cfg.seed, i, dialect);
  const body = q.form.includes('plan') ? { plan: q.plan, params: q.params, tables: q.tables } : { sql: q.sql, params: q.params, tables: q.tables };
  const line = { i, form: q.form, tags: q.tags };
  // Tells the parent's watchdog a call is under way (a synchronous runaway call blocks this thread).
  out({ start: i });
  let outcome;
  let took;
  if (typeof q.partition !== 'string') {
    // Refused, whatever the form: never taken for a lease or made a string.
    took = await timed(() => (q.form.startsWith('tx') ? storage.begin(q.partition) : storage.queryAuthoritative(q.partition, body)), deadline);
    outcome = took.outcome;
    const row = await attempt(() => storage.getRow(q.partition, 'tasks', 'own-1'), deadline);
    if (outcome.kind === 'answered' && typeof outcome.value?.rollback === 'function') await attempt(() => outcome.value.rollback(), deadline);
    for (const o of [outcome, row]) {
      if (o.kind === 'answered' || (o.kind === 'refused' && o.code !== 'ERR_SYNCULAR_INVALID_ARGUMENT')) {
        line.foreign = [`partition ${JSON.stringify(q.partition)} not refused: ${o.kind} ${o.code ?? ''}`];
      }
    }
  } else if (q.form.startsWith('tx')) {
    const tx = await storage.begin(OWN);
    try {
      await tx.lockPartitionForPush();
      took = await timed(() => tx.queryAuthoritative(body), deadline);
      outcome = took.outcome;
      // A statement given up inside one uninterruptible call ends its
      // transaction (PostgreSQL, docs/bounds.md): its calls then say so.
      const givenUp = outcome.kind === 'refused' && outcome.code === 'ERR_SYNCULAR_QUERY_TIMEOUT' && /transaction was rolled back/.test(outcome.message ?? '');
      if (outcome.kind !== 'hang') {
        // Otherwise the push goes on after the query, refused or not, and commits what it staged.
        const own = await attempt(() => tx.getRow('tasks', 'own-1'), deadline);
        const committed = own.kind === 'hang' ? own : await attempt(() => tx.commit(), deadline);
        const finished = (o) => o.kind === 'refused' && o.code === 'ERR_SYNCULAR_TX_FINISHED';
        const usable = own.kind === 'answered' && own.value?.rowId === 'own-1' && committed.kind === 'answered';
        if (givenUp ? !finished(own) || !finished(committed) : !usable) {
          line.txBroken = `${givenUp ? 'given up: ' : ''}${own.kind} ${own.code ?? ''} / commit ${committed.kind} ${committed.code ?? ''}`;
        }
        if (own.kind === 'hang' || committed.kind === 'hang') outcome = { kind: 'hang' };
      }
    } finally {
      if (outcome?.kind !== 'hang') await attempt(() => tx.rollback(), deadline);
    }
  } else {
    took = await timed(() => storage.queryAuthoritative(OWN, body), deadline);
    outcome = took.outcome;
    if (outcome.kind === 'answered') {
      const other = await attempt(() => control.queryAuthoritative(OWN, body), deadline);
      // A query near its time limit may answer on one storage and stop on
      // the other: that says nothing about what it read.
      const inconclusive = other.kind === 'refused' && other.code === 'ERR_SYNCULAR_QUERY_TIMEOUT';
      if (!inconclusive && (other.kind !== 'answered' || canonical(other.value) !== canonical(outcome.value))) {
        line.foreign = [`differs on a storage with other tenants' data: ${other.kind} ${other.code ?? ''} ${canonical(other.value).slice(0, 120)} vs ${canonical(outcome.value).slice(0, 120)}`];
      }
    }
  }
  if (took !== undefined && outcome.kind !== 'hang') {
    if (took.ms > cfg.queryTimeoutMs + overrunMs) line.overrun = Math.round(took.ms);
    if (took.stall > stallMs) line.stall = Math.round(took.stall);
    if (took.rss > maxResultBytes + rssSlack(maxResultBytes)) line.memory = Math.round(took.rss / 2 ** 20);
    line.ms = Math.round(took.ms);
    line.stallMs = Math.round(took.stall);
    line.rssMiB = Math.round(took.rss / 2 ** 20);
  }
  if (outcome.kind === 'refused' || outcome.kind === 'uncoded') {
    if (outcome.message?.includes(VICTIM_MARK)) line.foreign = [`error message: ${outcome.message.slice(0, 160)}`];
    else if (outcome.message?.includes(INTERNAL_MARK)) line.internal = [`error message: ${outcome.message.slice(0, 160)}`];
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
      await attempt(() => control.close(), deadline);
      ({ storage, control } = await open());
      baseline = await digest(storage, { light: true });
    }
  }
  if (outcome.kind === 'uncoded') line.message = outcome.message;
  if (line.foreign || line.internal || line.write || line.txBroken || line.overrun || line.stall || line.memory || outcome.kind === 'uncoded') {
    line.sql = q.sql;
    line.params = q.params;
    if (outcome.message) line.message = outcome.message;
  }
  out(line);
}
await attempt(() => storage.close(), deadline);
await attempt(() => control.close(), deadline);
process.exit(0);
