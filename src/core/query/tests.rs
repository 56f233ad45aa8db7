use super::lex::{tokenize, Kind};
use super::*;
use crate::core::error::Error;
use crate::core::schema::Schema;

fn schema() -> Schema {
    Schema::parse(
        r#"{"version":1,"tables":[
          {"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},
             {"name":"project_id","type":"string","nullable":false},
             {"name":"title","type":"string","nullable":false}],
           "primaryKeyIndex":0,"materialize":true,"indexes":[]},
          {"name":"Notes","columns":[{"name":"id","type":"string","nullable":false},
             {"name":"body","type":"string","nullable":true}],
           "primaryKeyIndex":0,"materialize":true,"indexes":[]},
          {"name":"secrets","columns":[{"name":"id","type":"string","nullable":false}],
           "primaryKeyIndex":0,"materialize":false,"indexes":[]}]}"#,
    )
    .unwrap()
}

const TASKS: &str =
    r#"(SELECT "id", "project_id", "title" FROM "tasks" WHERE "_sync_partition" = ?)"#;

fn s(v: &str) -> Value {
    Value::Text(v.into())
}

fn legacy(sql: &str, params: &[Value], tables: &[&str]) -> crate::Result<Prepared> {
    let declared: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    prepare(
        &Request::Legacy { sql: sql.into() },
        params,
        &declared,
        &schema(),
    )
}

fn rel(table: &str, start: usize, end: usize, alias: Option<&str>) -> Relation {
    Relation {
        table: table.into(),
        start: start as f64,
        end: end as f64,
        alias: alias.map(str::to_owned),
    }
}

fn plan(
    sql: &str, relations: Vec<Relation>, params: &[Value], tables: &[&str],
) -> crate::Result<Prepared> {
    let declared: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    prepare(
        &Request::Plan {
            sql: sql.into(),
            relations,
        },
        params,
        &declared,
        &schema(),
    )
}

/// A plan whose relations are every occurrence of `needle` (UTF-16 offsets).
fn plan_at(sql: &str, table: &str, needle: &str) -> Vec<Relation> {
    let mut out = Vec::new();
    for (b, _) in sql.match_indices(needle) {
        let start = sql[..b].encode_utf16().count();
        let end = start + needle.encode_utf16().count();
        out.push(rel(table, start, end, None));
    }
    out
}

fn message(e: Error) -> (&'static str, String) {
    match e {
        Error::Plain { code, message } => (code, message),
        other => panic!("expected a plain error, got {other:?}"),
    }
}

fn refused(r: crate::Result<Prepared>) -> String {
    let (code, msg) = message(r.expect_err("expected a refusal"));
    assert_eq!(code, REFUSED, "{msg}");
    msg
}

fn plan_error(r: crate::Result<Prepared>) -> String {
    let (code, msg) = message(r.expect_err("expected a plan error"));
    assert_eq!(code, PLAN_ERROR, "{msg}");
    msg
}

// ---- tokenizer ---------------------------------------------------------------

#[test]
fn tokenizer_keeps_protected_regions_whole() {
    let sql = "SELECT 'a''b;', \"x\"\"y\", `q``r`, [s t] -- c ; FROM\n/* ; ? */ ?12 :n";
    let toks = tokenize(sql);
    let kinds: Vec<Kind> = toks.iter().map(|t| t.kind).collect();
    assert_eq!(
        kinds,
        vec![
            Kind::Word,
            Kind::Str,
            Kind::Punct,
            Kind::DoubleQuoted,
            Kind::Punct,
            Kind::Backtick,
            Kind::Punct,
            Kind::Bracket,
            Kind::Param,
            Kind::NamedParam
        ]
    );
    assert_eq!(toks[1].name(sql).unwrap(), "a'b;");
    assert_eq!(toks[3].name(sql).unwrap(), "x\"y");
    assert_eq!(toks[5].name(sql).unwrap(), "q`r");
    assert_eq!(toks[7].name(sql).unwrap(), "s t");
    assert_eq!(toks[8].text(sql), "?12");
}

#[test]
fn tokenizer_handles_unterminated_and_non_ascii() {
    let toks = tokenize("SELECT 'abc");
    assert_eq!(toks[1].kind, Kind::Str);
    assert_eq!(toks[1].end, 11);
    let sql = "SELECT é1, 1.5e-3 FROM tâches";
    let toks = tokenize(sql);
    assert_eq!(toks[1].text(sql), "é1");
    assert_eq!(toks[3].text(sql), "1.5e-3");
    assert_eq!(toks[5].text(sql), "tâches");
}

