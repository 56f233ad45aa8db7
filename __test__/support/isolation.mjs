// Shared by the tenant-isolation contract cases (contract/isolation.mjs) and
// the generated attack run (stress/attack.mjs): two seeded partitions whose
// data carries markers, a digest of everything the storage's read members
// can see, a scan of query answers for foreign or internal data, and a
// classifier that turns one call into an outcome.
import { createHash } from 'node:crypto';
import { encodeRow } from './codec.mjs';
import { ACCOUNT_COLUMNS } from './schema.mjs';
import { taskRow, writeCommit } from './harness.mjs';

/** The attacker's partition: every query runs here. */
export const OWN = 'iso-own';
/** The victim's partition. Its id carries no marker: attacks bind it as a param and may echo it back. */
export const VICTIM = 'iso-vic';
/** In every value of the victim's rows (and its client ids). */
export const VICTIM_MARK = 'ZZVICTIM';
/** In values that live only in internal tables (client ids, actor ids, checkpoint names). */
export const INTERNAL_MARK = 'ZZINTERNAL';
/** Numbers only the victim's rows hold. */
export const VICTIM_NUMBERS = new Set([777001, 777002, 777003, 777.25]);

const bytes = (s) => new Uint8Array(Buffer.from(s, 'latin1'));

function accountRow(id, org, email) {
  return { rowId: id, serverVersion: 1, scopes: { org_id: org }, payload: encodeRow(ACCOUNT_COLUMNS, { id, org_id: org, email }) };
}

/** Row ids written per partition (the digest reads each in both). */
export const TASK_IDS = ['own-1', 'own-2', 'shared-1', `${VICTIM_MARK}-1`, `${VICTIM_MARK}-2`, `${VICTIM_MARK}-3`];
export const ACCOUNT_IDS = ['own-acc', 'shared-acc', `${VICTIM_MARK}-acc`];
export const PROJECTS = ['p-own', `${VICTIM_MARK}-proj`];
export const ORGS = ['o-own', `${VICTIM_MARK}-org`];

/**
 * Seeds both partitions. The victim's rows carry VICTIM_MARK in every text,
 * JSON and bytes column and numbers from VICTIM_NUMBERS; both partitions
 * hold a row 'shared-1' (same id, different content). Commits, client
 * records and a checkpoint carry INTERNAL_MARK (own) or VICTIM_MARK.
 */
export async function seedTenants(storage) {
  await writeCommit(
    storage,
    OWN,
    [
      { table: 'tasks', row: taskRow('own-1', { title: 'own title 1', project: 'p-own', owner: 'u-own', count: 11, score: 1.5 }) },
      { table: 'tasks', row: taskRow('own-2', { title: 'own title 2', project: 'p-own', owner: 'u-own', count: 12 }) },
      { table: 'tasks', row: taskRow('shared-1', { title: 'own shared', project: 'p-own', owner: 'u-own', count: 13 }) },
      { table: 'accounts', row: accountRow('own-acc', 'o-own', 'own@example') },
      { table: 'accounts', row: accountRow('shared-acc', 'o-own', 'shared-own@example') },
    ],
    { clientId: `${INTERNAL_MARK}-client`, clientCommitId: `${INTERNAL_MARK}-commit`, actorId: `${INTERNAL_MARK}-actor` },
  );
  const v = (n) => ({
    title: `${VICTIM_MARK} title ${n}`,
    project: `${VICTIM_MARK}-proj`,
    owner: `${VICTIM_MARK}-user`,
    count: 777000 + n,
    score: 777.25,
    meta: JSON.stringify({ m: VICTIM_MARK }),
    data: bytes(`${VICTIM_MARK}-bytes`),
  });
  await writeCommit(
    storage,
    VICTIM,
    [
      { table: 'tasks', row: taskRow(`${VICTIM_MARK}-1`, v(1)) },
      { table: 'tasks', row: taskRow(`${VICTIM_MARK}-2`, v(2)) },
      { table: 'tasks', row: taskRow('shared-1', { ...v(3), title: `${VICTIM_MARK} shared` }) },
      { table: 'tasks', row: taskRow(`${VICTIM_MARK}-3`, v(3)) },
      { table: 'accounts', row: accountRow(`${VICTIM_MARK}-acc`, `${VICTIM_MARK}-org`, `${VICTIM_MARK}@example`) },
      { table: 'accounts', row: accountRow('shared-acc', `${VICTIM_MARK}-org`, `${VICTIM_MARK}-shared@example`) },
    ],
    { clientId: `${VICTIM_MARK}-client`, clientCommitId: `${VICTIM_MARK}-commit`, actorId: `${VICTIM_MARK}-actor` },
  );
  for (const [p, mark] of [
    [OWN, INTERNAL_MARK],
    [VICTIM, VICTIM_MARK],
  ]) {
    await storage.putClientRecord(p, { clientId: `${mark}-cr`, actorId: `${mark}-cr-actor`, wireVersion: 1, cursor: 1, updatedAtMs: 1, subscriptions: [] });
    await storage.touchPartition(p, 1_700_000_000_000, `${mark}-epoch`);
  }
}

