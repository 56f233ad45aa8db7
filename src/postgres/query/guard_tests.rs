//! The guard without a server: each attack class is refused, or bound to
//! one partition (every table read through the session's security-barrier
//! view of it, `pg_temp."_syncular_q_…"`).

use super::guard::{
    cached, guard, view_ddl, view_ddl_for, view_name, Cache, Guarded, Scope, Slot,
    MAX_GUARDED_BYTES,
};
use crate::core::error::Error;
use crate::core::query::{self, Bind, Request, Value};
use crate::core::schema::Schema;
use std::sync::Arc;
use std::sync::Mutex;

fn schema() -> Schema {
    Schema::parse(
        r#"{"version":1,"tables":[
          {"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},
             {"name":"project_id","type":"string","nullable":false},
             {"name":"title","type":"string","nullable":false}],
           "primaryKeyIndex":0,"materialize":true,"indexes":[]},
          {"name":"accounts","columns":[{"name":"id","type":"string","nullable":false},
             {"name":"email","type":"string","nullable":true}],
           "primaryKeyIndex":0,"materialize":true,"indexes":[]},
          {"name":"secrets","columns":[{"name":"id","type":"string","nullable":false}],
           "primaryKeyIndex":0,"materialize":false,"indexes":[]}]}"#,
    )
    .unwrap()
}

const APP: &str = "app";

/// The guard alone, on SQL as the rewrite might have produced it.
fn direct(sql: &str, binds: &[Bind]) -> crate::Result<Guarded> {
    let s = schema();
    guard(
        sql,
        binds,
        &Scope {
            schema: APP,
            tables: &s.tables,
        },
    )
}

/// The whole path: the shared rewrite (legacy form), `$n` numbering, the
/// guard.
fn full(sql: &str, params: &[Value], tables: &[&str]) -> crate::Result<Guarded> {
    let s = schema();
    let declared: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    let p = query::prepare(&Request::Legacy { sql: sql.into() }, params, &declared, &s)?;
    guard(
        &query::dollar_params(&p.sql),
        &p.binds,
        &Scope {
            schema: APP,
            tables: &s.tables,
        },
    )
}

fn code(e: &Error) -> String {
    match e {
        Error::Plain { code, .. } => code.to_string(),
        Error::Engine { code, .. } => code.clone(),
        other => format!("{other:?}"),
    }
}

#[track_caller]
fn assert_refused(r: crate::Result<Guarded>, label: &str) {
    match r {
        Ok(g) => panic!("{label}: accepted as {:?}", g.sql),
        Err(e) => {
            let c = code(&e);
            assert!(
                c == query::REFUSED || c == query::PLAN_ERROR || c == "42601",
                "{label}: {c} {e:?}"
            );
        }
    }
}

