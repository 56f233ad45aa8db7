//! Tests of registered queries on SQLite: the engine's own refusals, the
//! partition views, the rewrite cache and placement, and the limits (steps,
//! time, value sizes) a run stops at.

use super::*;
use crate::core::schema::Schema;
use crate::sqlite::rewrites::{Placement, RewriteCache};

fn setup() -> (Connection, Loaded) {
    let mut conn = Connection::open_in_memory().unwrap();
    isolation::register(&mut conn).unwrap();
    conn.execute_batch(
        r#"CREATE TABLE tasks("_sync_partition" TEXT, "_sync_row_id" TEXT, id TEXT, title TEXT, "_sync_payload" BLOB);
               CREATE INDEX tasks_p ON tasks("_sync_partition", id);
               INSERT INTO tasks VALUES ('p1', 'r1', 'r1', 'mine', x'00'), ('p2', 'r2', 'r2', 'theirs', x'00');
               CREATE TABLE sync_commits(partition TEXT, commit_seq INTEGER);"#,
    )
    .unwrap();
    let schema = Schema::parse(
        r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},
               {"name":"title","type":"string","nullable":false}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#,
    )
    .unwrap();
    (conn, Loaded::new(schema, super::rows::TableSql::numbered()))
}

fn view(loaded: &Loaded) -> String {
    format!(
        "temp.{}",
        quote_ident(&query::view_name(&loaded.schema.tables[0]))
    )
}

/// Runs SQL as the engine would after a rewrite, including SQL the
/// rewrite would never produce (as if it had a hole).
fn raw_as(
    conn: &Connection, loaded: &Loaded, sql: &str, partition: &str,
) -> Result<Vec<Vec<SqlValue>>> {
    let prepared = Prepared {
        sql: sql.into(),
        binds: vec![],
        tables: vec!["tasks".into()],
    };
    let closed = Arc::new(AtomicBool::new(false));
    let bounds = Bounds::new(loaded, &prepared, Duration::from_secs(5), &closed);
    execute(conn, &bounds, &prepared, &[], partition).map(|(_, rows)| rows)
}

fn raw(conn: &Connection, loaded: &Loaded, sql: &str) -> Result<Vec<Vec<SqlValue>>> {
    raw_as(conn, loaded, sql, "p1")
}

fn code(r: Result<Vec<Vec<SqlValue>>>) -> String {
    match r {
        Err(Error::Plain { code, .. }) => code.to_owned(),
        Err(e) => format!("{e:?}"),
        Ok(rows) => format!("answered {rows:?}"),
    }
}

/// A statement with no binds and no declared tables.
fn unbound(sql: &str) -> Prepared {
    Prepared {
        sql: sql.into(),
        binds: vec![],
        tables: vec![],
    }
}

#[test]
fn the_engine_refuses_what_the_rewrite_must_never_produce() {
    let (conn, loaded) = setup();
    for sql in [
        "SELECT * FROM sync_commits",
        "SELECT name FROM sqlite_master",
        "SELECT name FROM temp.sqlite_master",
        "SELECT id FROM tasks",
        "SELECT id FROM main.tasks",
        "SELECT t.title FROM tasks AS window, tasks AS t",
        "SELECT \"_sync_payload\" FROM tasks",
        "DELETE FROM tasks",
        "PRAGMA user_version = 3",
        "SELECT * FROM pragma_table_info('tasks')",
        "SELECT load_extension('x')",
        "SELECT zeroblob(1000000000)",
        "ATTACH ':memory:' AS o",
        "CREATE TEMP VIEW v AS SELECT 1",
        "DROP VIEW IF EXISTS temp.x",
    ] {
        assert_eq!(code(raw(&conn, &loaded, sql)), query::REFUSED, "{sql}");
    }
    assert_eq!(
        code(raw(&conn, &loaded, "SELECT 1; SELECT 2")),
        query::REFUSED
    );
    // Named and numbered variables are refused even when counted right.
    for sql in [
        "SELECT :a",
        "SELECT #a",
        "SELECT @a",
        "SELECT $a",
        "SELECT ?1",
    ] {
        let prepared = Prepared {
            sql: sql.into(),
            binds: vec![Bind::Partition],
            tables: vec![],
        };
        let closed = Arc::new(AtomicBool::new(false));
        let bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(5), &closed);
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(code(r), query::PLAN_ERROR, "{sql}");
    }
    // Nothing was written, and the bounds are gone afterwards.
    let n: i64 = conn
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
    conn.execute_batch("DELETE FROM sync_commits").unwrap();
}

