// Hostile input from JS (issue 7 §3). Every member of a NativeStorage and of
// its transactions, enumerated from the objects themselves (a member added
// later is fuzzed with generic arguments until it gets a template), is
// called with valid arguments in which some are replaced by hostile values:
// wrong types, huge strings, NaN/Infinity/negative/fractional/oversized
// numbers, unknown tables, malformed query plans and scope filters.
// Each call must
//   * return a promise (no synchronous throw) that settles,
//   * when it rejects, reject with an Error carrying a string `code`
//     (ERR_SYNCULAR_INTERNAL = a contained Rust panic, counted as a panic),
//   * when it rejects, change nothing (no partial write). A rejected
//     storage-level write rolls its transaction back, so the database and
//     WAL files must be untouched. A rejected transaction member is followed
//     by commit(): SQLite may then rewrite pages a rolled-back statement
//     touched, so when the files changed, the content hash (sqlite3
//     .sha3sum) is compared with a copy taken before the case,
//   * reject when the partition argument is not a string.
// The process itself must survive (the caller runs this in a child in the
// stress run; an abort there shows as a signal).
// With `pgUrl` the storage is a PostgreSQL one on a fresh schema (a new one
// every `recycleEvery` cases, each dropped after use), and "changed
// nothing" is checked on the schema's contents: the row count and an md5 of
// the rows of every table (sql.mjs pgTarget.snapshot), read through psql
// before the case (cached while nothing resolved) and after a rejection.
import { copyFileSync, existsSync, statSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { hostPush, taskRow } from '../../__test__/support/harness.mjs';
import { freshSchemaName, pgTarget } from './sql.mjs';

const NOW = 1_700_000_000_000;
const HASH = 'sha256:' + '0'.repeat(64);

function rng(seed) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  return {
    next,
    below: (n) => Math.floor(next() * n),
    chance: (p) => next() < p,
    pick: (list) => list[Math.floor(next() * list.length)],
  };
}

const HUGE = 'x'.repeat(1 << 20);
const HUGE_UNICODE = '\uD800𝄞\u0000é'.repeat(1 << 16);

/** Hostile values; functions are called for a fresh value each time. */
const HOSTILE = [
  undefined,
  null,
  true,
  false,
  0,
  -0,
  -1,
  1.5,
  -2.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  2 ** 53,
  -(2 ** 53),
  2 ** 63,
  1e308,
  Number.MAX_SAFE_INTEGER,
  2 ** 31,
  2 ** 32 + 1,
  1e9,
  '',
  'x',
  '0',
  '-1',
  'NaN',
  'nope',
  'sync_commits',
  'tasks"; DROP TABLE tasks; --',
  '\u0000',
  '\uD800',
  HUGE,
  HUGE_UNICODE,
  () => ({}),
  () => [],
  () => [1, 'a', null],
  () => ({ a: 1 }),
  () => Object.create(null),
  () => new Uint8Array([1, 2, 3]),
  () => new Date(0),
  () => new Map([['a', 1]]),
  () => Symbol('s'),
  () => 10n,
  () => function f() {},
  () => ({ toString: () => 'tasks', valueOf: () => 1 }),
];

function hostile(g) {
  const v = g.pick(HOSTILE);
  return typeof v === 'function' && v.name !== 'f' ? v() : v;
}

const P = 'fz';
const filter = () => ({ project_id: ['p1', 'p2'] });
const change = () => ({ table: 'tasks', rowId: 'r1', op: 'upsert', rowVersion: 2, scopes: { project_id: 'p1', owner_id: 'u1' }, payload: taskRow('r1').payload });
const pushResult = () => ({ status: 'applied', commitSeq: 1, recordedAtMs: NOW, cacheIdentity: 'ci', results: [{ opIndex: 0, status: 'applied' }] });
const reaction = () => ({
  idempotencyKey: 'rk',
  type: 't',
  version: 1,
  payload: { a: 1 },
  sourceClientId: 'c',
  sourceClientCommitId: 'cc',
  sourceCommitSeq: 1,
  createdAtMs: NOW,
  maxAttempts: 3,
});
const tasksPlan = () => ({ plan: { sql: 'SELECT id FROM tasks', relations: [{ table: 'tasks', start: 15, end: 20 }] }, params: [], tables: ['tasks'] });

