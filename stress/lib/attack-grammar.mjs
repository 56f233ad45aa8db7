// Generated registered-query attacks, assembled from grammar fragments:
// relation names in every quoting form (bare, "…", […], `…`, U&"…",
// ONLY, (TABLE …), qualified, other letter case), internal and catalog
// names, aliases including context keywords, variables in every form
// (?, ?NNN, :x, @x, $x, #x, $n), comments (line, block, nested,
// unterminated), strings (E'…', doubled quotes, dollar quoting), set
// operations, subqueries, CTEs (plain, recursive, runaway, data-modifying),
// and function calls (harmless and dangerous). Each query is a pure
// function of (seed, index), so a run restarted at an index reproduces the
// same queries.
// Since the second isolation review, also: CTEs and aliases named like the
// engines' partition views or like real tables, reads that name no column
// (count(*), SELECT 1, EXISTS), non-string partitions, functions whose cost
// or size an argument or a client parameter sets, and functions that fail
// with their argument in the message (over every tenant's rows, on tables
// with statistics, where the attack child seeds many partitions).
// Since issue 28, also: whole queries whose cost or size a client's
// parameter or the query's own values set (the 'cost' trait): results of
// millions of rows or of large rows, LIKE/GLOB and substring search over
// values of a megabyte built in the query, rows of hundreds of calls over
// such values, and containment or overlap of large arrays and jsonb.
// STRESS_ATTACK_RESIDUAL=1 adds the shapes docs/bounds.md names as residual.
import { OWN, VICTIM, planFor, viewName } from '../../__test__/support/isolation.mjs';
import { ACCOUNT_COLUMNS, TASK_COLUMNS } from '../../__test__/support/schema.mjs';

function rng(seed) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  for (let i = 0; i < 8; i += 1) next();
  return {
    below: (n) => Math.floor(next() * n),
    chance: (p) => next() < p,
    pick: (list) => list[Math.floor(next() * list.length)],
  };
}

// Fragments tagged by dialect: 'sqlite', 'postgres', or both (undefined).
const D = (dialect, ...items) => items.map((text) => ({ text, dialect }));

const TABLES = ['tasks', 'accounts'];

/** Relation text for schema table `t`. */
function relationForms(t) {
  const u = `U&"${t[0]}\\00${t.charCodeAt(1).toString(16)}${t.slice(2)}"`;
  return [
    ...D(undefined, t, t, t, `"${t}"`, t.toUpperCase(), `${t[0].toUpperCase()}${t.slice(1)}`),
    ...D('sqlite', `[${t}]`, `\`${t}\``, `main.${t}`, `temp.${t}`, `'${t}'`),
    ...D('postgres', `ONLY ${t}`, `(TABLE ${t})`, u, `public.${t}`, `${t} *`, `"public"."${t}"`),
  ];
}

const INTERNAL = [
  ...D(undefined, 'sync_commits', '"sync_partitions"', 'sync_changes', 'SYNC_CLIENTS', 'sync_row_scopes', '"_sync_x"'),
  ...D('sqlite', 'sqlite_master', 'sqlite_schema', '"sqlite_temp_master"', "pragma_table_info('tasks')", 'pragma_database_list', '[sync_commits]', '`sync_push_results`'),
  ...D('postgres', 'pg_class', '"pg_tables"', 'U&"sync\\005fcommits"', 'information_schema.tables', 'pg_stat_activity', 'pg_settings', "pg_ls_dir('.')", 'U&"pg\\005fclass"', 'pg_catalog.pg_namespace'),
];

// Names a CTE or alias may take to pose as something it is not.
const POSING_NAMES = [
  ...D(undefined, `"${viewName('tasks', TASK_COLUMNS)}"`, viewName('accounts', ACCOUNT_COLUMNS), `"${viewName('tasks', TASK_COLUMNS).toUpperCase()}"`, 'tasks', 'accounts', 'sync_commits', '"_syncular_q_tasks"'),
  ...D('sqlite', `'${viewName('tasks', TASK_COLUMNS)}'`, `[${viewName('accounts', ACCOUNT_COLUMNS)}]`, 'sqlite_master', 'json_each'),
  ...D('postgres', 'pg_class', 'U&"\\005fsyncular_q_tasks"'),
];