#[test]
fn views_show_one_partition_whatever_the_aliases() {
    let (conn, loaded) = setup();
    let v = view(&loaded);
    let rows = raw(
        &conn,
        &loaded,
        &format!("SELECT a.title FROM {v} AS window, {v} AS a"),
    )
    .unwrap();
    assert_eq!(rows, vec![vec![SqlValue::Text("mine".into())]]);
    let rows = raw_as(
        &conn,
        &loaded,
        &format!("SELECT title FROM {v} WHERE id > ?",),
        "p2",
    );
    assert!(rows.is_err(), "unbound variable counted");
    // The same cached statement, run for another partition.
    let rows = raw_as(&conn, &loaded, &format!("SELECT title FROM {v}"), "p2").unwrap();
    assert_eq!(rows, vec![vec![SqlValue::Text("theirs".into())]]);
    let rows = raw_as(&conn, &loaded, &format!("SELECT title FROM {v}"), "p1").unwrap();
    assert_eq!(rows, vec![vec![SqlValue::Text("mine".into())]]);
    // Outside a query the views are empty.
    let n: i64 = conn
        .query_row(&format!("SELECT count(*) FROM {v}"), [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    // The partition index serves the view.
    let plan: String = conn
        .query_row(
            &format!("EXPLAIN QUERY PLAN SELECT title FROM {v} WHERE id = 'r1'"),
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("USING INDEX tasks_p"), "{plan}");
}

/// The authorizer stays installed, so running a registered query
/// recompiles neither it nor the connection's other cached statements,
/// and a denied query refused once stays refused when served from the
/// cache.
#[test]
fn registered_queries_leave_cached_statements_compiled() {
    use rusqlite::StatementStatus::RePrepare;
    let (conn, loaded) = setup();
    let own = "SELECT count(*) FROM sync_commits WHERE partition = ?1";
    let v = view(&loaded);
    let sql = format!("SELECT title FROM {v}");
    // The first run makes the view: a schema change, after which SQLite
    // recompiles what was cached before, once.
    raw(&conn, &loaded, &sql).unwrap();
    for partition in ["p1", "p2", "p1"] {
        conn.prepare_cached(own)
            .unwrap()
            .query_row(["p1"], |r| r.get::<_, i64>(0))
            .unwrap();
        raw_as(&conn, &loaded, &sql, partition).unwrap();
        assert_eq!(
            code(raw(&conn, &loaded, "SELECT * FROM sync_commits")),
            query::REFUSED
        );
    }
    let reprepared = |text: &str| conn.prepare_cached(text).unwrap().get_status(RePrepare);
    assert_eq!(reprepared(own), 0);
    assert_eq!(reprepared(&format!("{}{sql}", isolation::MARK)), 0);
    // Outside a registered query the storage's own statements may read
    // its tables; the same text as a registered query may not.
    assert!(conn.prepare("SELECT * FROM sync_commits").is_ok());
    assert_eq!(
        code(raw(&conn, &loaded, "SELECT * FROM sync_commits")),
        query::REFUSED
    );
}

#[test]
fn rewrites_are_reused_per_text_and_schema() {
    let (_, loaded) = setup();
    let loaded = Arc::new(loaded);
    let cache = RewriteCache::default();
    let req = Request::Legacy {
        sql: "SELECT title FROM tasks WHERE id = ?".into(),
    };
    let declared = vec!["tasks".to_owned()];
    let one = [Value::Text("r1".into())];
    let a = cache.prepare(&loaded, &req, &one, &declared).unwrap();
    let b = cache.prepare(&loaded, &req, &one, &declared).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert!(a.prepared.sql.starts_with(isolation::MARK));
    // A hit still checks that every bind has a value, as the rewrite does.
    for params in [&[][..], &[Value::Undefined][..]] {
        let e = cache.prepare(&loaded, &req, params, &declared).unwrap_err();
        assert_eq!(code(Err(e)), query::PLAN_ERROR);
    }
    // Other declared tables, other text: their own rewrite (or error).
    assert!(cache.prepare(&loaded, &req, &one, &[]).is_err());
    let other = Request::Legacy {
        sql: "SELECT title FROM tasks WHERE id = ? ".into(),
    };
    let c = cache.prepare(&loaded, &other, &one, &declared).unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    // A new schema starts over.
    let (_, again) = setup();
    let d = cache
        .prepare(&Arc::new(again), &req, &one, &declared)
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &d));
    assert_eq!(a.prepared.sql, d.prepared.sql);
}

#[test]
fn a_query_over_budget_leaves_the_calling_thread_for_doubling_stretches() {
    let p = Placement::default();
    assert!(p.try_now());
    // Calls sent off-thread before the next try, for each miss in a row.
    let mut stretches = Vec::new();
    for _ in 0..8 {
        p.over_budget();
        let mut off = 0;
        while !p.try_now() {
            off += 1;
        }
        stretches.push(off);
    }
    assert_eq!(stretches, [2, 4, 8, 16, 32, 64, 64, 64]);
    // One run that fits: tried on every call again, and the next miss
    // starts the count over.
    p.within_budget();
    assert!(p.try_now() && p.try_now());
    p.over_budget();
    assert!(!p.try_now() && !p.try_now() && p.try_now());
}