function plain(value) {
  if (typeof value === 'bigint') return `bigint:${value}`;
  if (value instanceof Uint8Array) return `bytes:${Buffer.from(value).toString('hex')}`;
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Map) return { map: [...value].map(plain) };
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const k of Object.keys(value).sort()) out[k] = plain(value[k]);
    return out;
  }
  return value === undefined ? '(undefined)' : value;
}

/**
 * Everything the storage's read members show of both partitions, hashed:
 * counters, log epochs, commit metadata, every seeded row id in both
 * partitions (a row moved or copied across shows up), scope scans, client
 * records, checkpoints, the registry, and a plain registered query per
 * table (rows the seed never wrote show up there). A read that fails is
 * part of the digest (a broken storage differs from a sound one). `light`
 * keeps the counters, commit metadata and the per-table queries.
 */
export async function digest(storage, { light = false } = {}) {
  const parts = [];
  const add = async (label, fn) => {
    try {
      parts.push([label, plain(await fn())]);
    } catch (err) {
      parts.push([label, `error ${err?.code}: ${err?.message}`]);
    }
  };
  await add('registry', async () => (await storage.listPartitionRegistry()).map((e) => ({ ...e })).sort((a, b) => (a.partition < b.partition ? -1 : 1)));
  for (const p of [OWN, VICTIM]) {
    await add(`${p} seq`, () => storage.getMaxCommitSeq(p));
    await add(`${p} commits`, () => storage.listCommitMetadata(p, { afterSeq: 0, limit: 1000 }));
    for (const t of ['tasks', 'accounts']) {
      await add(`${p} all ${t}`, () => storage.queryAuthoritative(p, { sql: `SELECT * FROM ${t} ORDER BY id`, params: [], tables: [t] }));
    }
    // The light digest (the generated run, after each call) stops here.
    if (light) continue;
    await add(`${p} horizon`, () => storage.getHorizonSeq(p));
    await add(`${p} epoch`, () => storage.getPartitionLogEpoch(p));
    for (const id of TASK_IDS) await add(`${p} task ${id}`, () => storage.getRow(p, 'tasks', id));
    for (const id of ACCOUNT_IDS) await add(`${p} account ${id}`, () => storage.getRow(p, 'accounts', id));
    await add(`${p} scan tasks`, () => storage.scanRows(p, { table: 'tasks', scopeFilter: { project_id: PROJECTS }, afterRowId: null, limit: 1000 }));
    await add(`${p} scan accounts`, () => storage.scanRows(p, { table: 'accounts', scopeFilter: { org_id: ORGS }, afterRowId: null, limit: 1000 }));
    await add(`${p} clients`, () => storage.listClientRecords(p));
    await add(`${p} checkpoints`, () => storage.readCheckpoints(p));
  }
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/** Text a value can carry, for the marker scan. */
function texts(value, out) {
  if (value === null || value === undefined) return out;
  if (typeof value === 'string') out.push(value);
  else if (value instanceof Uint8Array) out.push(Buffer.from(value).toString('latin1'));
  else if (typeof value === 'number' || typeof value === 'bigint') out.push(String(value));
  else if (Array.isArray(value)) for (const v of value) texts(v, out);
  else if (typeof value === 'object') for (const [k, v] of Object.entries(value)) {
    out.push(k);
    texts(v, out);
  }
  return out;
}

// Text that only the internal tables or the catalogs hold: seeded internal
// values, internal column and table names, schema SQL.
const INTERNAL_TEXT = [INTERNAL_MARK, 'sync_', '_sync', 'CREATE TABLE', 'CREATE INDEX', 'sqlite_autoindex'];

/**
 * What an answer exposes that it must not: `foreign` (cells of the victim
 * partition) and `internal` (internal tables, catalogs). Every cell and
 * every column name is scanned; numbers are compared with the victim's.
 */
export function scanAnswer(answer) {
  const foreign = [];
  const internal = [];
  const rows = Array.isArray(answer?.rows) ? answer.rows : [];
  for (const row of rows) {
    for (const [k, v] of Object.entries(row ?? {})) {
      if (typeof v === 'number' && VICTIM_NUMBERS.has(v)) foreign.push(`${k}=${v}`);
      for (const t of texts(v, [k])) {
        if (t.includes(VICTIM_MARK)) foreign.push(`${k}=${t.slice(0, 80)}`);
        else if (INTERNAL_TEXT.some((m) => t.includes(m))) internal.push(`${k}=${t.slice(0, 80)}`);
      }
    }
  }
  return { foreign: [...new Set(foreign)], internal: [...new Set(internal)] };
}

/**
 * Runs `fn` and classifies it: { kind: 'answered', value } | { kind:
 * 'refused', code, message } | { kind: 'uncoded', message } | { kind:
 * 'hang' } when it does not settle within `deadlineMs` (the promise is
 * left running; the caller decides what a hang costs).
 */
export async function attempt(fn, deadlineMs) {
  let promise;
  try {
    promise = Promise.resolve(fn());
  } catch (err) {
    return errOutcome(err, true);
  }
  let timer;
  const hang = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'hang' }), deadlineMs);
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ kind: 'answered', value }),
        (err) => errOutcome(err, false),
      ),
      hang,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function errOutcome(err, sync) {
  const message = String(err?.message ?? err).slice(0, 300);
  if (typeof err?.code === 'string' && err.code.length > 0) return { kind: 'refused', code: err.code, message, sync };
  return { kind: 'uncoded', message, sync };
}