/** Valid arguments per storage member. */
const STORAGE = {
  ensureSchema: () => [fixtureSchema()],
  touchPartition: () => [P, NOW, 'e1'],
  rotatePartitionLogEpoch: () => [P, 'e2', NOW],
  listPartitionRegistry: () => [],
  getPartitionLogEpoch: () => [P],
  listPartitions: () => [],
  begin: () => [P],
  getMaxCommitSeq: () => [P],
  getHorizonSeq: () => [P],
  setHorizonSeq: () => [P, 1],
  pruneCommitsThrough: (g) => [P, g.chance(0.5) ? { logEpoch: 'e1', throughSeq: 1 } : 1],
  getCommitSeqBefore: () => [P, NOW],
  getRow: () => [P, 'tasks', 'r1'],
  getPushResult: () => [P, 'c', 'cc'],
  readCommitWindow: () => [P, { table: 'tasks', scopeFilter: filter(), afterSeq: 0, throughSeq: 10, limitChanges: 10 }],
  latestScopedChangeSeq: () => [P, { table: 'tasks', scopeFilter: filter() }],
  scanRows: () => [P, { table: 'tasks', scopeFilter: filter(), afterRowId: null, limit: 10 }],
  queryAuthoritative: (g) => [P, g.chance(0.5) ? tasksPlan() : { sql: 'SELECT id FROM tasks', params: [], tables: ['tasks'] }],
  scanRowsByIndex: () => [P, { table: 'tasks', index: 'tasks_by_title', values: ['t'], afterRowId: null, limit: 10 }],
  readServeGate: () => [P, 1],
  readCheckpoints: () => [P],
  writerFenceAllows: () => [P, 1],
  declareCheckpoint: () => [P, 'ck', 1, NOW],
  claimCheckpoint: () => [P, 'ck', 1, NOW],
  advanceCheckpoint: () => [P, 'ck', 1, 1, 1, NOW],
  sourceCoverageSeq: () => [P, ['tasks']],
  hasSourceChangesAbove: () => [P, ['tasks'], 1],
  activateCheckpoint: () => [P, 'ck', 1, 1, ['tasks'], NOW],
  getClientRecord: () => [P, 'c'],
  putClientRecord: () => [P, { clientId: 'c', actorId: 'a', wireVersion: 1, cursor: 1, updatedAtMs: NOW, subscriptions: [{ id: 's', table: 'tasks', scopes: filter() }] }],
  listClientCursors: () => [P],
  advanceClientCursor: () => [P, 'c', 'a', 'e1', 2, NOW],
  updateClientCursor: () => [P, 'c', 2, NOW],
  getActiveClientCursorFloor: () => [P, 0],
  claimReactions: () => [P, { leaseOwner: 'o', types: ['t'], nowMs: NOW, leaseDurationMs: 1000, limit: 5 }],
  completeReaction: () => [P, 'rk', 'o', NOW],
  extendReactionLease: () => [P, 'rk', 'o', NOW + 5000],
  failReaction: () => [P, 'rk', { leaseOwner: 'o', failure: { code: 'x', atMs: NOW }, retryAtMs: NOW + 1 }],
  retryReaction: () => [P, 'rk', NOW],
  getReaction: () => [P, 'rk'],
  listReactions: () => [P, { statuses: ['pending'], types: ['t'], limit: 10 }],
  pruneReactions: () => [P, { completedBeforeMs: NOW, deadLetterBeforeMs: NOW, limit: 10 }],
  listClientRecords: () => [P],
  listCommitMetadata: () => [P, { afterSeq: 0, limit: 10, table: 'tasks' }],
  scopeActivity: () => [P, { variable: 'project_id', value: 'p1', limit: 10 }],
  getRowScopes: () => [P, 'tasks', 'r1'],
  listRowsReferencingBlob: () => [P, HASH],
  listReferencedBlobIds: () => [P],
  ping: () => [],
  stats: () => [],
  // Nothing recorded in the fuzzed database: restores nothing, writes nothing.
  restoreLayout: () => [],
};

/** Valid arguments per transaction member. */
const TX = {
  getRow: () => ['tasks', 'r1'],
  getTombstoneSeq: () => ['tasks', 'r1'],
  clearTombstone: () => ['tasks', 'r1'],
  getPushResult: () => ['c', 'cc'],
  scanRows: () => [{ table: 'tasks', scopeFilter: filter(), afterRowId: null, limit: 10 }],
  scanRowsByIndex: () => [{ table: 'tasks', index: 'tasks_by_title', values: ['t'], afterRowId: null, limit: 10 }],
  queryAuthoritative: () => [tasksPlan()],
  lockPartitionForPush: () => [],
  lockPartitionForCommitValidation: () => [],
  commitRejectedPushResult: () => ['c', 'cc', { ...pushResult(), status: 'rejected' }],
  upsertRow: () => ['tasks', taskRow('r1', {}, { version: 2 }), { opIndex: 0 }],
  deleteRow: () => ['tasks', 'r1'],
  appendCommit: () => [{ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: NOW, changes: [change()] }],
  putPushResult: () => ['c', 'cc', pushResult()],
  setBlobRefs: () => ['tasks', 'r1', [HASH]],
  readServeGate: () => [1],
  advanceCheckpoint: () => ['ck', 1, 1, 1, NOW],
  enqueueReactions: () => [[reaction()]],
  prefetchRows: () => ['tasks', ['r1', 'r2']],
  commit: () => [],
  rollback: () => [],
};