#[test]
fn a_budgeted_run_stops_at_its_step_budget() {
    let (conn, loaded) = setup();
    let prepared = unbound("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000) SELECT count(*) FROM r");
    let closed = Arc::new(AtomicBool::new(false));
    let mut bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(60), &closed);
    bounds.budget = Some(2);
    let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
    assert_eq!(code(r), super::super::budget::OVER_BUDGET);
    // A small query fits; without a budget the big one runs to the end.
    let small = format!("SELECT title FROM {}", view(&loaded));
    let rows = raw(&conn, &loaded, &small).unwrap();
    assert_eq!(rows.len(), 1);
    bounds.budget = None;
    let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
    assert_eq!(r.unwrap(), vec![vec![SqlValue::Integer(100000)]]);
}

#[test]
fn a_runaway_query_stops_at_its_limit_or_when_the_storage_closes() {
    let (conn, loaded) = setup();
    let prepared = unbound(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    );
    let closed = Arc::new(AtomicBool::new(false));
    let bounds = Bounds::new(&loaded, &prepared, Duration::from_millis(50), &closed);
    let t = std::time::Instant::now();
    let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
    assert_eq!(code(r), query::TIMEOUT);
    assert!(t.elapsed() < Duration::from_secs(5));
    closed.store(true, std::sync::atomic::Ordering::Relaxed);
    let bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(60), &closed);
    let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
    assert_eq!(code(r), "ERR_SYNCULAR_CLOSED");
}

#[test]
fn a_column_free_read_names_only_a_view_or_the_query_s_own_cte() {
    let (conn, loaded) = setup();
    conn.execute_batch(
        "CREATE TABLE host_secrets(x); INSERT INTO host_secrets VALUES (1), (2), (3);
             CREATE VIEW host_view AS SELECT x FROM host_secrets;",
    )
    .unwrap();
    let v = view(&loaded);
    for sql in [
        "SELECT count(*) FROM sync_commits".to_owned(),
        "SELECT 1 FROM sqlite_master".into(),
        "SELECT count(*) FROM sqlite_schema".into(),
        "SELECT count(*) FROM sqlite_temp_master".into(),
        "SELECT count(*) FROM tasks".into(),
        "SELECT count(*) FROM TASKS".into(),
        "SELECT count(*) FROM host_secrets".into(),
        "SELECT count(*) FROM host_view".into(),
        "SELECT count(*) FROM pragma_table_list".into(),
        "SELECT count(*) FROM dbstat".into(),
        "SELECT EXISTS (SELECT 1 FROM host_secrets)".into(),
        format!("SELECT count(*) FROM {v} AS x, tasks"),
        format!("SELECT x.title FROM {v} AS x, sync_commits"),
        // A CTE in one scope does not cover the same name in another.
        "SELECT (WITH host_secrets AS (SELECT 1) SELECT 1), (SELECT count(*) FROM host_secrets)"
            .into(),
        // A CTE named like a table is refused too (SQLite cannot tell).
        "WITH host_secrets AS (SELECT 1) SELECT count(*) FROM host_secrets".into(),
    ] {
        assert_eq!(code(raw(&conn, &loaded, &sql)), query::REFUSED, "{sql}");
    }
    let one = |sql: String| raw(&conn, &loaded, &sql).unwrap();
    assert_eq!(
        one(format!("SELECT count(*) FROM {v}")),
        vec![vec![SqlValue::Integer(1)]]
    );
    assert_eq!(
        one(format!(
            "WITH c AS (SELECT id FROM {v}) SELECT count(*) FROM c"
        )),
        vec![vec![SqlValue::Integer(1)]]
    );
    assert_eq!(
        one("SELECT count(*) FROM json_each('[1,2]')".into()),
        vec![vec![SqlValue::Integer(2)]]
    );
    assert_eq!(
        one("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT count(*) FROM r".into()),
        vec![vec![SqlValue::Integer(3)]]
    );
    // A refused text is not left compiled for a later run to skip the
    // check: the same text is refused every time.
    for _ in 0..3 {
        assert_eq!(
            code(raw(&conn, &loaded, "SELECT count(*) FROM host_secrets")),
            query::REFUSED
        );
    }
    // After a table of a CTE's name appears, a cached statement that
    // reads the CTE without a column answers from the CTE (SQLite kept
    // its program) or is refused (SQLite compiled it again, and the
    // check ran again): never from the table.
    for sql in [
        "WITH late AS (SELECT 1) SELECT (SELECT count(*) FROM late) AS n".to_owned(),
        format!("WITH late AS (SELECT 1) SELECT (SELECT count(*) FROM late), (SELECT count(*) FROM {v})"),
    ] {
        let before = raw(&conn, &loaded, &sql).unwrap();
        assert_eq!(before[0][0], SqlValue::Integer(1), "{sql}");
        conn.execute_batch("CREATE TABLE late(x); INSERT INTO late VALUES (1), (2);")
            .unwrap();
        match raw(&conn, &loaded, &sql) {
            Ok(after) => assert_eq!(after, before, "{sql}"),
            Err(e) => assert_eq!(code(Err(e)), query::REFUSED, "{sql}"),
        }
        conn.execute_batch("DROP TABLE late").unwrap();
    }
}