// A raw relation hidden from a lexer (a keyword alias before it), for CTE bodies and column-free reads.
const HIDDEN = [
  ...D(undefined, 'accounts window, tasks', 'accounts AS window, tasks', 'tasks window, accounts', 'accounts window, sync_commits', 'tasks window, sync_partitions'),
  ...D('sqlite', 'accounts window, sqlite_master', 'tasks window, sqlite_schema', 'accounts window, pragma_table_list', 'tasks window, main.tasks'),
  ...D('postgres', 'accounts, ONLY tasks', 'accounts, (TABLE tasks) x', 'accounts, pg_class'),
];

// Select items that read no column of what they count.
const COLUMN_FREE = ['count(*)', '1', 'count(1)', 'EXISTS (SELECT 1 FROM HIDDEN)', '(SELECT count(*) FROM HIDDEN)', 'max(1)'];

// Non-string partitions a host (or attacker) might pass: lease numbers and anything else.
const PARTITIONS = [0, 1, 2, 3, 4, 7, -1, 1.5, null, true, false, {}, [OWN], { toString: () => OWN }];

// Functions whose cost or result size an argument (or a client parameter) sets.
const SIZED_FUNCS = [
  ...D(
    'sqlite',
    "printf('%.*c', VAR, 'x')",
    "printf('%.*c', 2000000000, 'x')",
    "printf('%*d', 2000000000, 1)",
    "length(printf('%.*c', 1000000, 'x'))",
    "instr(printf('%.*c', 1000000, 'a'), printf('%.*c', 100000, 'a') || 'b')",
    "replace(printf('%.*c', 1000000, 'a'), printf('%.*c', 1000, 'a') || 'b', 'c')",
    "trim(printf('%.*c', 1000000, 'a'), printf('%.*c', 1000, 'b'))",
    "printf('%.*c', 1000000, 'a') LIKE printf('%.*c', 200, '%') || 'b'",
    "group_concat(printf('%.*c', 1000000, 'x'))",
  ),
  ...D(
    'postgres',
    "lpad('x', VAR)",
    "rpad('x', 1000000000)",
    "lpad(REF.title, 1000000000, 'ab')",
    "repeat('x', 1000000000)",
    "repeat('xy', VAR)",
    "format('%1000000000s', 'x')",
    "format('%*s', VAR, 'x')",
    "strpos(repeat('a', 10000000), repeat('a', 100000) || 'b')",
  ),
];

// Functions that fail with their argument in the error message.
const ERROR_FUNCS = [
  ...D(undefined, 'CAST(REF.title AS INTEGER) = 1'),
  ...D('sqlite', "json(REF.title) IS NOT NULL", "json_extract(REF.title, '$') IS NULL"),
  ...D('postgres', 'REF.title::int = 1', "to_timestamp(REF.title, 'YYYY') IS NULL", "(now() AT TIME ZONE REF.title) IS NULL", 'REF.title::date IS NULL', 'REF.title::jsonb IS NULL', "REF.title::numeric > 0", 'REF.title::uuid IS NULL'),
];

const KEYWORD_ALIASES = ['window', 'over', 'filter', 'rows', 'range', 'groups', 'do', 'key', 'match', 'first', 'last', 'nulls', 'current', 'exclude', 'replace', 'offset', 'within', 'only', 'lateral', 'table'];

const VARIABLES = [
  ...D(undefined, '?', '?', '?', '?1', '?2', '?3', '?99', '?0', ':x', '@x', '$x'),
  ...D('sqlite', '#x', '#a', '$x::y(z)', ':1'),
  ...D('postgres', '$1', '$2'),
];

const PARAM_VALUES = [VICTIM, VICTIM, VICTIM, OWN, 'p-own', 'own-1', 1, 42, 1.5, null, true, 'x\u0000y', '', 2000000000, 1000000000, 100000000, 3000000, 100000, 20000];