// ---- legacy form ---------------------------------------------------------------

#[test]
fn legacy_rewrites_and_expands_numbered_binds() {
    let p = legacy(
        "SELECT '?; FROM tasks' AS marker, id FROM tasks /* ? FROM tasks */ WHERE project_id=?1 OR project_id=?1 -- ?\n",
        &[s("p1")],
        &["tasks"],
    )
    .unwrap();
    assert!(
        p.sql
            .contains(&format!("FROM {TASKS} AS \"tasks\" /* ? FROM tasks */")),
        "{}",
        p.sql
    );
    assert!(p.sql.starts_with("SELECT '?; FROM tasks' AS marker"));
    assert!(p.sql.ends_with("project_id=? OR project_id=? -- ?\n"));
    assert_eq!(
        p.binds,
        vec![Bind::Partition, Bind::Param(0), Bind::Param(0)]
    );
}

#[test]
fn legacy_binds_mix_numbered_and_bare_in_textual_order() {
    let p = legacy(
        "SELECT * FROM (SELECT id FROM tasks t WHERE title = ?2 AND id = ? JOIN Notes ON 1) AS \"_syncular_registered_query\" LIMIT ?",
        &[s("a"), s("b"), s("c"), Value::Integer(5)],
        &["tasks", "Notes"],
    )
    .unwrap();
    assert!(
        p.sql.contains(&format!("FROM {TASKS} t WHERE")),
        "{}",
        p.sql
    );
    assert!(p.sql.contains("JOIN (SELECT \"id\", \"body\" FROM \"Notes\" WHERE \"_sync_partition\" = ?) AS \"Notes\" ON 1"));
    // ?2 raises the anonymous counter to 2, so the next bare ? is param 3.
    assert_eq!(
        p.binds,
        vec![
            Bind::Partition,
            Bind::Param(1),
            Bind::Param(2),
            Bind::Partition,
            Bind::Param(3)
        ]
    );
    assert!(!p.sql.contains("?2"));
}

#[test]
fn legacy_alias_forms() {
    for (sql, aliased) in [
        ("SELECT * FROM tasks AS t", true),
        ("SELECT * FROM tasks t WHERE 1", true),
        ("SELECT * FROM tasks \"t\"", true),
        ("SELECT * FROM tasks WHERE 1", false),
        ("SELECT * FROM tasks LEFT JOIN Notes n ON 1", false),
        ("SELECT * FROM tasks UNION SELECT 1, 2, 3", false),
        ("SELECT * FROM (tasks)", false),
    ] {
        let tables: &[&str] = if sql.contains("Notes") {
            &["tasks", "Notes"]
        } else {
            &["tasks"]
        };
        let p = legacy(sql, &[], tables).unwrap();
        assert_eq!(
            p.sql.contains(&format!("{TASKS} AS \"tasks\"")),
            !aliased,
            "{sql} -> {}",
            p.sql
        );
    }
}

#[test]
fn legacy_upstream_errors() {
    assert_eq!(
        message(legacy("SELECT 1; SELECT 2", &[], &[]).unwrap_err()).1,
        MSG_ONE_SELECT
    );
    assert_eq!(
        plan_error(legacy("SELECT id FROM tasks", &[], &[])),
        MSG_TABLES
    );
    assert_eq!(
        plan_error(legacy("SELECT id FROM tasks", &[], &["tasks", "Notes"])),
        MSG_TABLES
    );
    assert_eq!(
        plan_error(legacy("SELECT id FROM secrets", &[], &["secrets"])),
        MSG_NOT_MATERIALIZED
    );
    assert_eq!(
        plan_error(legacy("SELECT id FROM tasks WHERE id = ?", &[], &["tasks"])),
        MSG_BINDS
    );
    assert_eq!(
        plan_error(legacy(
            "SELECT id FROM tasks WHERE id = ?0",
            &[s("a")],
            &["tasks"]
        )),
        MSG_BINDS
    );
    assert_eq!(
        plan_error(legacy(
            "SELECT id FROM tasks WHERE id = ?",
            &[Value::Undefined],
            &["tasks"]
        )),
        MSG_BINDS
    );
    // An unreferenced undefined is fine, and unknown relations are left alone.
    legacy(
        "SELECT id FROM tasks, json_each('[1]') WHERE id = ?2",
        &[Value::Undefined, s("x")],
        &["tasks"],
    )
    .unwrap();
    legacy(
        "WITH x AS (SELECT id FROM tasks) SELECT * FROM x",
        &[],
        &["tasks"],
    )
    .unwrap();
}