/// Every relation the guarded SQL reads, as (schema, name), and every
/// `_sync_partition` filter's parameter, read back with PostgreSQL's parser.
fn relations(sql: &str) -> Vec<(String, String)> {
    let parsed = pg_query::parse(sql, 0).unwrap();
    let json = serde_json::to_value(&parsed.protobuf).unwrap();
    let mut out = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(o) => {
                if let Some(rv) = o.get("RangeVar") {
                    out.push((
                        rv["schemaname"].as_str().unwrap().to_owned(),
                        rv["relname"].as_str().unwrap().to_owned(),
                    ));
                }
                o.values().for_each(|x| walk(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&json, &mut out);
    out
}

/// Accepted, and every app table is read through its partition-bound view
/// (and nothing else qualified is read).
#[track_caller]
fn assert_bound(r: crate::Result<Guarded>, tables: &[&str], label: &str) -> Guarded {
    let g = r.unwrap_or_else(|e| panic!("{label}: {e:?}"));
    // Unqualified names left are CTE references, never app tables.
    let (rels, ctes): (Vec<_>, Vec<_>) = relations(&g.sql)
        .into_iter()
        .partition(|(schema, _)| !schema.is_empty());
    for (_, name) in &ctes {
        assert!(
            !schema()
                .tables
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(name)),
            "{label}: {name} unbound in {}",
            g.sql
        );
    }
    assert!(!rels.is_empty() || tables.is_empty(), "{label}: {}", g.sql);
    let s = schema();
    for (schema, name) in &rels {
        assert_eq!(schema, "pg_temp", "{label}: {}", g.sql);
        let t = s
            .tables
            .iter()
            .find(|t| view_name(APP, t) == *name)
            .unwrap_or_else(|| panic!("{label}: {name} is no view in {}", g.sql));
        assert!(t.materialize, "{label}");
        assert!(
            tables.contains(&t.name.as_str()),
            "{label}: {name} in {}",
            g.sql
        );
    }
    // The partition reaches the views through the session setting.
    assert!(
        !g.slots.contains(&Slot::Partition),
        "{label}: {:?}",
        g.slots
    );
    g
}

fn view(table: &str) -> String {
    let s = schema();
    view_name(APP, s.tables.iter().find(|t| t.name == table).unwrap())
}

#[test]
fn plain_queries_are_bound_and_keep_their_shape() {
    let g = assert_bound(
        full(
            "SELECT t.id, a.email FROM tasks t JOIN accounts a ON a.id = t.id WHERE t.id = ? ORDER BY t.id LIMIT ?",
            &[Value::Text("x".into()), Value::Integer(5)],
            &["tasks", "accounts"],
        ),
        &["tasks", "accounts"],
        "join",
    );
    assert_eq!(g.slots, vec![Slot::Bind(2), Slot::Bind(3)], "{}", g.sql);
    assert_eq!(
        g.sql,
        format!(
            "SELECT t.id, a.email FROM pg_temp.{} t JOIN pg_temp.{} a ON a.id = t.id \
             WHERE t.id = $1 ORDER BY t.id LIMIT $2",
            view("tasks"),
            view("accounts")
        )
    );
    assert_bound(
        full(
            "SELECT project_id, count(*) AS n, COALESCE(max(title), '') AS m, CAST(count(*) AS TEXT) AS c \
             FROM tasks GROUP BY project_id HAVING count(*) > 0 ORDER BY n DESC",
            &[],
            &["tasks"],
        ),
        &["tasks"],
        "aggregates",
    );
    assert_bound(
        full(
            "SELECT * FROM (SELECT t.id, a.email FROM tasks t JOIN accounts a ON 1 = 1 WHERE t.id = ?) AS \"_syncular_registered_query\" LIMIT ?",
            &[Value::Text("x".into()), Value::Integer(5)],
            &["tasks", "accounts"],
        ),
        &["tasks", "accounts"],
        "host wrapper",
    );
    assert_bound(
        full(
            "WITH recent AS (SELECT id, title FROM tasks WHERE title LIKE ?) \
             SELECT r.id, CAST(json_build_object('t', r.title) AS TEXT) AS j, row_number() OVER (ORDER BY r.id) AS k \
             FROM recent r WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = r.id) \
             UNION ALL SELECT 'x', NULL, 0",
            &[Value::Text("%".into())],
            &["tasks", "accounts"],
        ),
        &["tasks", "accounts"],
        "cte, window, json, union",
    );
    // No table: nothing to bind, no partition slot.
    let g = full(
        "SELECT ? AS a, CAST(? AS TEXT) AS b",
        &[Value::Integer(1), Value::Null],
        &[],
    )
    .unwrap();
    assert_eq!(g.slots, vec![Slot::Bind(0), Slot::Bind(1)]);
}

#[test]
fn syntax_the_rewrite_does_not_model_is_bound_or_refused() {
    let tasks = &["tasks"];
    // ONLY, (TABLE t), U& identifiers: PostgreSQL reads `tasks`; bound.
    assert_bound(direct("SELECT * FROM ONLY tasks", &[]), tasks, "ONLY");
    assert_bound(direct("SELECT * FROM (TABLE tasks) t", &[]), tasks, "TABLE");
    assert_bound(
        direct(r#"SELECT * FROM U&"t\0061sks""#, &[]),
        tasks,
        "U& ident",
    );
    assert_refused(
        direct(r#"SELECT * FROM U&"sync\005fcommits""#, &[]),
        "U& sync table",
    );
    // Through the rewrite too: refused early or bound.
    for sql in [
        "SELECT * FROM ONLY tasks",
        "SELECT * FROM (TABLE tasks) t",
        r#"SELECT * FROM U&"t\0061sks""#,
    ] {
        match full(sql, &[], tasks) {
            Ok(g) => {
                assert_bound(Ok(g), tasks, sql);
            }
            Err(e) => assert_refused(Err(e), sql),
        }
    }
    // E'' strings: the rewrite reads `\'` as the end of the string and the
    // rest as SQL, PostgreSQL as an escaped quote.
    assert_refused(
        full(
            r"SELECT E'\' FROM tasks x' AS a FROM sync_commits",
            &[],
            &["tasks"],
        ),
        "E string",
    );
    assert_refused(
        direct(r"SELECT E'\'' AS a FROM sync_commits", &[]),
        "E string, direct",
    );
    // Nested comments: PostgreSQL's comment runs to the second `*/`, so
    // the rewrite's replacement would sit inside it.
    assert_refused(
        full(
            "SELECT a.id FROM /* /* */ tasks */ sync_commits a",
            &[],
            &["tasks"],
        ),
        "nested comment",
    );
    assert_refused(
        direct(
            r#"SELECT a.id FROM /* /* */ (SELECT "id", "project_id", "title" FROM "tasks" WHERE "_sync_partition" = $1) AS "tasks" */ sync_commits a"#,
            &[Bind::Partition],
        ),
        "nested comment, direct",
    );
    // Array brackets are SQL Server quoting to the rewrite, subscripts to
    // PostgreSQL.
    let g = assert_bound(
        full("SELECT (ARRAY[1, 2])[1] AS a, id FROM tasks", &[], tasks),
        tasks,
        "array brackets",
    );
    assert!(g.sql.contains("ARRAY[1, 2]"), "{}", g.sql);
    // Dollar quoting hides a placeholder from PostgreSQL.
    let g = full(
        "SELECT $$?$$ AS a, ? AS b FROM tasks",
        &[Value::Null, Value::Null],
        tasks,
    );
    if let Ok(g) = g {
        assert_bound(Ok(g.clone()), tasks, "dollar quote");
        assert_eq!(g.used.iter().filter(|u| !**u).count(), 1, "{g:?}");
    }
}

#[test]
fn functions_that_reach_beyond_the_query_are_refused() {
    for sql in [
        "SELECT query_to_xml('select * from sync_commits', true, true, '')",
        "SELECT table_to_xml('sync_commits', true, true, '')",
        "SELECT set_config('search_path', 'public', false)",
        "SELECT current_setting('search_path')",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT pg_catalog.pg_read_file('/etc/passwd')",
        "SELECT pg_sleep(10)",
        "SELECT nextval('s')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT dblink('x', 'y')",
        "SELECT txid_current()",
        "SELECT public.lower('x')",
        r#"SELECT "LOWER"('x')"#,
        "SELECT 'pg_authid'::regclass",
        "SELECT CAST('1' AS regproc)",
        "SELECT current_user",
        "SELECT 1 OPERATOR(public.+) 1",
        "SELECT xmlelement(name a)",
        "SELECT f(a => 1)",
    ] {
        assert_refused(direct(sql, &[]), sql);
    }
    direct(
        "SELECT pg_catalog.lower('X'), lower('x'), 1 OPERATOR(pg_catalog.+) 2, now(), CURRENT_DATE",
        &[],
    )
    .unwrap();
}

#[test]
fn catalogs_and_internal_tables_are_refused() {
    for sql in [
        r#"SELECT * FROM "sync_commits""#,
        r#"SELECT * FROM "SYNC_COMMITS""#,
        "SELECT * FROM sync_partitions",
        "SELECT * FROM pg_catalog.pg_authid",
        "SELECT * FROM pg_authid",
        "SELECT * FROM information_schema.tables",
        "SELECT * FROM app.tasks",
        "SELECT * FROM public.tasks",
        "SELECT * FROM secrets",
        r#"SELECT * FROM "Tasks""#,
        "SELECT * FROM generate_series(1, 3) g, pg_class",
    ] {
        assert_refused(direct(sql, &[]), sql);
    }
}

#[test]
fn writes_into_and_locks_are_refused() {
    for sql in [
        "WITH d AS (DELETE FROM tasks RETURNING *) SELECT * FROM d",
        "WITH d AS (UPDATE tasks SET title = 'x' RETURNING id) SELECT id FROM d",
        "WITH d AS (INSERT INTO tasks VALUES ('a') RETURNING id) SELECT id FROM d",
        "SELECT * INTO t2 FROM tasks",
        "SELECT * FROM tasks FOR UPDATE",
        "SELECT * FROM tasks FOR SHARE",
        "DELETE FROM tasks",
        "SELECT 1; DELETE FROM tasks",
        "COPY tasks TO '/tmp/x'",
        "SET search_path = public",
    ] {
        assert_refused(direct(sql, &[]), sql);
        if let Ok(g) = full(sql, &[], &["tasks"]) {
            panic!("{sql}: accepted through the rewrite as {}", g.sql);
        }
    }
}

#[test]
fn system_and_storage_columns_are_refused() {
    for sql in [
        "SELECT ctid FROM tasks",
        "SELECT t.xmin FROM tasks t",
        "SELECT tableoid FROM tasks",
        "SELECT cmax, xmax, cmin FROM tasks",
        "SELECT _sync_partition FROM tasks",
        r#"SELECT "_sync_payload" FROM tasks"#,
        "SELECT id FROM tasks ORDER BY _sync_row_id",
    ] {
        assert_refused(direct(sql, &[]), sql);
    }
}

#[test]
fn cte_names_resolve_only_in_scope() {
    for sql in [
        // x is defined inside the subquery only.
        "SELECT * FROM (WITH x AS (SELECT 1 AS a) SELECT * FROM x) s, x",
        // A non-recursive CTE does not see itself or later ones.
        "WITH x AS (SELECT * FROM x) SELECT * FROM x",
        "WITH x AS (SELECT * FROM y), y AS (SELECT 1 AS a) SELECT * FROM x",
        // Reserved names.
        "WITH pg_x AS (SELECT 1) SELECT * FROM pg_x",
        "WITH sync_commits AS (SELECT 1) SELECT * FROM sync_commits",
        "WITH _sync_x AS (SELECT 1) SELECT * FROM _sync_x",
        "WITH tasks AS (SELECT 1 AS id) SELECT * FROM tasks",
        "WITH TASKS AS (SELECT 1 AS id) SELECT * FROM tasks",
        "WITH x AS MATERIALIZED (SELECT 1) SELECT * FROM x, sync_commits",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SEARCH DEPTH FIRST BY n SET o SELECT * FROM r",
    ] {
        assert_refused(direct(sql, &[]), sql);
    }
    direct(
        "WITH x AS (SELECT 1 AS a), y AS (SELECT a FROM x) SELECT * FROM y, (SELECT * FROM x) s",
        &[],
    )
    .unwrap();
    direct(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
        &[],
    )
    .unwrap();
}

#[test]
fn the_partition_filter_cannot_be_forged() {
    let canonical_user =
        "SELECT * FROM (SELECT id, project_id, title FROM app.tasks WHERE _sync_partition = $1) t";
    assert_refused(
        direct(canonical_user, &[Bind::Param(0)]),
        "qualified, user parameter",
    );
    let rewrite_shape = r#"SELECT * FROM (SELECT "id", "project_id", "title" FROM "tasks" WHERE "_sync_partition" = $1) t"#;
    assert_refused(
        direct(rewrite_shape, &[Bind::Param(0)]),
        "rewrite shape, user parameter",
    );
    // The rewrite's own shape with its partition bind is rebound.
    assert_bound(
        direct(rewrite_shape, &[Bind::Partition]),
        &["tasks"],
        "rewrite shape",
    );
    // A partial projection of the rewrite's shape is not the shape.
    assert_refused(
        direct(
            r#"SELECT * FROM (SELECT "id" FROM "tasks" WHERE "_sync_partition" = $1) t"#,
            &[Bind::Partition],
        ),
        "partial projection",
    );
    // Parameters beyond the binds.
    assert_refused(direct("SELECT $2", &[Bind::Param(0)]), "unbound parameter");
    assert_refused(direct("SELECT $0", &[]), "parameter zero");
}

#[test]
fn the_cache_returns_the_same_result_for_the_same_text() {
    let s = schema();
    let scope = Scope {
        schema: APP,
        tables: &s.tables,
    };
    let owner: Arc<dyn std::any::Any + Send + Sync> = Arc::new(1u8);
    let cache = Mutex::new(Cache::default());
    let sql = "SELECT id FROM tasks WHERE id = $1";
    let a = cached(&cache, owner.clone(), sql, &[Bind::Param(0)], &scope).unwrap();
    let b = cached(&cache, owner.clone(), sql, &[Bind::Param(0)], &scope).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Another bind pattern is another entry.
    let c = cached(&cache, owner.clone(), sql, &[Bind::Partition], &scope).unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    // Another loaded schema empties it.
    let other: Arc<dyn std::any::Any + Send + Sync> = Arc::new(2u8);
    let d = cached(&cache, other, sql, &[Bind::Param(0)], &scope).unwrap();
    assert!(!Arc::ptr_eq(&a, &d));
}

#[test]
fn tables_are_read_through_security_barrier_views_only() {
    let s = schema();
    let ddl = view_ddl(APP, &s.tables);
    // One view per materialized table, each a security barrier filtered by
    // the session setting; none for a table that is not materialized.
    assert_eq!(
        ddl.matches("CREATE OR REPLACE TEMP VIEW").count(),
        2,
        "{ddl}"
    );
    assert_eq!(
        ddl.matches("WITH (security_barrier = true)").count(),
        2,
        "{ddl}"
    );
    assert_eq!(
        ddl.matches(r#"WHERE "_sync_partition" OPERATOR(pg_catalog.=) pg_catalog.current_setting('syncular.partition', true)"#)
            .count(),
        2,
        "{ddl}"
    );
    assert!(!ddl.contains("secrets"), "{ddl}");
    // Split by PostgreSQL's own scanner: a function body holds `;` too.
    let stmts = pg_query::split_with_parser(&ddl).unwrap_or_else(|e| panic!("{ddl}: {e}"));
    for stmt in stmts.iter().filter(|x| !x.trim().is_empty()) {
        pg_query::parse(stmt, 0).unwrap_or_else(|e| panic!("{stmt}: {e}"));
    }
    // The views may be named by the query too (they are what it reads
    // anyway); nothing else in pg_temp or any schema may.
    let tasks = view("tasks");
    assert_bound(
        direct(&format!("SELECT id FROM pg_temp.{tasks}"), &[]),
        &["tasks"],
        "the view itself",
    );
    for sql in [
        "SELECT * FROM pg_temp.other".to_owned(),
        format!("SELECT * FROM app.{tasks}"),
        format!("SELECT * FROM pg_catalog.{tasks}"),
        format!("SELECT * FROM x.pg_temp.{tasks}"),
        "SELECT * FROM pg_temp._syncular_q_secrets_0000000000000000".to_owned(),
        "SELECT current_setting('syncular.partition') AS p".to_owned(),
        "SELECT set_config('syncular.partition', 'other', true) AS p".to_owned(),
        "SELECT pg_catalog.set_config('syncular.partition', 'other', false) AS p".to_owned(),
    ] {
        assert_refused(direct(&sql, &[]), &sql);
    }
}

#[test]
fn view_names_fit_identifiers_and_differ_by_schema_and_shape() {
    let s = schema();
    let tasks = &s.tables[0];
    assert!(view_name(APP, tasks).starts_with("_syncular_q_tasks_"));
    assert_ne!(view_name(APP, tasks), view_name("other", tasks));
    let mut long = tasks.clone();
    long.name = "t".repeat(63);
    let n = view_name(APP, &long);
    assert!(n.len() <= 63, "{n}");
    let mut wider = tasks.clone();
    wider.columns.pop();
    assert_ne!(view_name(APP, &wider), view_name(APP, tasks));
}

#[test]
#[ignore = "timing, run by hand with --nocapture"]
fn guard_time_of_long_chains() {
    for n in [1_000usize, 5_000, 20_000] {
        let chain = vec!["id = '1'"; n].join(" OR ");
        let sql = format!("SELECT id FROM tasks WHERE {chain}");
        let sch = schema();
        let t = std::time::Instant::now();
        let p = query::prepare(
            &Request::Legacy { sql: sql.clone() },
            &[],
            &["tasks".to_string()],
            &sch,
        );
        eprintln!(
            "  rewrite {:?} in {:?}",
            p.as_ref().map(|_| "ok").map_err(code),
            t.elapsed()
        );
        let t = std::time::Instant::now();
        let _ = pg_query::parse(&sql, 0);
        eprintln!("  pg_query parse in {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let r = full(&sql, &[], &["tasks"]);
        eprintln!(
            "{n} terms, {} bytes: {:?} in {:?}",
            sql.len(),
            r.as_ref().map(|_| "ok").map_err(code),
            t.elapsed()
        );
        let sum = vec!["1"; n].join(" + ");
        let sql = format!("SELECT {sum} AS s");
        let t = std::time::Instant::now();
        let r = full(&sql, &[], &[]);
        eprintln!(
            "{n}-term sum, {} bytes: {:?} in {:?}",
            sql.len(),
            r.as_ref().map(|_| "ok").map_err(code),
            t.elapsed()
        );
    }
}

#[test]
fn argument_sized_functions_take_bounded_literal_sizes() {
    for sql in [
        "SELECT lpad('x', 10000), rpad('x', 0, '-'), repeat('ab', 10000), repeat('x', -1)",
        "SELECT pg_catalog.lpad('x', 5)",
        "SELECT format('%s %5s %-10000s %1$s %2$-3s %%', 1, 2, 3)",
        "SELECT format('no specifiers')",
    ] {
        direct(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
    for (sql, binds) in [
        ("SELECT lpad('x', 10001)", &[][..]),
        ("SELECT rpad('x', 200000000)", &[]),
        ("SELECT repeat('x', $1)", &[Bind::Param(0)]),
        ("SELECT repeat('x', 5 + 5)", &[]),
        ("SELECT repeat('x', 5::int)", &[]),
        ("SELECT repeat('x', 1e9)", &[]),
        ("SELECT pg_catalog.rpad('x', 99999999999)", &[]),
        ("SELECT format('%10001s', 'x')", &[]),
        ("SELECT format('%-200000000s', 'x')", &[]),
        ("SELECT format('%99999999999999999999s', 'x')", &[]),
        ("SELECT format('%*s', 5, 'x')", &[]),
        ("SELECT format('%1$*2$s', 'x', 5)", &[]),
        ("SELECT format('%-*s', 5, 'x')", &[]),
        ("SELECT format($1, 'x')", &[Bind::Param(0)]),
        ("SELECT format(lower('%s'), 'x')", &[]),
    ] {
        assert_refused(direct(sql, binds), sql);
    }
    assert_refused(
        full("SELECT lpad(title, 100000) FROM tasks", &[], &["tasks"]),
        "column text, huge size",
    );
}

#[test]
fn the_guard_reads_bounded_text_only() {
    let chain = vec!["id = '1'"; 20_000].join(" OR ");
    let sql = format!("SELECT id FROM tasks WHERE {chain}");
    assert!(sql.len() > MAX_GUARDED_BYTES);
    let t = std::time::Instant::now();
    let e = direct(&sql, &[]).unwrap_err();
    assert_eq!(code(&e), query::REFUSED, "{e:?}");
    // Refused before PostgreSQL's parser runs (a second for this text).
    assert!(
        t.elapsed() < std::time::Duration::from_millis(50),
        "{:?}",
        t.elapsed()
    );
    // Just under the bound, still guarded.
    let n = (MAX_GUARDED_BYTES - 40) / "id = '1' OR ".len();
    let sql = format!(
        "SELECT id FROM tasks WHERE {}",
        vec!["id = '1'"; n].join(" OR ")
    );
    assert!(sql.len() <= MAX_GUARDED_BYTES);
    direct(&sql, &[]).unwrap();
}

#[test]
fn a_pooled_query_makes_only_the_views_and_wrappers_it_uses() {
    let s = schema();
    let plain = direct("SELECT id FROM tasks WHERE title = 'x'", &[]).unwrap();
    let ddl = view_ddl_for(APP, &s.tables, &plain.sql);
    assert!(ddl.contains(&view("tasks")), "{ddl}");
    assert!(!ddl.contains(&view("accounts")), "{ddl}");
    assert!(
        !ddl.contains("_syncular_q_fits("),
        "no wrapper called: {ddl}"
    );
    let bounded = direct(
        "SELECT a.id FROM tasks t JOIN accounts a ON strpos(a.email, t.title) > 0",
        &[],
    )
    .unwrap();
    let ddl = view_ddl_for(APP, &s.tables, &bounded.sql);
    assert!(
        ddl.contains(&view("tasks")) && ddl.contains(&view("accounts")),
        "{ddl}"
    );
    assert!(
        ddl.contains("_syncular_q_strpos(") && ddl.contains("_syncular_q_fits("),
        "{ddl}"
    );
    assert!(ddl.contains("_syncular_q_refuse("), "{ddl}");
    assert!(
        !ddl.contains("_syncular_q_like("),
        "only the wrappers called: {ddl}"
    );
    // Everything the full DDL makes for the query is in the smaller one.
    assert!(view_ddl(APP, &s.tables).len() > ddl.len());
}

#[test]
fn values_built_from_literals_go_through_their_cost_wrappers() {
    // Review 5: 60 bytes of SQL that kept a backend busy for 7 s.
    let g = direct(
        "SELECT length(normalize(repeat(repeat('é', 10000), 10000), NFD))",
        &[],
    )
    .unwrap();
    for wrapper in ["_syncular_q_normalize(", "_syncular_q_repeat("] {
        assert!(g.sql.contains(wrapper), "{wrapper} in {}", g.sql);
    }
    let g = direct("SELECT upper(lower(initcap('x')))", &[]).unwrap();
    for wrapper in [
        "_syncular_q_upper(",
        "_syncular_q_lower(",
        "_syncular_q_initcap(",
    ] {
        assert!(g.sql.contains(wrapper), "{wrapper} in {}", g.sql);
    }
    assert!(view_ddl(APP, &schema().tables).contains("_syncular_q_normalize(text, text, bigint)"));
}

#[test]
fn array_and_row_constructors_are_checked_outermost_and_rows_compared_as_rows() {
    let tasks = &["tasks"];
    let sql = |q: &str| full(q, &[], tasks).map(|g| g.sql);
    let cap = "pg_temp._syncular_q_cap(";
    // The outermost constructor is checked once; inner brackets stay its
    // direct children.
    let g = sql("SELECT ARRAY[[id, owner_id], [title, id]] AS a FROM tasks").unwrap();
    assert_eq!(g.matches(cap).count(), 1, "{g}");
    assert!(
        g.contains("cap(ARRAY[ARRAY[id, owner_id], ARRAY[title, id]], "),
        "{g}"
    );
    // Literals and parameters only: not checked.
    let g = sql("SELECT ARRAY[1, 2] AS a, (1, 'x') AS b, CAST(ARRAY[] AS int[]) AS c FROM tasks")
        .unwrap();
    assert!(!g.contains(cap), "{g}");
    // A row read as a value is checked; compared or grouped as a row, not.
    let g = sql("SELECT ROW(id, 1) AS r, (id, title) AS s FROM tasks").unwrap();
    assert_eq!(g.matches(cap).count(), 2, "{g}");
    for q in [
        "SELECT id FROM tasks WHERE (id, title) < (owner_id, title)",
        "SELECT id FROM tasks WHERE (id, title) IN ((owner_id, title), ('a', 'b'))",
        "SELECT id FROM tasks WHERE (id, title) IN (SELECT id, title FROM tasks)",
        "SELECT owner_id FROM tasks GROUP BY (owner_id, project_id)",
        "SELECT owner_id FROM tasks GROUP BY GROUPING SETS ((owner_id, project_id), ())",
    ] {
        let g = sql(q).unwrap();
        assert!(!g.contains(cap), "{q}: {g}");
    }
    // An array of rows cannot pass the check (PostgreSQL's SQL functions
    // return no record[]): refused.
    let e = sql("SELECT ARRAY[ROW(1, id)] AS a FROM tasks").unwrap_err();
    assert!(e.to_string().contains("array of rows"), "{e}");
}
