// Tenant isolation of registered queries: whatever SQL, params, plan or
// partition id a caller sends, queryAuthoritative (storage and
// transaction-bound) never returns a row of another partition, never
// writes, never reaches internal tables, catalogs, files or session state.
// Each query is either refused with a coded error or answered from the
// caller's own partition. Two partitions are seeded with marked data
// (support/isolation.mjs); every answer cell is scanned for the victim's
// markers and for internal text, and a digest of both partitions (read
// through the storage's own members) is compared around every call.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { ACCOUNT_COLUMNS, TASK_COLUMNS, fixtureSchema } from '../support/schema.mjs';
import { taskRow, withStorage, writeCommit } from '../support/harness.mjs';
import { OWN, VICTIM, VICTIM_MARK, attempt, digest, endRunaways, planFor, scanAnswer, seedTenants, viewName } from '../support/isolation.mjs';

const INVALID = 'ERR_SYNCULAR_INVALID_ARGUMENT';
const TIMEOUT = 'ERR_SYNCULAR_QUERY_TIMEOUT';
// A registered query that neither answers nor fails in this time is a hang
// (no query here needs more than milliseconds; the runaway cases run in a child).
const SETTLE_MS = 20_000;

// Words SQLite accepts as a table alias although they are keywords in some
// context (window definitions, upserts, frame specs, ...).
const KEYWORD_ALIASES = ['window', 'over', 'filter', 'rows', 'range', 'groups', 'do', 'key', 'match', 'first', 'last', 'nulls', 'current', 'exclude', 'following', 'replace', 'plan', 'query', 'offset'];

// Words after a relation that are never its alias (for the plan's `alias`).
const NOT_ALIAS = new Set(['on', 'where', 'group', 'order', 'inner', 'left', 'right', 'full', 'outer', 'natural', 'join', 'cross', 'using', 'limit', 'having', 'union', 'except', 'intersect', 'select', 'from', 'returning']);