#[test]
fn legacy_refuses_attack_shapes() {
    let cases: &[(&str, &[&str])] = &[
        // internal tables, in any spelling
        ("SELECT * FROM sync_commits", &[]),
        ("SELECT * FROM tasks JOIN \"sync_changes\" ON 1", &["tasks"]),
        ("SELECT * FROM tasks, [SYNC_ROW_SCOPES]", &["tasks"]),
        ("SELECT * FROM sqlite_master", &[]),
        ("SELECT * FROM tasks WHERE id IN sync_clients", &["tasks"]),
        // a schema table the scan would not rewrite
        ("SELECT * FROM \"tasks\"", &["tasks"]),
        ("SELECT * FROM `tasks`", &["tasks"]),
        ("SELECT * FROM 'tasks'", &["tasks"]),
        ("SELECT * FROM TASKS", &["tasks"]),
        ("SELECT * FROM main.tasks", &["tasks"]),
        ("SELECT * FROM tasks WHERE id IN tasks", &["tasks"]),
        ("SELECT * FROM tasks AS a, \"tasks\" AS b", &["tasks"]),
        ("SELECT * FROM/**/\"tasks\"", &["tasks"]),
        // writes and other statements
        ("WITH x AS (SELECT 1) DELETE FROM tasks", &["tasks"]),
        ("PRAGMA table_info(tasks)", &[]),
        ("ATTACH 'x.db' AS x", &[]),
        ("INSERT INTO tasks SELECT * FROM tasks", &["tasks"]),
        ("VACUUM", &[]),
        ("SELECT 1 FROM tasks /* ; */ ; DROP TABLE tasks", &["tasks"]),
    ];
    for (sql, tables) in cases {
        let e = legacy(sql, &[], tables).expect_err(sql);
        let (code, msg) = message(e);
        assert!(
            code == REFUSED || msg == MSG_ONE_SELECT,
            "{sql}: {code} {msg}"
        );
    }
}

#[test]
fn comments_and_literals_do_not_hide_or_fake_keywords() {
    // Keywords inside literals and comments are inert.
    legacy(
        "SELECT 'DELETE; DROP' FROM tasks -- PRAGMA x\n",
        &[],
        &["tasks"],
    )
    .unwrap();
    legacy(
        "SELECT replace(title, 'a', 'b') FROM tasks",
        &[],
        &["tasks"],
    )
    .unwrap();
    // A comment between FROM and the name does not hide the relation.
    let p = legacy("SELECT * FROM/* x */tasks", &[], &["tasks"]).unwrap();
    assert!(p.sql.contains(TASKS));
    refused(legacy(
        "SELECT * FROM tasks JOIN--\nsync_commits ON 1",
        &[],
        &["tasks"],
    ));
}

// ---- plan form ------------------------------------------------------------------

#[test]
fn plan_rewrites_at_offsets() {
    let sql = "SELECT t.id FROM \"tasks\" AS t WHERE t.project_id = ?1 AND t.title <> '?'";
    let start = sql.find("\"tasks\"").unwrap();
    let p = plan(
        sql,
        vec![rel("tasks", start, start + 7, Some("t"))],
        &[s("p1")],
        &["tasks"],
    )
    .unwrap();
    assert_eq!(
        p.sql,
        format!("SELECT t.id FROM {TASKS} AS t WHERE t.project_id = ? AND t.title <> '?'")
    );
    assert_eq!(p.binds, vec![Bind::Partition, Bind::Param(0)]);
    assert_eq!(p.tables, vec!["tasks".to_string()]);
}

#[test]
fn plan_offsets_are_utf16_code_units() {
    let sql = "SELECT '😀é' AS x, id FROM tasks WHERE title = ?";
    let rels = plan_at(sql, "tasks", "tasks");
    let p = plan(sql, rels, &[s("a")], &["tasks"]).unwrap();
    assert_eq!(
        p.sql,
        format!("SELECT '😀é' AS x, id FROM {TASKS} AS \"tasks\" WHERE title = ?")
    );
    // An offset inside the surrogate pair splits a character.
    let sql = "SELECT '😀', id FROM tasks";
    assert_eq!(
        plan_error(plan(sql, vec![rel("tasks", 9, 20, None)], &[], &["tasks"])),
        MSG_BOUNDARIES
    );
}