/**
 * Transaction members that write. Only after these can a commit following a
 * rejection rewrite pages without changing content; any other member that
 * leaves the files changed is a failure outright.
 */
const TX_WRITES = new Set(['clearTombstone', 'commitRejectedPushResult', 'upsertRow', 'deleteRow', 'appendCommit', 'putPushResult', 'setBlobRefs', 'advanceCheckpoint', 'enqueueReactions', 'commit']);

/**
 * Members the fuzz must not call with junk: close() ends the storage;
 * backup() writes a file at whatever path it is given (its argument checks
 * are in __test__/operations.test.mjs); copyTo() connects to whatever url it
 * is given, and its final pass ends the storage's writes (its argument
 * checks are in __test__/copy.test.mjs).
 */
const SKIP = new Set(['close', 'backup', 'copyTo']);

/** Replaces something inside `value` (an object/array) with a hostile value. */
function mutateDeep(g, value, depth = 0) {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array || depth > 3) return hostile(g);
  const copy = Array.isArray(value) ? [...value] : { ...value };
  const keys = Object.keys(copy);
  const roll = g.next();
  if (keys.length === 0 || roll < 0.1) {
    if (Array.isArray(copy)) copy.push(hostile(g));
    else copy[g.pick(['table', 'limit', 'extra', '__proto__x', 'plan', 'sql', 'scopeFilter'])] = hostile(g);
    return copy;
  }
  const key = g.pick(keys);
  if (roll < 0.2) delete copy[key];
  else if (roll < 0.5 && copy[key] !== null && typeof copy[key] === 'object') copy[key] = mutateDeep(g, copy[key], depth + 1);
  else copy[key] = hostile(g);
  return copy;
}

/** Special hostile shapes for some members. */
function special(g, member, args) {
  if (member === 'queryAuthoritative') {
    const i = args.length === 2 ? 1 : 0;
    args[i] = g.pick([
      { plan: null, tables: ['tasks'] },
      { plan: 'SELECT 1', tables: [] },
      { plan: { sql: 'SELECT id FROM tasks', relations: [{ table: 'tasks', start: -1, end: 99 }] }, tables: ['tasks'] },
      { plan: { sql: 'SELECT id FROM tasks', relations: [{ table: 'tasks', start: 20, end: 15 }] }, tables: ['tasks'] },
      { plan: { sql: 'SELECT id FROM tasks', relations: [{ table: 'nope', start: 15, end: 20 }] }, tables: ['nope'] },
      { plan: { sql: 'SELECT id FROM tasks; DELETE FROM tasks', relations: [{ table: 'tasks', start: 15, end: 20 }] }, tables: ['tasks'] },
      { plan: { sql: HUGE, relations: [] }, tables: [] },
      { sql: 'DELETE FROM tasks', params: [], tables: ['tasks'] },
      { sql: 'SELECT * FROM sync_push_results', params: [], tables: [] },
      { sql: 'SELECT id FROM tasks WHERE id = ?', params: [{}], tables: ['tasks'] },
      { sql: 'SELECT id FROM tasks WHERE id = ?', params: [10n], tables: ['tasks'] },
      { sql: 'SELECT id FROM tasks', params: [], tables: ['tasks', 'nope', HUGE] },
    ]);
    return args;
  }
  if (member === 'scanRows' || member === 'readCommitWindow' || member === 'latestScopedChangeSeq') {
    const i = args.length === 2 ? 1 : 0;
    args[i] = {
      ...args[i],
      scopeFilter: g.pick([{}, { project_id: [] }, { nope: ['x'] }, { project_id: 'p1' }, { project_id: [null] }, { project_id: Array(5000).fill('p') }, { ['x'.repeat(70000)]: ['a'] }]),
    };
    return args;
  }
  return undefined;
}