const HARMLESS_FUNCS = [
  ...D(undefined, 'lower(REF.title)', 'length(REF.id)', "coalesce(REF.title, 'x')", "replace(REF.title, 'o', '0')", 'upper(VAR)', 'abs(1)'),
  ...D('sqlite', "printf('%s', REF.title)", "json_extract(REF.meta, '$.m')", "group_concat(REF.title, ',')", 'typeof(VAR)'),
  ...D('postgres', "string_agg(REF.title, ',')", 'CAST(VAR AS TEXT)', "REF.meta::text", 'version()'),
];

const DANGEROUS_FUNCS = [
  ...D('sqlite', "load_extension('/nonexistent')", "readfile('/etc/hostname')", "writefile('/tmp/syncular-attack', 'x')", "fts3_tokenizer('simple')", "sqlite_offset(REF.id)", 'randomblob(8)', "edit('x')", "sqlite_compileoption_get(0)"),
  ...D(
    'postgres',
    "query_to_xml('select * from tasks', true, true, '')::text",
    "table_to_xml('tasks', true, true, '')::text",
    "query_to_xml('select * from sync_commits', true, true, '')::text",
    "\"query_to_xml\"('select title from tasks', true, true, '')::text",
    "pg_read_file('PG_VERSION')",
    "\"pg_read_file\"('PG_VERSION')",
    "U&\"pg\\005fread\\005ffile\"('PG_VERSION')",
    "current_setting('data_directory')",
    "set_config('search_path', 'public', false)",
    "set_config('statement_timeout', '0', false)",
    "\"set_config\"('search_path', 'pg_catalog', false)",
    "lo_import('/etc/hostname')",
    'txid_current()',
    'pg_backend_pid()',
    "nextval('x')",
    'inet_server_addr()',
  ),
];

// Rare: each costs a query time limit (or a hang while limits are not enforced).
const SLOW_FUNCS = [...D('postgres', 'pg_sleep(5)', 'pg_advisory_lock(7)', 'pg_terminate_backend(pg_backend_pid())')];

const RUNAWAY = 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r';

// Rows of `calls` result columns (at most 256 are allowed), each three
// calls of `f` over a 1 MiB value (`I` differs per call, so no two are the
// same).
const wideRow = (f, calls, v = "printf('%.*c', 1000000, 'a')") =>
  `WITH m AS MATERIALIZED (SELECT ${v} AS v) SELECT ${Array.from({ length: calls }, (_, i) => `(${['a', 'b', 'c'].map((k) => f.replaceAll('I', `${k}${i}`)).join(') + (')}) AS c${i}`).join(', ')} FROM m`;
const sqliteRows = (select) => `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?) SELECT ${select} FROM s`;
const pgRows = (select) => `SELECT ${select} FROM generate_series(1, CAST(? AS integer)) AS s(n)`;
const WIDE = 'n, n + 1 AS a, n * 2 AS b, n % 7 AS c, n - 1 AS d, n * 3 AS e, n + 5 AS f, n % 3 AS g';
const PG_HAY = "(SELECT string_agg(repeat('a', 10000), '') AS h FROM generate_series(1, 200)) AS x";
const PG_NEEDLE = "'b' || repeat('a', 2000)";