#[test]
fn plan_validation_order_and_messages() {
    let sql = "SELECT id FROM tasks";
    let ok = || plan_at(sql, "tasks", "tasks");
    assert_eq!(
        message(prepare(&Request::Malformed, &[], &[], &schema()).unwrap_err()).1,
        MSG_PLAN_REQUIRED
    );
    let mut r = ok();
    r[0].start = 0.5;
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks"])), MSG_BOUNDARIES);
    let mut r = ok();
    r[0].end = f64::NAN;
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks"])), MSG_BOUNDARIES);
    let mut r = ok();
    r[0].end = r[0].start;
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks"])), MSG_BOUNDARIES);
    let mut r = ok();
    r[0].end = 99.0;
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks"])), MSG_BOUNDARIES);
    // Overlap with the previous relation.
    let mut r = ok();
    r.push(r[0].clone());
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks"])), MSG_BOUNDARIES);
    // Boundaries before metadata, metadata before the name.
    let mut r = ok();
    r[0].table = "Notes".into();
    assert_eq!(
        plan_error(plan(sql, r.clone(), &[], &["tasks"])),
        MSG_TABLES
    );
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks", "Notes"])), MSG_NAME);
    assert_eq!(
        plan_error(plan(sql, ok(), &[], &["tasks", "Notes"])),
        MSG_TABLES
    );
    // Unknown, then non-materialized.
    let sql2 = "SELECT id FROM ghosts";
    assert_eq!(
        plan_error(plan(
            sql2,
            plan_at(sql2, "ghosts", "ghosts"),
            &[],
            &["ghosts"]
        )),
        MSG_UNKNOWN
    );
    let sql3 = "SELECT id FROM secrets";
    assert_eq!(
        plan_error(plan(
            sql3,
            plan_at(sql3, "secrets", "secrets"),
            &[],
            &["secrets"]
        )),
        MSG_NOT_MATERIALIZED
    );
    // Case-insensitive name match (SQLite names are case-insensitive).
    let sql4 = "SELECT id FROM TASKS";
    plan(sql4, plan_at(sql4, "tasks", "TASKS"), &[], &["tasks"]).unwrap();
    // Binds.
    assert_eq!(
        plan_error(plan(
            "SELECT id FROM tasks WHERE id = ?3",
            ok(),
            &[s("a")],
            &["tasks"]
        )),
        MSG_BINDS
    );
}

#[test]
fn plan_refuses_uncovered_relations() {
    let cases = [
        // a second occurrence the plan does not cover: join, subquery, CTE
        "SELECT a.id FROM tasks a JOIN \"tasks\" b ON a.id = b.id",
        "SELECT id FROM tasks WHERE id IN (SELECT id FROM [tasks])",
        "WITH x AS (SELECT * FROM `TASKS`) SELECT id FROM tasks",
        "SELECT id FROM tasks, Notes",
        "SELECT id FROM tasks WHERE id IN notes",
        "SELECT id FROM tasks JOIN sync_changes ON 1",
        "SELECT id FROM tasks JOIN main.\"Notes\" ON 1",
        "SELECT id FROM tasks; DELETE FROM tasks",
        "WITH x AS (SELECT 1) UPDATE tasks SET title = 'x'",
        "SELECT id FROM tasks WHERE 1 = (SELECT count(*) FROM _sync_anything)",
    ];
    for sql in cases {
        let first = sql.find("tasks").unwrap();
        let start = sql[..first].encode_utf16().count();
        let r = vec![rel("tasks", start, start + 5, None)];
        let e = plan(sql, r, &[], &["tasks"]).expect_err(sql);
        let (code, msg) = message(e);
        assert_eq!(code, REFUSED, "{sql}: {msg}");
    }
    // A relation plan pointing inside a comment is refused too.
    let sql = "SELECT 1 /* tasks */ FROM tasks";
    let r = plan_at(sql, "tasks", "tasks");
    assert_eq!(plan_error(plan(sql, r, &[], &["tasks"])), MSG_BOUNDARIES);
}