function makeArgs(g, member, template) {
  if (template === undefined) {
    // A member without a template: generic junk of its declared arity.
    return Array.from({ length: Math.max(1, g.below(5)) }, () => hostile(g));
  }
  let args = template(g);
  const s = g.chance(0.15) ? special(g, member, [...args]) : undefined;
  if (s !== undefined) return s;
  const n = args.length === 0 ? 0 : 1 + g.below(Math.min(2, args.length));
  for (let i = 0; i < n; i++) {
    const at = g.below(args.length);
    args[at] = g.chance(0.5) && args[at] !== null && typeof args[at] === 'object' ? mutateDeep(g, args[at]) : hostile(g);
  }
  if (g.chance(0.05)) args = args.slice(0, g.below(args.length + 1));
  if (g.chance(0.05)) args.push(hostile(g));
  return args;
}

function fingerprint(path) {
  const one = (p) => {
    try {
      const s = statSync(p, { bigint: true });
      return `${s.size}:${s.mtimeNs}`;
    } catch {
      return '-';
    }
  };
  // Every write of a WAL database lands in the WAL first; the database file
  // also changes when the storage's checkpoint thread copies committed
  // pages into it, at any time, so only the WAL tells whether a call wrote.
  return one(`${path}-wal`);
}

/** Copies the committed state (database and WAL) aside. */
function snapshot(path, to) {
  copyFileSync(path, to);
  if (existsSync(`${path}-wal`)) copyFileSync(`${path}-wal`, `${to}-wal`);
  else if (existsSync(`${to}-wal`)) unlinkSync(`${to}-wal`);
  if (existsSync(`${to}-shm`)) unlinkSync(`${to}-shm`);
}

function contentHash(path) {
  return execFileSync('sqlite3', [path, '.sha3sum'], { encoding: 'utf8' }).trim();
}

function within(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`did not settle within ${ms} ms`), { hung: true })), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function describeArgs(args) {
  return args
    .map((a) => {
      if (typeof a === 'string') return a.length > 40 ? `<string ${a.length}>` : JSON.stringify(a);
      if (typeof a === 'bigint') return `${a}n`;
      if (typeof a === 'symbol' || typeof a === 'function') return String(a);
      try {
        const t = JSON.stringify(a, (_, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'string' && v.length > 40 ? `<string ${v.length}>` : v));
        return t === undefined ? String(a) : t.slice(0, 200);
      } catch {
        return String(a);
      }
    })
    .join(', ');
}

async function seed(storage) {
  await storage.ensureSchema(fixtureSchema());
  await storage.touchPartition(P, NOW, 'e1');
  await hostPush(storage, P, { clientId: 'c', clientCommitId: 'seed', ops: [{ table: 'tasks', row: taskRow('r1', { title: 't' }) }] });
}

/**
 * Runs `cases` hostile calls. Returns { cases, storageCases, txCases,
 * rejected, resolved, uncoded, panics, syncThrows, hangs, partialWrites,
 * acceptedBadPartition, untemplated[], failures[] }.
 *
 * `hashLive`: compare content by running the sqlite3 shell on the storage's
 * live file (another process opening and closing it, after this process
 * closed a descriptor of it for its snapshot). Without it the live file and
 * its WAL are copied first and the copy is hashed.
 */