// Whole queries of the 'cost' trait, each with one client count (`?`) or none.
const COST_QUERIES = [
  ...D(
    'sqlite',
    "WITH m AS (SELECT printf('%.*c', 1000000, 'a') AS v, '%' || printf('%.*c', 250, 'a') || 'b' AS p) SELECT (v LIKE p) + (v GLOB replace(p, '%', '*')) + (v LIKE p ESCAPE '!') + (v LIKE p) AS n FROM m",
    wideRow("length(v || 'I')", 250),
    wideRow("instr(v, 'I')", 250),
    wideRow("length(upper(v || 'I'))", 250),
    wideRow("length(printf('%sI', v))", 250),
    wideRow("length(substr(v || 'I', 900000, 1))", 250),
    wideRow(`length(json_type(v || '"I"]'))`, 250, `'["' || printf('%.*c', 1000000, 'a') || '",'`),
    wideRow("(hex(substr(v, 1, 400000)) = 'I')", 250),
    wideRow("length(v || 'I')", 400),
    sqliteRows(WIDE),
    sqliteRows(WIDE),
    sqliteRows("n, printf('%.*c', 100000, 'x') AS v"),
    sqliteRows("n, printf('%.*c', 1000, 'x') AS v"),
    // Operators between two checks, bounded by the query's value limit.
    wideRow("CAST(v || 'I' AS INTEGER)", 250, "printf('%.*c', ?, '7')"),
    wideRow("(v + 'I')", 250, "printf('%.*c', ?, '7')"),
    wideRow("(v * v * 'I')", 40, "printf('%.*c', ?, '7')"),
    `WITH m AS MATERIALIZED (SELECT printf('%.*c', ?, 'a') AS v) SELECT ${Array.from({ length: 250 }, (_, i) => `v || '${i}' AS c${i}`).join(', ')} FROM m`,
  ),
  ...D(
    'postgres',
    `SELECT h LIKE '%' || repeat('a', 2000) || 'b%' AS r FROM ${PG_HAY}`,
    `SELECT h NOT ILIKE '%' || repeat('a', 2000) || 'b%' AS r FROM ${PG_HAY}`,
    `SELECT strpos(h, ${PG_NEEDLE}) AS r FROM ${PG_HAY}`,
    `SELECT position(${PG_NEEDLE} IN h) AS r FROM ${PG_HAY}`,
    `SELECT length(split_part(h, ${PG_NEEDLE}, 2)) AS r FROM ${PG_HAY}`,
    `SELECT length(replace(h, ${PG_NEEDLE}, 'x')) AS r FROM ${PG_HAY}`,
    `SELECT cardinality(string_to_array(h, ${PG_NEEDLE})) AS r FROM ${PG_HAY}`,
    `SELECT length(translate(h, (SELECT string_agg(chr(1000 + g), '') FROM generate_series(1, 20000) g), 'x')) AS r FROM ${PG_HAY}`,
    'SELECT array(SELECT generate_series(1, 30000)) && array(SELECT -generate_series(1, 30000)) AS r',
    'SELECT array(SELECT generate_series(1, 30000)) @> array(SELECT -g FROM generate_series(-30000, -1) g) AS r',
    'SELECT to_jsonb(array(SELECT generate_series(1, 30000))) @> to_jsonb(array(SELECT -g FROM generate_series(-30000, -1) g)) AS r',
    pgRows(WIDE),
    pgRows(WIDE),
    pgRows("n, repeat('0123456789', 10000) AS v"),
    pgRows("n, repeat('x', 1000) AS v"),
  ),
];

// The shapes docs/bounds.md names as residual: linear functions over values
// of hundreds of megabytes built in the query and numeric arithmetic on
// PostgreSQL's transaction-bound form.
const RESIDUAL_QUERIES = [
  ...D(
    'postgres',
    "SELECT length(upper(h)) + length(upper(h || 'x')) AS r FROM (SELECT string_agg(repeat('a', 10000), '') AS h FROM generate_series(1, 20000)) x",
    'SELECT length(CAST(power(CAST(7 AS numeric), 100000) / (power(CAST(3 AS numeric), 90000) + 1) AS text)) AS n',
  ),
];

const COMMENTS = [
  ...D(undefined, '/* c */', '-- c\n', '/**/', '/* FROM tasks */', "-- ' \n", '/* " */'),
  ...D('postgres', '/* /* */ tasks */', '/* /* */ */', "/* /* ' */ */"),
];

const STRINGS = [
  ...D(undefined, "'x'", "'it''s'", "'?'", "'FROM tasks'", "''"),
  ...D('sqlite', "x'41'", '[x]'),
  ...D('postgres', "E'\\''", "e'\\\\'", '$$x$$', "$q$ ' $q$", "U&'\\0041'"),
];

const SET_OPS = ['UNION ALL', 'UNION', 'EXCEPT', 'INTERSECT'];