#[test]
fn one_instruction_is_bounded_by_the_value_limit() {
    let (conn, loaded) = setup();
    let t = std::time::Instant::now();
    // Past the value limit (under 1 MiB, less for a longer program):
    // not built, and the query fails naming the bound; printf too,
    // where SQLite's own answers NULL.
    for sql in [
        "SELECT printf('%.*c', 2000000000, 'x')",
        "SELECT printf('%2000000000d', 1)",
        "SELECT length(printf('%.*c', 1048577, 'x'))",
        "SELECT length(printf('%.*c', 1000000, 'x'))",
        "SELECT length(printf('%.*c', 300000, 'x') || printf('%.*c', 300000, 'x'))",
        "SELECT length(replace(printf('%.*c', 300000, 'x'), 'x', 'xx'))",
        "SELECT length(group_concat(printf('%.*c', 200000, 'x'))) FROM json_each('[1,2,3]')",
    ] {
        let r = raw(&conn, &loaded, sql);
        assert_eq!(code(r), query::result::TOO_LARGE, "{sql}");
    }
    // A query with many operators between two loops may hold smaller
    // values: 200 KB fits one, not one with 150 additions.
    let many: Vec<String> = (0..150).map(|i| format!("v + {i}")).collect();
    let wide = |n: usize| {
        format!(
            "WITH m AS MATERIALIZED (SELECT printf('%.*c', {n}, '7') AS v) SELECT {} FROM m",
            many.join(", ")
        )
    };
    assert_eq!(
        code(raw(&conn, &loaded, &wide(200_000))),
        query::result::TOO_LARGE
    );
    assert_eq!(raw(&conn, &loaded, &wide(50_000)).unwrap()[0].len(), 150);
    // Quadratic built-ins run in linear time.
    let rows = raw(
        &conn,
        &loaded,
        "SELECT instr(printf('%.*c', 400000, 'a'), printf('%.*c', 200000, 'a') || 'b')",
    )
    .unwrap();
    assert_eq!(rows, vec![vec![SqlValue::Integer(0)]]);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The storage's own statements keep the connection's limits.
    let n: i64 = conn
        .query_row("SELECT length(printf('%.*c', 2000000, 'x'))", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 2_000_000);
}

#[test]
fn a_run_on_the_calling_thread_hands_over_long_steps() {
    let (conn, loaded) = setup();
    let closed = Arc::new(AtomicBool::new(false));
    for sql in [
        // Few VM steps, each one slow: the thread's time budget.
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 2000) SELECT count(*) FROM r WHERE instr(printf('%.*c', 60000 + n % 2, 'a'), 'b') = 0",
    ] {
        let prepared = unbound(sql);
        let mut bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(60), &closed);
        bounds.budget = Some(1000);
        let t = std::time::Instant::now();
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(code(r), super::super::budget::OVER_BUDGET, "{sql}");
        assert!(t.elapsed() < Duration::from_millis(200), "{sql}: {:?}", t.elapsed());
        bounds.budget = None;
        assert!(execute(&conn, &bounds, &prepared, &[], "p1").is_ok(), "{sql}");
    }
}

#[test]
fn slow_instructions_stop_near_the_limit() {
    let (conn, loaded) = setup();
    let prepared = unbound("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r WHERE instr(printf('%.*c', 400000, 'a'), printf('%.*c', 1000, 'a') || 'b') = 0");
    let closed = Arc::new(AtomicBool::new(false));
    let bounds = Bounds::new(&loaded, &prepared, Duration::from_millis(200), &closed);
    let t = std::time::Instant::now();
    let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
    assert_eq!(code(r), query::TIMEOUT);
    // Generous for a loaded machine; typically within a few ms.
    assert!(
        t.elapsed() < Duration::from_millis(1200),
        "{:?}",
        t.elapsed()
    );
}