export async function runFuzz({ cases = 2000, seed: s = 1, recycleEvery = 1000, log, pgUrl, hashLive = false } = {}) {
  const g = rng(s);
  const dir = mkdtempSync(join(tmpdir(), 'syncular-fuzz-'));
  const f = {
    engine: pgUrl === undefined ? 'sqlite' : 'postgres',
    cases: 0,
    storageCases: 0,
    txCases: 0,
    rejected: 0,
    resolved: 0,
    uncoded: 0,
    panics: 0,
    syncThrows: 0,
    hangs: 0,
    partialWrites: 0,
    acceptedBadPartition: 0,
    members: 0,
    untemplated: [],
    failures: [],
  };
  const fail = (kind, what) => {
    if (f.failures.length < 60) f.failures.push(`${kind}: ${what}`);
  };
  let storage;
  let path;
  let generation = 0;
  const snap = join(dir, 'before.db');
  const after = join(dir, 'after.db');
  const liveHash = () => {
    if (hashLive) return contentHash(path);
    snapshot(path, after);
    return contentHash(after);
  };
  let db; // PostgreSQL: the current schema (pgTarget)
  let state; // PostgreSQL: the committed state's snapshot, while known
  let relist = false; // PostgreSQL: tables may have been created since the last snapshot
  const open = async () => {
    if (storage) await storage.close();
    if (db) await db.close();
    state = undefined;
    if (pgUrl !== undefined) {
      db = pgTarget(pgUrl, { schema: freshSchemaName('syncular_fuzz'), maxConnections: 4 });
      storage = db.open();
      await seed(storage);
      relist = true;
      return;
    }
    path = join(dir, `fuzz-${generation++}.db`);
    storage = new NativeStorage({ url: `sqlite:${path}` });
    await seed(storage);
  };
  const pgSnapshot = async () => {
    const snap = await db.snapshot({ listTables: relist });
    relist = false;
    return snap;
  };
  try {
    await open();
    const tx0 = await storage.begin(P);
    const storageMembers = Object.keys(storage).filter((k) => typeof storage[k] === 'function' && !SKIP.has(k));
    const txMembers = Object.keys(tx0).filter((k) => typeof tx0[k] === 'function');
    await tx0.rollback();
    f.members = storageMembers.length + txMembers.length;
    for (const m of storageMembers) if (!STORAGE[m]) f.untemplated.push(m);
    for (const m of txMembers) if (!TX[m]) f.untemplated.push(`tx.${m}`);

    for (let i = 0; i < cases; i++) {
      if (i > 0 && i % recycleEvery === 0) await open();
      const onTx = g.chance(0.4);
      const member = onTx ? g.pick(txMembers) : g.pick(storageMembers);
      const args = makeArgs(g, member, (onTx ? TX : STORAGE)[member]);
      const badPartition = !onTx && STORAGE[member] !== undefined && STORAGE[member](g)[0] === P && typeof args[0] !== 'string';
      const label = `${onTx ? 'tx.' : ''}${member}(${describeArgs(args)})`;
      f.cases++;
      let tx;
      if (onTx) {
        f.txCases++;
        if (TX_WRITES.has(member) && !db) snapshot(path, snap);
        tx = await storage.begin(P);
        if (member !== 'lockPartitionForPush' && g.chance(0.8)) await tx.lockPartitionForPush();
      } else f.storageCases++;
      if (db && member === 'ensureSchema') relist = true;
      if (db && state === undefined) state = await pgSnapshot();
      const before = db ? state : fingerprint(path);
      let promise;
      try {
        promise = (onTx ? tx : storage)[member](...args);
      } catch (err) {
        f.syncThrows++;
        fail('synchronous throw', `${label}: ${err?.message}`);
        if (tx) await tx.rollback();
        continue;
      }
      if (!promise || typeof promise.then !== 'function') {
        f.syncThrows++;
        fail('no promise', label);
        if (tx) await tx.rollback();
        continue;
      }
      let outcome;
      try {
        outcome = { ok: true, value: await within(promise, 10_000) };
      } catch (err) {
        outcome = { ok: false, err };
      }
      if (outcome.ok) {
        f.resolved++;
        state = undefined;
        if (badPartition) {
          f.acceptedBadPartition++;
          fail('accepted a non-string partition', label);
        }
        if (member === 'begin' && outcome.value && typeof outcome.value.rollback === 'function') await outcome.value.rollback();
        if (tx) await tx.rollback();
        continue;
      }
      const err = outcome.err;
      if (err?.hung) {
        state = undefined;
        f.hangs++;
        fail('hang', label);
        // the storage may be wedged: start over on a new file
        await open().catch(() => {});
        continue;
      }
      f.rejected++;
      if (!(err instanceof Error) || typeof err.code !== 'string') {
        f.uncoded++;
        fail('uncoded rejection', `${label}: ${err?.constructor?.name} ${String(err?.message ?? err).slice(0, 160)}`);
      } else if (err.code === 'ERR_SYNCULAR_INTERNAL') {
        f.panics++;
        fail('panic', `${label}: ${err.message.slice(0, 200)}`);
      }
      if (tx) {
        // Whatever the failed member staged must be gone: commit and compare.
        try {
          await tx.commit();
        } catch {
          await tx.rollback();
        }
      }
      if (db) {
        if (member === 'ensureSchema') relist = true;
        state = await pgSnapshot();
      }
      if (db ? state !== before : fingerprint(path) !== before && (!tx || !TX_WRITES.has(member) || liveHash() !== contentHash(snap))) {
        f.partialWrites++;
        fail('partial write', `${label}: ${err?.code} ${String(err?.message).slice(0, 120)}`);
      }
      if (log && (i + 1) % 10_000 === 0) log(`fuzz: ${i + 1}/${cases}`);
    }
  } finally {
    if (storage) await storage.close();
    if (db) await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return f;
}