/** A relation plan naming the occurrences of `tables` in `sql` (bare or quoted, any letter case). */
export function planFor(sql, tables, { firstOnly = false, alias } = {}) {
  const relations = [];
  for (const table of tables) {
    const re = new RegExp(`"${table}"|\`${table}\`|\\[${table}\\]|(?<![A-Za-z0-9_$])${table}(?![A-Za-z0-9_$])`, 'gi');
    const found = [...sql.matchAll(re)].map((m) => ({ table, start: m.index, end: m.index + m[0].length }));
    relations.push(...(firstOnly ? found.slice(0, 1) : found));
  }
  relations.sort((a, b) => a.start - b.start);
  if (alias !== undefined) for (const r of relations) r.alias = alias;
  const used = [...new Set(relations.map((r) => r.table))];
  return { plan: { sql, relations }, tables: used };
}

/** Ends server backends still running a runaway query (a killed client does not stop them). */
export async function endRunaways(url) {
  const { Psql } = await import('../../stress/lib/sql.mjs');
  const psql = new Psql(url);
  try {
    await psql.query(
      "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND (query LIKE '%UNION ALL SELECT n+1 FROM r)%' OR query LIKE '%pg_sleep%' OR query LIKE '%pg_advisory_lock%')",
    );
  } finally {
    await psql.close();
  }
}

/**
 * The name of the SQLite engine's partition view of a table (FNV-1a over
 * the table's and its columns' names, as src/core/query/rewrite.rs names it):
 * derived from the schema, so an attacker knows it too.
 */
export function viewName(table, columns) {
  let h = 0x811c9dc5;
  const eat = (text) => {
    for (const b of Buffer.from(text, 'utf8')) h = Math.imul(h ^ b, 0x01000193) >>> 0;
    h = Math.imul(h ^ 0xff, 0x01000193) >>> 0;
  };
  eat(table);
  for (const c of columns) eat(c.name);
  return `_syncular_q_${table}_${h.toString(16).padStart(8, '0')}`;
}