const DML_CTES = [
  ...D(undefined, 'd AS (DELETE FROM REL RETURNING id)', "u AS (UPDATE REL SET title = 'w' RETURNING id)", "i AS (INSERT INTO tasks (id) VALUES ('zz') RETURNING id)"),
  ...D('postgres', 'c AS (UPDATE sync_partitions SET max_commit_seq = 0 RETURNING 1)', 'k AS (DELETE FROM sync_commits RETURNING 1)', 'd AS (DELETE FROM U&"t\\0061sks" RETURNING 1)'),
];

const FORMS = [
  ['legacy', 30],
  ['plan', 20],
  ['plan-first', 10],
  ['tx', 25],
  ['tx-plan', 15],
];

/** Picks fragments of `dialect` mostly, the other dialect's now and then. */
function picker(r, dialect) {
  return (list) => {
    for (let k = 0; k < 4; k += 1) {
      const f = r.pick(list);
      if (f.dialect === undefined || f.dialect === dialect || r.chance(0.08)) return f.text;
    }
    return (list.find((f) => f.dialect === undefined || f.dialect === dialect) ?? list[0]).text;
  };
}

const COLUMNS = { tasks: ['id', 'title', 'project_id', 'count'], accounts: ['id', 'email', 'org_id'] };

// The hostile traits one query may combine (one or two per query, so that
// most queries get past the first check and the later ones are exercised).
const TRAITS = ['relation', 'internal', 'keyword-alias', 'variable', 'function', 'comment', 'string', 'dml', 'params', 'tail', 'nested', 'posing-cte', 'column-free', 'partition', 'sized', 'error-fn', 'cost'];

/** Placeholders SQLite would count: bare `?` and the largest `?NNN` (outside quotes, roughly). */
function placeholders(sql) {
  const bare = sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"/g, '');
  let anon = 0;
  for (const m of bare.matchAll(/\?(\d*)/g)) anon = m[1] ? Math.max(anon, Number(m[1])) : anon + 1;
  return Math.min(anon, 8);
}

/**
 * The query number `index` of the run seeded `seed` for `dialect`:
 * { form, sql, params, tables, plan, tags }.
 */