#[test]
fn plan_subqueries_and_ctes_are_rewritten_when_covered() {
    let sql =
        "WITH x AS (SELECT id FROM tasks) SELECT x.id, n.body FROM x JOIN Notes n ON n.id = x.id";
    let mut r = plan_at(sql, "tasks", "tasks");
    let n = sql.find("Notes").unwrap();
    r.push(rel("Notes", n, n + 5, Some("n")));
    let p = plan(sql, r, &[], &["Notes", "tasks"]).unwrap();
    assert!(
        p.sql.contains(&format!("FROM {TASKS} AS \"tasks\")")),
        "{}",
        p.sql
    );
    assert!(p.sql.contains(
        "JOIN (SELECT \"id\", \"body\" FROM \"Notes\" WHERE \"_sync_partition\" = ?) n ON"
    ));
    assert_eq!(p.binds, vec![Bind::Partition, Bind::Partition]);
}

#[test]
fn is_distinct_from_is_not_a_relation() {
    legacy(
        "SELECT id FROM tasks WHERE title IS DISTINCT FROM TASKS.title",
        &[],
        &["tasks"],
    )
    .unwrap();
    legacy(
        "SELECT id FROM tasks WHERE title IS DISTINCT FROM 'Notes'",
        &[],
        &["tasks"],
    )
    .unwrap();
}

#[test]
fn reserved_names_are_refused_in_any_spelling() {
    // A CTE (or alias, or string used as a name) carrying a view's name
    // would pose as the view to SQLite's authorizer.
    for sql in [
        r#"WITH "_syncular_q_tasks_0" AS (SELECT 1 AS id) SELECT * FROM "_syncular_q_tasks_0""#,
        "WITH _SYNCULAR_Q_tasks AS (SELECT 1 AS id) SELECT * FROM tasks",
        "WITH [_Syncular_q_x] AS (SELECT 1) SELECT * FROM tasks",
    ] {
        assert!(
            refused(legacy(sql, &[], &["tasks"])).contains("reserved"),
            "{sql}"
        );
    }
    // Upstream's own names are not reserved.
    assert!(legacy(
        r#"SELECT * FROM (SELECT id FROM tasks) AS "_syncular_registered_query""#,
        &[],
        &["tasks"]
    )
    .is_ok());
    for sql in [
        "WITH `_syncular_Q_` AS (SELECT 1) SELECT * FROM tasks",
        "WITH '_syncular_q_tasks' AS (SELECT 1) SELECT * FROM tasks",
        "SELECT id FROM tasks AS _syncular_q_",
        "SELECT id FROM tasks /* _syncular_q_ */",
    ] {
        assert!(
            refused(legacy(sql, &[], &["tasks"])).contains("reserved"),
            "{sql}"
        );
        let rels = plan_at(sql, "tasks", "tasks");
        assert!(
            refused(plan(sql, rels, &[], &["tasks"])).contains("reserved"),
            "{sql}"
        );
    }
}

#[test]
fn query_text_is_bounded() {
    let long = format!(
        "SELECT id FROM tasks WHERE {}",
        "id = 'x' OR ".repeat(8000) + "1"
    );
    assert!(long.len() > MAX_TEXT);
    assert!(refused(legacy(&long, &[], &["tasks"])).contains("bytes"));
}

#[test]
fn window_is_an_alias_unless_a_window_definition_follows() {
    // `window` as an alias does not end the FROM list: the next relation
    // is rewritten (or refused), never left raw.
    let p = legacy(
        "SELECT t.title FROM Notes window, tasks t",
        &[],
        &["Notes", "tasks"],
    )
    .unwrap();
    assert!(p.sql.contains(TASKS), "{}", p.sql);
    assert!(refused(legacy(
        "SELECT 1 FROM Notes window, sync_commits",
        &[],
        &["Notes"]
    ))
    .contains("internal"));
    assert!(refused(legacy(
        "SELECT 1 FROM Notes AS window, sqlite_master",
        &[],
        &["Notes"]
    ))
    .contains("internal"));
    // A real WINDOW clause still ends it.
    let p = legacy(
        "SELECT count(*) OVER w AS n FROM tasks WINDOW w AS (ORDER BY id)",
        &[],
        &["tasks"],
    )
    .unwrap();
    assert!(p.sql.contains("WINDOW w AS"), "{}", p.sql);
}