/** planFor with `alias` set on the relations the SQL gives one (as the host's compiler does). */
function planOf(sql, tables, firstOnly = false) {
  const p = planFor(sql, tables, { firstOnly });
  for (const r of p.plan.relations) {
    const m = /^\s+(?:AS\s+)?([A-Za-z_][A-Za-z0-9_]*|"[^"]*")/i.exec(sql.slice(r.end));
    if (m && !NOT_ALIAS.has(m[1].toLowerCase())) r.alias = m[1].replace(/"/g, '');
  }
  return p;
}

/** A count answer that is not the count of the caller's own rows: counts of other partitions or internal tables. */
function countNot(expected) {
  return (rows) => {
    const n = Number(rows[0]?.n);
    return rows.length === 1 && n === expected ? undefined : `counted rows beyond the caller's own: ${show(rows).slice(0, 120)}`;
  };
}

/**
 * Attack cases: { label, sql, params?, tables?, dialects, forms?, check?,
 * mustRefuse? }. `tables` is the declared set for the legacy form (default:
 * the tables the text names); `check(rows)` names what an answer must not
 * hold beyond the generic scan; `mustRefuse` when any answer is a breach.
 */
function attackCases() {
  const cases = [];
  const add = (c) => cases.push({ params: [], dialects: ['sqlite', 'postgres'], ...c });
  const SQ = ['sqlite'];
  const PG = ['postgres'];
  const nonNull = (rows) => (rows.some((r) => Object.values(r).some((v) => v !== null && v !== false && v !== '')) ? `answered with content ${show(rows).slice(0, 120)}` : undefined);

  // -- SQLite: a context keyword as an alias hides the next relation.
  for (const kw of KEYWORD_ALIASES) {
    add({
      label: `keyword alias "${kw}" hides the next relation`,
      dialects: SQ,
      variants: [
        `SELECT t.title FROM tasks AS ${kw}, tasks AS t`,
        `SELECT t.title FROM tasks ${kw}, tasks t`,
        `SELECT t.title FROM tasks AS ${kw} JOIN tasks AS t ON 1`,
        `SELECT t.title FROM accounts AS ${kw}, tasks AS t`,
        `SELECT t.title FROM (SELECT 1 AS one) AS ${kw}, tasks AS t`,
      ],
    });
  }

  // -- A CTE named like a table's view poses as the view to SQLite's
  // authorizer (it reports the FROM item being expanded as the accessor);
  // a `window` alias hid the raw table inside it from the rewrite.
  const taskView = viewName('tasks', TASK_COLUMNS);
  const accountView = viewName('accounts', ACCOUNT_COLUMNS);
  add({
    label: "a CTE named like a table's partition view",
    mustRefuse: true,
    variants: [
      `WITH "${taskView}" AS (SELECT t.* FROM accounts window, tasks t) SELECT * FROM "${taskView}"`,
      `WITH ${taskView} AS (SELECT t._sync_partition AS p, t._sync_payload AS b, t.* FROM accounts AS window, tasks AS t) SELECT * FROM ${taskView}`,
      `WITH "${accountView}" AS (SELECT a.* FROM tasks window, accounts a) SELECT * FROM "${accountView}"`,
      `WITH "${taskView.toUpperCase()}" AS (SELECT t.title FROM accounts window, tasks t) SELECT title FROM "${taskView.toUpperCase()}"`,
      { sql: `WITH '${taskView}' AS (SELECT * FROM tasks) SELECT title FROM tasks`, tables: ['tasks'] },
      { sql: `SELECT x.title FROM tasks AS "${taskView}", tasks x`, tables: ['tasks'] },
    ],
  });

  // -- A FROM item read without naming a column reaches SQLite's
  // authorizer with no database: row counts of every tenant's tables, of
  // internal tables and of the catalog.
  add({
    label: 'a count of a relation the rewrite did not see',
    check: countNot(6),
    variants: [
      { sql: 'SELECT count(*) AS n FROM accounts window, tasks', tables: ['accounts', 'tasks'] },
      { sql: 'SELECT count(*) AS n FROM accounts window, tasks', tables: ['accounts'] },
      { sql: 'SELECT count(*) AS n FROM accounts AS window, tasks', tables: ['accounts'] },
      { sql: 'SELECT (SELECT count(*) FROM accounts window, tasks) AS n', tables: ['accounts'] },
      { sql: 'SELECT count(*) AS n FROM accounts window, tasks WHERE 1', tables: ['accounts', 'tasks'] },
    ],
  });
  add({
    label: 'a count of an internal table or the catalog',
    mustRefuse: true,
    variants: [
      { sql: 'SELECT count(*) AS n FROM accounts window, sync_commits', tables: ['accounts'] },
      { sql: 'SELECT count(*) AS n FROM accounts window, sync_partitions', tables: ['accounts'] },
      { sql: 'SELECT count(*) AS n FROM accounts AS window, sync_row_scopes', tables: ['accounts'] },
      { sql: 'SELECT 1 AS n FROM accounts window, sqlite_master', tables: ['accounts'] },
      { sql: 'SELECT count(*) AS n FROM accounts window, sqlite_schema', tables: ['accounts'] },
      { sql: 'SELECT EXISTS (SELECT 1 FROM accounts window, sync_commits) AS n', tables: ['accounts'] },
      { sql: 'SELECT count(*) AS n FROM accounts window, pragma_table_list', tables: ['accounts'] },
    ],
  });

  // -- Variables the rewrite does not count as SQLite numbers them.
  add({
    label: 'SQLite #name variable before the partition placeholder',
    dialects: SQ,
    variants: [
      ['SELECT #a AS x, title FROM tasks WHERE ? IS NULL', [VICTIM]],
      ['SELECT #a AS x, title FROM tasks WHERE ? = ?', [VICTIM, VICTIM]],
      ['SELECT title FROM tasks WHERE #a IS NULL OR ? IS NULL', [VICTIM]],
      ['SELECT #a AS x, #b AS y, t.title FROM tasks t WHERE ?1 IS NULL', [VICTIM]],
      ["SELECT coalesce(#p, 'x') AS x, title FROM tasks WHERE ?2 IS NULL OR ?1 IS NULL", [VICTIM, VICTIM]],
    ],
  });
  for (const v of [':x', '@x', '$x', '$x::y(z)', '#x']) {
    add({
      label: `SQLite ${v} variable before the partition placeholder`,
      dialects: SQ,
      variants: [
        [`SELECT ${v} AS x, title FROM tasks WHERE ? IS NULL`, [VICTIM]],
        [`SELECT ${v} AS x, title FROM tasks`, [VICTIM]],
        [`SELECT title FROM tasks WHERE ${v} IS NULL OR ? IS NULL`, [VICTIM]],
      ],
    });
  }
  add({
    label: 'numbered variables ?NNN around the partition placeholder',
    variants: [
      ['SELECT ?2 AS x, title FROM tasks WHERE ?1 IS NULL', [VICTIM, VICTIM]],
      ['SELECT ?3 AS x, title FROM tasks WHERE ? IS NULL', [VICTIM, VICTIM, VICTIM]],
      ['SELECT title FROM tasks WHERE ?1 = ?1 AND ? IS NOT NULL', [VICTIM, VICTIM]],
      ['SELECT title FROM tasks WHERE ?999 IS NULL', [VICTIM]],
      ['SELECT ?0 AS x, title FROM tasks', [VICTIM]],
    ],
  });
  add({
    label: 'PostgreSQL $n placeholders and dollar quoting',
    dialects: PG,
    variants: [
      ['SELECT $1 AS x, title FROM tasks', [VICTIM]],
      ['SELECT title FROM tasks WHERE $2 IS NULL OR ? IS NULL', [VICTIM]],
      ['SELECT $$ AS x, title FROM tasks $$ AS s, title FROM tasks', []],
      ['SELECT $q$ x $q$ AS s, title FROM tasks', []],
    ],
  });

  // -- PostgreSQL syntax the lexer does not model.
  add({
    label: 'FROM ONLY t',
    dialects: PG,
    variants: [
      { sql: 'SELECT title FROM ONLY tasks', tables: [] },
      { sql: 'SELECT title FROM ONLY tasks', tables: ['tasks'] },
      { sql: 'SELECT t.title FROM ONLY tasks t', tables: ['tasks'] },
      { sql: 'SELECT u.title FROM tasks t JOIN ONLY tasks u ON true', tables: ['tasks'] },
      { sql: 'SELECT u.title FROM tasks t, ONLY tasks u', tables: ['tasks'] },
    ],
  });
  add({
    label: '(TABLE t)',
    dialects: PG,
    variants: [
      { sql: 'SELECT x.title FROM (TABLE tasks) x', tables: [] },
      { sql: 'SELECT x.title FROM (TABLE tasks) x', tables: ['tasks'] },
      { sql: "SELECT (SELECT string_agg(title, ',') FROM (TABLE tasks) x) AS s, title FROM tasks", tables: ['tasks'] },
      { sql: 'SELECT title FROM tasks UNION ALL (TABLE accounts)', tables: ['tasks'] },
    ],
  });
  add({
    label: 'U&"..." escaped identifiers',
    dialects: PG,
    variants: [
      { sql: 'SELECT title FROM U&"t\\0061sks"', tables: [] },
      { sql: 'SELECT title FROM U&"t\\0061sks"', tables: ['tasks'] },
      { sql: 'SELECT u.title FROM tasks t, U&"t\\0061sks" u', tables: ['tasks'] },
      { sql: 'SELECT u.title FROM tasks t, U&"t!0061sks" UESCAPE \'!\' u', tables: ['tasks'] },
      { sql: 'SELECT title FROM U&"\\+000074asks"', tables: [] },
    ],
  });
  add({
    label: "E'...' strings desynchronize the lexer",
    dialects: PG,
    variants: [
      { sql: "SELECT u.title FROM tasks AS t, (SELECT E'\\'' AS q, title FROM tasks) AS u WHERE 'x' = 'x'", tables: ['tasks'] },
      { sql: "SELECT E'\\'' AS q, u.title FROM (SELECT title FROM tasks) u, tasks t WHERE E'\\'' <> ''", tables: ['tasks'] },
      { sql: "SELECT e'\\\\'' AS q, title FROM tasks", tables: ['tasks'] },
      { sql: "SELECT title FROM tasks WHERE title <> E'\\' FROM tasks'", tables: ['tasks'] },
    ],
  });
  add({
    label: 'nested /* /* */ */ comments',
    dialects: PG,
    variants: [
      { sql: 'SELECT title FROM /* /* */ tasks */ tasks', tables: ['tasks'] },
      { sql: 'SELECT t.title FROM tasks t /* /* */ , tasks u */ WHERE true', tables: ['tasks'] },
      { sql: 'SELECT u.title FROM tasks /* /* */ */ , tasks u', tables: ['tasks'] },
      { sql: 'SELECT title FROM /* /* /* */ */ tasks */ tasks', tables: ['tasks'] },
    ],
  });
  add({
    label: 'array brackets',
    dialects: PG,
    variants: [
      { sql: "SELECT (ARRAY[(SELECT string_agg(title, ',') FROM tasks)])[1] AS s FROM tasks", tables: ['tasks'] },
      { sql: "SELECT ARRAY[(SELECT string_agg(title, ',') FROM tasks)] AS s", tables: [] },
      { sql: "SELECT (ARRAY['a'])[1] AS a, (SELECT string_agg(title, ',') FROM tasks) AS s, ARRAY[1][1] AS b FROM tasks", tables: ['tasks'] },
    ],
  });
  add({
    label: 'functions that run SQL from text (query_to_xml, table_to_xml)',
    dialects: PG,
    mustRefuse: true,
    variants: [
      { sql: "SELECT query_to_xml('select * from tasks', true, true, '')::text AS x", tables: [] },
      { sql: "SELECT CAST(table_to_xml('tasks', true, true, '') AS text) AS x", tables: [] },
      { sql: "SELECT query_to_xml('select * from sync_commits', true, true, '')::text AS x", tables: [] },
      { sql: "SELECT \"query_to_xml\"('select * from tasks', true, true, '')::text AS x, title FROM tasks", tables: ['tasks'] },
      { sql: "SELECT pg_catalog.query_to_xml('select * from tasks', true, true, '')::text AS x", tables: [] },
      { sql: "SELECT query_to_xml_and_xmlschema('select * from tasks', true, true, '')::text AS x", tables: [] },
      { sql: "SELECT table_to_xmlschema('tasks', true, true, '')::text AS x", tables: [] },
    ],
  });
  add({
    label: 'catalogs, internal tables and files via escaped identifiers',
    dialects: PG,
    mustRefuse: true,
    check: nonNull,
    variants: [
      { sql: 'SELECT relname FROM "pg_class"', tables: [] },
      { sql: 'SELECT relname FROM U&"pg\\005fclass"', tables: [] },
      { sql: 'SELECT tablename FROM "pg_tables"', tables: [] },
      { sql: 'SELECT table_name FROM "information_schema"."tables"', tables: [] },
      { sql: 'SELECT client_id FROM U&"sync\\005fcommits"', tables: [] },
      { sql: 'SELECT * FROM U&"sync\\005fpartitions"', tables: [] },
      { sql: 'SELECT * FROM "sync_partitions"', tables: [] },
      { sql: "SELECT \"pg_read_file\"('PG_VERSION') AS x", tables: [] },
      { sql: "SELECT U&\"pg\\005fread\\005ffile\"('PG_VERSION') AS x", tables: [] },
      { sql: "SELECT pg_catalog.pg_read_file('PG_VERSION') AS x", tables: [] },
      { sql: "SELECT * FROM \"pg_ls_dir\"('.') AS f", tables: [] },
      { sql: "SELECT current_setting('data_directory') AS x", tables: [] },
      { sql: 'SELECT usename, passwd FROM "pg_shadow"', tables: [] },
    ],
  });
  add({
    label: 'SQLite internal tables, schema and files',
    dialects: SQ,
    mustRefuse: true,
    check: nonNull,
    variants: [
      { sql: 'SELECT name, sql FROM sqlite_schema', tables: [] },
      { sql: 'SELECT name FROM "sqlite_temp_master"', tables: [] },
      { sql: "SELECT * FROM pragma_table_info('tasks')", tables: [] },
      { sql: 'SELECT * FROM pragma_database_list', tables: [] },
      { sql: "SELECT * FROM pragma_table_info('sync_commits')", tables: [] },
      { sql: 'SELECT client_id FROM [sync_commits]', tables: [] },
      { sql: 'SELECT client_id FROM `sync_commits`', tables: [] },
      { sql: "SELECT load_extension('/nonexistent') AS x", tables: [] },
      { sql: 'SELECT client_id FROM sync_commits', tables: [] },
    ],
  });

  // -- Writes through a data-modifying CTE (PostgreSQL executes them even when the main query ignores them).
  add({
    label: 'data-modifying CTE',
    dialects: PG,
    variants: [
      { sql: 'WITH d AS (DELETE FROM tasks RETURNING id) SELECT count(*) AS n FROM d', tables: ['tasks'] },
      {
        sql: "WITH q AS (SELECT E'\\'' AS s), d AS (DELETE FROM tasks RETURNING id), c AS (UPDATE sync_partitions SET max_commit_seq = 0 RETURNING 1) SELECT E'\\'' AS s2, title FROM tasks",
        tables: ['tasks'],
      },
      {
        sql: "WITH q AS (SELECT E'\\'' AS s), u AS (UPDATE tasks SET title = 'rewritten' RETURNING id) SELECT E'\\'' AS s2, title FROM tasks",
        tables: ['tasks'],
      },
      {
        sql: "WITH q AS (SELECT E'\\'' AS s), i AS (INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ('iso-new', 5) RETURNING 1) SELECT E'\\'' AS s2, title FROM tasks",
        tables: ['tasks'],
      },
      { sql: 'WITH d AS (DELETE FROM U&"t\\0061sks" RETURNING id) SELECT title FROM tasks', tables: ['tasks'] },
    ],
  });
  add({
    label: 'SQLite writes hidden from the keyword check',
    dialects: SQ,
    variants: [
      { sql: 'WITH d AS (SELECT 1) SELECT title FROM tasks; DELETE FROM tasks', tables: ['tasks'] },
      { sql: "SELECT title FROM tasks WHERE 'x' = 'x' /* */; DELETE FROM tasks", tables: ['tasks'] },
    ],
  });
  return cases;
}

/** The request forms one case runs in: [label, run(storage, body) → outcome]. */
const FORMS = ['legacy', 'plan', 'plan-first', 'tx', 'tx-plan'];

async function runForm(storage, form, { sql, params, tables }) {
  const plan = planOf(sql, ['tasks', 'accounts'], form === 'plan-first');
  const body = form.endsWith('plan') || form === 'plan-first' ? { plan: plan.plan, params, tables: plan.tables } : { sql, params, tables: tables ?? planOf(sql, ['tasks', 'accounts']).tables };
  if (!form.startsWith('tx')) return { outcome: await attempt(() => storage.queryAuthoritative(OWN, body), SETTLE_MS) };
  const tx = await storage.begin(OWN);
  const extra = [];
  try {
    await tx.lockPartitionForPush();
    const outcome = await attempt(() => tx.queryAuthoritative(body), SETTLE_MS);
    // The push goes on after the query, refused or not, and commits what it staged.
    const own = await attempt(() => tx.getRow('tasks', 'own-1'), SETTLE_MS);
    if (own.kind !== 'answered' || own.value?.rowId !== 'own-1') extra.push(`transaction unusable after the query (${own.kind} ${own.code ?? ''} ${own.message ?? ''})`.trim());
    const committed = await attempt(() => tx.commit(), SETTLE_MS);
    if (committed.kind !== 'answered') extra.push(`commit after the query failed (${committed.code ?? committed.kind})`);
    return { outcome, extra };
  } finally {
    await attempt(() => tx.rollback(), SETTLE_MS);
  }
}

/** What is wrong with one outcome (empty when it is refused with a code or answered in its own partition). */
function judge(outcome, c) {
  const out = [];
  if (outcome.kind === 'hang') out.push('hang');
  else if (outcome.kind === 'uncoded') out.push(`uncoded error: ${outcome.message}`);
  else if (outcome.kind === 'refused' && c.expectCode && outcome.code !== c.expectCode) out.push(`wrong code ${outcome.code} (expected ${c.expectCode}): ${outcome.message}`);
  else if (outcome.kind === 'answered') {
    const rows = outcome.value?.rows ?? [];
    const { foreign, internal } = scanAnswer(outcome.value);
    if (foreign.length) out.push(`LEAK of the other partition: ${foreign.slice(0, 3).join('; ')}`);
    if (internal.length) out.push(`internal data reached: ${internal.slice(0, 3).join('; ')}`);
    const extra = c.check?.(rows);
    if (extra) out.push(extra);
    if (c.mustRefuse && !foreign.length && !internal.length && !extra) out.push(`answered (must be refused): ${show(rows).slice(0, 120)}`);
  }
  return out;
}

/** JSON text of `v` with bigints and bytes spelled out. */
function show(v) {
  return JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? `bytes:${Buffer.from(x).toString('hex')}` : x));
}