export function generate(seed, index, dialect) {
  const r = rng((seed * 2654435761 + index * 40503 + 7) >>> 0);
  const pick = picker(r, dialect);
  const hostile = new Set();
  const n = 1 + r.below(2);
  while (hostile.size < n) hostile.add(r.pick(TRAITS));
  const tags = [...hostile];
  const tag = (t) => tags.push(t);

  const relation = (t) => (hostile.has('relation') && r.chance(0.6) ? pick(relationForms(t)) : t);

  // The FROM list: 1–3 items: schema relations, internal or catalog names, subqueries, CTE names.
  const ctes = [];
  const items = [];
  const count = 1 + (r.chance(0.5) ? 0 : r.below(3));
  let aliasN = 0;
  for (let k = 0; k < count; k += 1) {
    const roll = r.below(100);
    let text;
    let ref;
    const t = r.pick(TABLES);
    if (hostile.has('internal') && (k === 0 || r.chance(0.3))) text = pick(INTERNAL);
    else if (roll < 70) text = relation(t);
    else if (roll < 85) {
      text = `(SELECT * FROM ${relation(t)})`;
      tag('subquery');
    } else {
      const name = `x${ctes.length}`;
      ctes.push(`${name} AS (SELECT * FROM ${relation(t)})`);
      text = name;
      tag('cte');
    }
    const a = r.below(100);
    // A keyword alias hides what follows it: mostly on the first item, with
    // 'window' (the one known to fool a lexer) weighted up.
    if (hostile.has('keyword-alias') && (k === 0 ? a < 85 : a < 25)) {
      const kw = r.chance(0.4) ? 'window' : r.pick(KEYWORD_ALIASES);
      text += r.chance(0.5) ? ` AS ${kw}` : ` ${kw}`;
      ref = kw;
    } else if (a < 35 && /^[a-z_]+$/i.test(text)) ref = text;
    else {
      aliasN += 1;
      ref = `t${aliasN}`;
      text += r.chance(0.5) ? ` AS ${ref}` : ` ${ref}`;
    }
    items.push({ text, ref, table: t });
  }

  if (hostile.has('posing-cte')) {
    // A CTE named like a view or a table, its body reading a relation hidden from the lexer.
    const name = pick(POSING_NAMES);
    ctes.push(`${name} AS (SELECT * FROM ${pick(HIDDEN)})`);
    items.unshift({ text: name, ref: name, table: 'tasks' });
    if (r.chance(0.3)) items[0] = { text: `tasks AS ${name}`, ref: name, table: 'tasks' };
  }

  const col = (setOp) => {
    const it = r.pick(items);
    const c = setOp ? (it.table === 'tasks' ? 'title' : 'email') : r.pick(COLUMNS[it.table]);
    return items.length === 1 && r.chance(0.4) ? c : `${it.ref}.${c}`;
  };
  const variable = () => (hostile.has('variable') && r.chance(0.7) ? pick(VARIABLES) : '?');
  const func = () => {
    let f;
    if (hostile.has('function')) f = r.chance(0.06) ? pick(SLOW_FUNCS) : pick(DANGEROUS_FUNCS);
    else f = pick(HARMLESS_FUNCS);
    const it = r.pick(items);
    return f.replaceAll('REF.title', `${it.ref}.${COLUMNS[it.table][1]}`).replaceAll('REF.id', `${it.ref}.id`).replaceAll('REF.meta', `${it.ref}.id`).replaceAll('REF', it.ref).replaceAll('VAR', variable());
  };
  const string = () => (hostile.has('string') && r.chance(0.7) ? pick(STRINGS) : "'x'");

  // The select list.
  const setOp = r.chance(0.12);
  const selectItems = [];
  const width = setOp ? 1 : 1 + r.below(3);
  for (let k = 0; k < width; k += 1) {
    const roll = r.below(100);
    let e;
    if (roll < 8 && !setOp) e = '*';
    else if (roll < 55 || setOp) e = col(setOp);
    else if (roll < 65) e = variable();
    else if (roll < 82) e = func();
    else if (roll < 90) e = string();
    else {
      e = `(SELECT ${r.chance(0.5) ? 'count(*)' : 'max(id)'} FROM ${relation(r.pick(TABLES))})`;
      tag('scalar-subquery');
    }
    selectItems.push(e === '*' ? e : `${e} AS c${k}`);
  }
  if (hostile.has('column-free') && !setOp) {
    selectItems.length = 0;
    selectItems.push(`${r.pick(COLUMN_FREE).replace('HIDDEN', pick(HIDDEN))} AS n`);
    if (r.chance(0.5)) items.splice(0, items.length, { text: pick(HIDDEN), ref: 'window', table: 'tasks' });
  }
  if (hostile.has('sized') && !setOp) {
    const it = r.pick(items);
    selectItems.push(`${pick(SIZED_FUNCS).replaceAll('REF.title', `${it.ref}.${COLUMNS[it.table][1]}`).replaceAll('VAR', variable())} AS z`);
  }
  let sql = `SELECT ${selectItems.join(', ')} FROM ${items.map((i) => i.text).join(r.chance(0.7) ? ', ' : ' CROSS JOIN ')}`;
  if (hostile.has('error-fn')) {
    const it = r.pick(items);
    sql += ` WHERE ${pick(ERROR_FUNCS).replaceAll('REF.title', `${it.ref}.${COLUMNS[it.table][1]}`)}`;
  }

  const w = hostile.has('error-fn') ? 100 : r.below(100);
  if (w < 20) sql += ` WHERE ${variable()} IS NULL`;
  else if (w < 28) sql += ` WHERE ${variable()} IS NULL OR ${variable()} IS NULL`;
  else if (w < 38) {
    sql += ` WHERE ${col()} IN (SELECT id FROM ${relation(r.pick(TABLES))})`;
    tag('subquery');
  } else if (w < 42) {
    sql += ` WHERE ${col()} IN ${relation('tasks')}`;
    tag('in-table');
  } else if (w < 52) sql += ` WHERE ${col()} <> ${string()}`;

  if (setOp) {
    const t = r.pick(TABLES);
    sql += ` ${r.pick(SET_OPS)} SELECT ${t === 'tasks' ? 'title' : 'email'} FROM ${relation(t)}`;
    tag('set-operation');
  }

  if (hostile.has('dml')) {
    ctes.push(r.pick(DML_CTES.filter((f) => f.dialect === undefined || f.dialect === dialect)).text.replace('REL', relation('tasks')));
    if (dialect === 'postgres' && r.chance(0.6)) {
      // E'\'' desynchronizes a lexer that does not know backslash escapes; a second one resynchronizes it.
      ctes.unshift("q AS (SELECT E'\\'' AS s)");
      sql = sql.replace('SELECT ', "SELECT E'\\'' AS s2, ");
      tag('e-string');
    }
  } else if (r.chance(0.06)) {
    ctes.push('r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 3)');
    tag('recursive');
  }
  if (ctes.length) sql = `WITH ${ctes.some((x) => x.startsWith('r(')) ? 'RECURSIVE ' : ''}${ctes.join(', ')} ${sql}`;
  if (r.chance(0.005)) {
    sql = RUNAWAY;
    tag('runaway');
  }
  if (hostile.has('cost')) {
    // A whole query whose cost a client count or its own values set; its
    // count is one of the client's own parameters.
    const pool = process.env.STRESS_ATTACK_RESIDUAL === '1' && r.chance(0.3) ? RESIDUAL_QUERIES : COST_QUERIES;
    sql = pick(pool);
    hostile.delete('comment');
    hostile.delete('nested');
    hostile.delete('tail');
    hostile.delete('params');
  }

  if (hostile.has('comment') || hostile.has('nested')) {
    const spots = [...sql.matchAll(/ /g)].map((m) => m.index);
    const at = r.pick(spots);
    const c = hostile.has('nested') ? pick([...D('postgres', '/* /* */ tasks */', '/* /* */ */', "/* /* ' */ */", '/* /* */ , tasks */'), ...D('sqlite', '/* /* */', '/* [ */')]) : pick(COMMENTS);
    sql = `${sql.slice(0, at)} ${c} ${sql.slice(at + 1)}`;
  }
  if (hostile.has('tail')) sql += r.pick([' /*', ' --', "'", '"', ';', '; DELETE FROM tasks', ' LIMIT ?', ' ORDER BY 1', ' OFFSET ?']);

  const params = [];
  const wanted = hostile.has('params') ? r.below(4) : placeholders(sql);
  for (let k = 0; k < wanted; k += 1) params.push(r.pick(PARAM_VALUES));

  let total = 0;
  for (const [, weight] of FORMS) total += weight;
  let f = r.below(total);
  let form = FORMS[0][0];
  for (const [name, weight] of FORMS) {
    if (f < weight) {
      form = name;
      break;
    }
    f -= weight;
  }
  const plan = planFor(sql, TABLES, { firstOnly: form === 'plan-first' });
  for (const rel of plan.plan.relations) {
    const m = /^\s+(?:AS\s+)?([A-Za-z_][A-Za-z0-9_]*)/i.exec(sql.slice(rel.end));
    if (m && !/^(on|where|group|order|inner|left|right|full|outer|natural|join|cross|using|limit|having|union|except|intersect|select|from|returning)$/i.test(m[1])) rel.alias = m[1];
  }
  // The legacy form declares what the text names (now and then nothing or everything).
  const declared = hostile.has('params') && r.chance(0.4) ? (r.chance(0.5) ? [] : [...TABLES]) : plan.tables;
  // Now and then a partition that is not a string, in any form.
  const partition = hostile.has('partition') ? r.pick(PARTITIONS) : OWN;
  return { form, sql, params, partition, tables: form.includes('plan') ? plan.tables : declared, plan: plan.plan, tags: [...new Set(tags)] };
}