function variantsOf(c) {
  return c.variants.map((v) => (typeof v === 'string' ? { sql: v, params: c.params } : Array.isArray(v) ? { sql: v[0], params: v[1] } : { params: c.params, ...v }));
}

export function define(engine) {
  const dialect = engine.dialect;
  describe(`${engine.name}: tenant isolation of registered queries`, () => {
    for (const c of attackCases()) {
      if (!c.dialects.includes(dialect)) continue;
      test(c.label, async () => {
        await withStorage(engine, async (storage) => {
          await seedTenants(storage);
          let before = await digest(storage);
          const problems = [];
          for (const v of variantsOf(c)) {
            for (const form of c.forms ?? FORMS) {
              const { outcome, extra = [] } = await runForm(storage, form, v);
              const bad = [...judge(outcome, c), ...extra];
              const after = await digest(storage);
              if (after !== before) bad.push('WRITE: the partitions changed');
              before = after;
              for (const b of bad) problems.push(`[${form}] ${v.sql} → ${b}`);
            }
          }
          assert.deepEqual(problems, []);
        });
      });
    }

    test('a query setting search_path does not change later calls (pooled session state)', async () => {
      const pg = dialect === 'postgres';
      // A second tenant on its own schema (PostgreSQL) or database, with the same partition id.
      const other = engine.shared ? engine.shared() : undefined;
      const victimStore = other ? other.open() : engine.create();
      try {
        await victimStore.ensureSchema(fixtureSchema());
        await writeCommit(victimStore, OWN, [{ table: 'tasks', row: taskRow('own-1', { title: `${VICTIM_MARK} other tenant`, project: 'p-own' }) }]);
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            const before = await digest(storage);
            const target = other?.schema ?? 'public';
            const calls = pg
              ? [
                  `SELECT set_config('search_path', '${target}', false) AS s`,
                  `SELECT set_config('search_path', '${target}', false) AS s, title FROM tasks`,
                  `SELECT "set_config"('search_path', 'pg_catalog', false) AS s`,
                  `SELECT set_config('statement_timeout', '0', false) AS s`,
                  `SELECT set_config('default_transaction_read_only', 'off', false) AS s`,
                  `SELECT set_config('search_path', '${target}', true) AS s`,
                ]
              : ["SELECT title FROM tasks WHERE 'search_path' <> ''"];
            const problems = [];
            for (const sql of calls) {
              for (const form of ['legacy', 'tx']) {
                const { outcome, extra = [] } = await runForm(storage, form, { sql, params: [], tables: planOf(sql, ['tasks']).tables });
                problems.push(...[...judge(outcome, {}), ...extra].map((b) => `[${form}] ${sql} → ${b}`));
                // With one pooled connection every later call runs on the session the query ran on.
                for (let i = 0; i < 3; i += 1) {
                  const row = await attempt(() => storage.getRow(OWN, 'tasks', 'own-1'), SETTLE_MS);
                  if (row.kind !== 'answered' || row.value?.payload === undefined) problems.push(`[${form}] ${sql} → later getRow: ${row.kind} ${row.code ?? ''} ${row.message ?? ''}`);
                  const q = await attempt(() => storage.queryAuthoritative(OWN, { sql: 'SELECT id, title FROM tasks ORDER BY id', params: [], tables: ['tasks'] }), SETTLE_MS);
                  const titles = q.kind === 'answered' ? q.value.rows.map((r) => r.title).join('|') : `${q.kind} ${q.code} ${q.message}`;
                  if (titles !== 'own title 1|own title 2|own shared') problems.push(`[${form}] ${sql} → later query saw: ${titles.slice(0, 160)}`);
                }
              }
            }
            if ((await digest(storage)) !== before) problems.push('WRITE: the partitions changed');
            assert.deepEqual(problems, []);
          },
          { opts: pg ? { maxConnections: 1 } : {} },
        );
      } finally {
        await victimStore.close();
      }
    });

    test('one query text bound with 1.5, then 42, then a string answers each for its own value', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        await writeCommit(storage, OWN, [{ table: 'tasks', row: taskRow('own-42', { title: 'forty-two', project: 'p-own', count: 42 }) }]);
        const q = (sql, v) => attempt(() => storage.queryAuthoritative(OWN, { sql, params: [v], tables: planOf(sql, ['tasks']).tables }), SETTLE_MS);
        const problems = [];
        const expect = async (sql, v, ok, label) => {
          const o = await q(sql, v);
          const bad = judge(o, {});
          if (bad.length) problems.push(`${label}: ${bad.join('; ')}`);
          else if (!ok(o)) problems.push(`${label}: got ${o.kind} ${o.code ?? ''} ${show(o.value?.rows ?? o.message)}`);
        };
        for (const [sql, kind] of [
          ['SELECT ? AS v', 'echo'],
          ['SELECT CAST(? AS TEXT) AS v', 'text'],
          ['SELECT id FROM tasks WHERE count = ? ORDER BY id', 'match'],
        ]) {
          for (const round of [1, 2]) {
            for (const v of [1.5, 42, 'abc']) {
              const label = `${sql} with ${JSON.stringify(v)} (round ${round})`;
              if (kind === 'echo') await expect(sql, v, (o) => o.kind === 'answered' && o.value.rows[0]?.v === v, label);
              if (kind === 'text') await expect(sql, v, (o) => o.kind === 'answered' && o.value.rows[0]?.v === String(v), label);
              if (kind === 'match') {
                const want = v === 42 ? 'own-42' : '';
                // A string compared with an integer column: no row, or a coded type error.
                await expect(sql, v, (o) => (o.kind === 'answered' ? o.value.rows.map((r) => r.id).join() === want : typeof v === 'string'), label);
              }
            }
          }
        }
        assert.deepEqual(problems, []);
      });
    });

    describe('lone UTF-16 surrogates are refused, never replaced by U+FFFD', () => {
      const LONE = ['\uD800', '\uDFFF'];
      const cp = (id) => ({ clientId: id, actorId: 'a', wireVersion: 1, cursor: 1, updatedAtMs: 1, subscriptions: [] });
      const members = [
        ['touchPartition partition', (s, x) => s.touchPartition(`p${x}`, 1, 'e')],
        ['touchPartition log epoch', (s, x) => s.touchPartition('p-epoch', 1, `e${x}`)],
        ['getRow partition', (s, x) => s.getRow(`p${x}`, 'tasks', 'own-1')],
        ['getRow row id', (s, x) => s.getRow(OWN, 'tasks', `own-1${x}`)],
        ['getRow table name', (s, x) => s.getRow(OWN, `tasks${x}`, 'own-1')],
        ['getClientRecord client id', (s, x) => s.getClientRecord(OWN, `${'ZZINTERNAL'}-cr${x}`)],
        ['putClientRecord partition', (s, x) => s.putClientRecord(`p${x}`, cp('c'))],
        ['putClientRecord client id', (s, x) => s.putClientRecord(OWN, cp(`c${x}`))],
        ['queryAuthoritative partition', (s, x) => s.queryAuthoritative(`${OWN}${x}`, { sql: 'SELECT title FROM tasks', params: [], tables: ['tasks'] })],
        ['queryAuthoritative table name', (s, x) => s.queryAuthoritative(OWN, { sql: 'SELECT 1 AS one', params: [], tables: [`tasks${x}`] })],
        ['declareCheckpoint name', (s, x) => s.declareCheckpoint(OWN, `cp${x}`, 1, 1000)],
        ['declareCheckpoint partition', (s, x) => s.declareCheckpoint(`p${x}`, 'cp', 1, 1000)],
        ['readCheckpoints partition', (s, x) => s.readCheckpoints(`p${x}`)],
        ['begin partition', async (s, x) => {
          const tx = await s.begin(`p${x}`);
          try {
            await tx.lockPartitionForPush();
            return await tx.appendCommit({ clientId: 'c', clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: [] });
          } finally {
            await tx.rollback();
          }
        }],
        ...[
          ['tx.upsertRow row id', (tx, x) => tx.upsertRow('tasks', taskRow(`r${x}`, { project: 'p-own' }), { opIndex: 0 })],
          ['tx.getRow row id', (tx, x) => tx.getRow('tasks', `own-1${x}`)],
          ['tx.appendCommit client id', (tx, x) => tx.appendCommit({ clientId: `c${x}`, clientCommitId: 'cc', actorId: 'a', createdAtMs: 1, changes: [] })],
          ['tx.appendCommit client commit id', (tx, x) => tx.appendCommit({ clientId: 'c', clientCommitId: `cc${x}`, actorId: 'a', createdAtMs: 1, changes: [] })],
          ['tx.queryAuthoritative table name', (tx, x) => tx.queryAuthoritative({ sql: 'SELECT 1 AS one', params: [], tables: [`tasks${x}`] })],
        ].map(([label, fn]) => [
          label,
          async (s, x) => {
            const tx = await s.begin(OWN);
            try {
              await tx.lockPartitionForPush();
              return await fn(tx, x);
            } finally {
              await tx.rollback();
            }
          },
        ]),
      ];
      for (const [label, call] of members) {
        test(label, async () => {
          await withStorage(engine, async (storage) => {
            await seedTenants(storage);
            await storage.declareCheckpoint(OWN, 'cp', 1, 1000);
            const before = await digest(storage);
            const problems = [];
            for (const x of LONE) {
              const o = await attempt(() => call(storage, x), SETTLE_MS);
              if (o.kind !== 'refused' || o.code !== INVALID) {
                problems.push(`${JSON.stringify(x)}: ${o.kind}${o.code ? ` ${o.code}` : ''}${o.message ? ` ${o.message}` : ''} (expected ${INVALID})`);
              }
            }
            if ((await digest(storage)) !== before) problems.push('WRITE: the seeded partitions changed');
            assert.deepEqual(problems, []);
          });
        });
      }

      test('two partitions differing only in a lone surrogate never share rows', async () => {
        await withStorage(engine, async (storage) => {
          const writes = [];
          for (const [p, title] of [
            ['s-\uD800', 'high'],
            ['s-\uDC00', 'low'],
          ]) {
            writes.push(await attempt(() => writeCommit(storage, p, [{ table: 'tasks', row: taskRow('r', { title }) }]), SETTLE_MS));
          }
          const problems = writes.filter((w) => w.kind !== 'refused' || w.code !== INVALID).map((w) => `write ${w.kind} ${w.code ?? ''}`);
          const seen = await attempt(() => storage.getRow('s-\uFFFD', 'tasks', 'r'), SETTLE_MS);
          if (seen.kind === 'answered' && seen.value !== undefined) problems.push('a row written under a lone surrogate is readable under U+FFFD');
          assert.deepEqual(problems, []);
        });
      });
    });

    describe('a runaway query fails with ERR_SYNCULAR_QUERY_TIMEOUT within queryTimeoutMs', () => {
      const queryTimeoutMs = 200;
      const timedOut = (problems, o, label) => {
        if (o === undefined) problems.push(`${label}: never settled (the child process was stopped)`);
        else if (o.kind !== 'refused' || o.code !== TIMEOUT) problems.push(`${label}: ${o.kind} ${o.code ?? ''} ${o.message ?? ''} after ${o.ms} ms (expected ${TIMEOUT})`);
      };
      const answered = (problems, o, label) => {
        if (o === undefined) problems.push(`${label}: never settled (the child process was stopped)`);
        else if (o.kind !== 'answered') problems.push(`${label}: ${o.kind} ${o.code ?? ''} ${o.message ?? ''}`);
      };
      const later = (problems, steps) => {
        answered(problems, steps.later?.query, 'a query after the runaway one');
        answered(problems, steps.close?.close, 'close() afterwards');
      };

      test('storage-level form; other calls issued meanwhile succeed', async () => {
        const steps = await runChild(engine, queryTimeoutMs, 'legacy');
        const problems = [];
        timedOut(problems, steps.runaway?.runaway, 'runaway query');
        if (steps.others === undefined) problems.push(`calls issued beside the runaway query never settled${steps['others-start'] ? '' : ' (the JS thread was blocked)'}`);
        for (const [i, o] of (steps.others?.others ?? []).entries()) answered(problems, o, ['getRow', 'queryAuthoritative', 'a push'][i] + ' beside the runaway query');
        later(problems, steps);
        assert.deepEqual(problems, []);
      });

      test('plan form', async () => {
        const steps = await runChild(engine, queryTimeoutMs, 'plan');
        const problems = [];
        timedOut(problems, steps.runaway?.runaway, 'runaway query');
        later(problems, steps);
        assert.deepEqual(problems, []);
      });

      test('transaction-bound form; the transaction stays usable', async () => {
        const steps = await runChild(engine, queryTimeoutMs, 'tx');
        const problems = [];
        timedOut(problems, steps.runaway?.runaway, 'runaway query');
        answered(problems, steps.after?.after, 'tx.getRow after the runaway query');
        later(problems, steps);
        assert.deepEqual(problems, []);
      });

      test('close() during a runaway query returns promptly and the query settles with a code', async () => {
        const steps = await runChild(engine, queryTimeoutMs, 'close');
        const problems = [];
        answered(problems, steps.close?.close, 'close()');
        const q = steps.runaway?.runaway;
        if (q === undefined || q.kind === 'hang' || q.kind === 'uncoded' || q.kind === 'answered') problems.push(`the query close() interrupted: ${q ? `${q.kind} ${q.message ?? ''}` : 'never settled'}`);
        assert.deepEqual(problems, []);
      });
    });
  });
}

const CHILD = fileURLToPath(new URL('../support/runaway-child.mjs', import.meta.url));

/**
 * The runaway scenario in a child process (support/runaway-child.mjs),
 * stopped after 15 s; on PostgreSQL the runaway backends it may leave are
 * ended afterwards. Returns the steps it reported, by name.
 */
async function runChild(engine, queryTimeoutMs, scenario) {
  const child = spawn(process.execPath, [CHILD, engine.name, String(queryTimeoutMs), scenario], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await new Promise((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  if (engine.dialect === 'postgres') await endRunaways(engine.requireUrl());
  const steps = out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
  if (steps.length === 0) throw new Error(`runaway child reported nothing: ${err.slice(0, 600)}`);
  return Object.fromEntries(steps.map((s) => [s.step, s]));
}
