//! `storage.db` beside the write lease: a write through `db` survives every
//! way the transaction it joined can end without committing.

use super::{Fetch, Output};
use crate::core::error::Error;
use crate::core::model::Cell;
use crate::core::query::Value;
use crate::sqlite::conn::{Config, Location};
use crate::sqlite::storage::SqliteEngine;

fn engine() -> SqliteEngine {
    engine_at(Location::Memory)
}

fn engine_at(location: Location) -> SqliteEngine {
    let e = SqliteEngine::new(Config::for_tests(location));
    // The lease's own table, with a deferred key: the one way to make a
    // COMMIT fail on demand.
    e.db_exec(
        "CREATE TABLE storage_rows(id INTEGER PRIMARY KEY);
         CREATE TABLE parent(id INTEGER PRIMARY KEY);
         CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
         CREATE TABLE store(k TEXT PRIMARY KEY, v BLOB);",
    )
    .unwrap();
    let db = e.db().unwrap();
    crate::sqlite::mutex::lock(&db.writer)
        .conn
        .execute_batch("PRAGMA foreign_keys=ON")
        .unwrap();
    e
}

fn put(e: &SqliteEngine, k: &str) {
    e.db_statement(
        "INSERT INTO store(k, v) VALUES (?, ?)",
        vec![Value::Text(k.into()), Value::Blob(vec![1, 2, 3])],
        Fetch::Run,
    )
    .unwrap();
}

fn lease_write(e: &SqliteEngine, id: u32, sql: &str) {
    e.with_lease(id, |h| {
        h.conn
            .execute_batch(sql)
            .map_err(super::super::conn::map_err)
    })
    .unwrap();
}

fn keys(e: &SqliteEngine) -> Vec<String> {
    // Committed state, as another connection sees it.
    e.read(|c| {
        let mut st = c.prepare("SELECT k FROM store ORDER BY k").unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        Ok(rows.map(|r| r.unwrap()).collect())
    })
    .unwrap()
}

fn count(e: &SqliteEngine, table: &str) -> i64 {
    e.read(|c| {
        c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .map_err(super::super::conn::map_err)
    })
    .unwrap()
}

#[test]
fn a_write_on_an_idle_writer_is_committed_at_once() {
    let e = engine();
    put(&e, "a");
    assert_eq!(keys(&e), ["a"]);
}

#[test]
fn a_write_joined_into_a_lease_that_rolls_back_is_kept() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    lease_write(&e, a, "INSERT INTO storage_rows VALUES (1)");
    put(&e, "joined");
    assert!(
        keys(&e).is_empty(),
        "joined: durable with the lease's COMMIT"
    );
    e.unlock(a, false).unwrap();
    assert_eq!(keys(&e), ["joined"], "run again after the ROLLBACK");
    assert_eq!(count(&e, "storage_rows"), 0, "the lease's own work is gone");
}

#[test]
fn a_write_joined_into_a_lease_that_commits_commits_with_it_once() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    put(&e, "joined");
    e.unlock(a, true).unwrap();
    assert_eq!(keys(&e), ["joined"]);
    // Nothing left staged: a later lease that rolls back replays nothing.
    let b = e.try_lock(None).unwrap().unwrap();
    e.unlock(b, false).unwrap();
    assert_eq!(keys(&e), ["joined"]);
}

#[test]
fn a_rolled_back_push_candidate_keeps_the_writes_made_beside_it() {
    let e = engine();
    let a = e.try_lock(Some("p")).unwrap().unwrap();
    put(&e, "before");
    e.with_lease(a, |mut h| h.open_savepoint()).unwrap();
    lease_write(&e, a, "INSERT INTO storage_rows VALUES (1)");
    put(&e, "during");
    e.with_lease(a, |mut h| h.rollback_savepoint()).unwrap();
    e.unlock(a, true).unwrap();
    assert_eq!(keys(&e), ["before", "during"]);
    assert_eq!(count(&e, "storage_rows"), 0);
}

#[test]
fn a_group_member_that_rolls_back_keeps_the_writes_made_beside_it() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    lease_write(&e, a, "INSERT INTO storage_rows VALUES (1)");
    e.hold(a).unwrap();
    put(&e, "between");
    let b = e.try_lock(None).unwrap().unwrap();
    lease_write(&e, b, "INSERT INTO storage_rows VALUES (2)");
    put(&e, "in-b");
    e.unlock(b, false).unwrap();
    assert!(keys(&e).is_empty(), "the group is still open");
    assert!(e.flush().unwrap());
    assert_eq!(keys(&e), ["between", "in-b"]);
    assert_eq!(count(&e, "storage_rows"), 1, "only b's own row went");
}

#[test]
fn flush_rescuing_an_idle_member_commits_the_writes_made_beside_it() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    e.hold(a).unwrap();
    let b = e.try_lock(None).unwrap().unwrap();
    put(&e, "beside-b");
    assert!(e.flush().unwrap(), "b has run nothing: the group commits");
    assert_eq!(keys(&e), ["beside-b"]);
    e.unlock(b, false).unwrap();
    assert_eq!(keys(&e), ["beside-b"], "not staged in b any more");
}

#[test]
fn a_failed_group_commit_keeps_the_writes_made_in_it() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    lease_write(&e, a, "INSERT INTO child VALUES (99)");
    put(&e, "x");
    e.hold(a).unwrap();
    put(&e, "y");
    assert!(e.flush().is_err(), "the deferred key fails the COMMIT");
    assert_eq!(keys(&e), ["x", "y"]);
    assert_eq!(count(&e, "child"), 0);
}

#[test]
fn close_keeps_the_writes_of_an_open_transaction() {
    let dir = std::env::temp_dir().join(format!(
        "syncular-shared-close-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db").to_string_lossy().into_owned();
    let e = engine_at(Location::File(path.clone()));
    let a = e.try_lock(None).unwrap().unwrap();
    lease_write(&e, a, "INSERT INTO storage_rows VALUES (1)");
    put(&e, "z");
    e.close();
    let c = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM store WHERE k = 'z'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    let rows: i64 = c
        .query_row("SELECT count(*) FROM storage_rows", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
    drop(c);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn reads_see_the_joined_writes_and_values_keep_their_types() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    put(&e, "k");
    let out = e
        .db_statement(
            "SELECT k, v, 1 AS i, 9007199254740993 AS big, 0.5 AS r, NULL AS n FROM store",
            vec![],
            Fetch::Get,
        )
        .unwrap();
    let Output::Rows { columns, rows } = out else {
        panic!("rows expected")
    };
    assert_eq!(columns, ["k", "v", "i", "big", "r", "n"]);
    assert_eq!(
        rows,
        [vec![
            Cell::Text("k".into()),
            Cell::Blob(vec![1, 2, 3]),
            Cell::Integer(1),
            Cell::Integer(9007199254740993),
            Cell::Real(0.5),
            Cell::Null
        ]]
    );
    e.unlock(a, true).unwrap();
}

#[test]
fn transaction_control_and_connection_settings_are_refused() {
    let e = engine();
    for sql in [
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "SAVEPOINT s",
        "RELEASE s",
        "PRAGMA busy_timeout = 10",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA query_only = 1",
    ] {
        let err = e.db_exec(sql).unwrap_err();
        assert!(
            matches!(&err, Error::Plain { code, .. } if *code == super::REFUSED),
            "{sql}: {err:?}"
        );
        let err = e.db_prepare(sql).unwrap_err();
        assert!(
            matches!(&err, Error::Plain { code, .. } if *code == super::REFUSED),
            "{sql}: {err:?}"
        );
    }
    // Reading a setting, and the pragmas the stores use, are fine.
    e.db_exec("PRAGMA journal_mode; PRAGMA table_info(store)")
        .unwrap();
    // The storage's own control statements still run (cached apart).
    let a = e.try_lock(None).unwrap().unwrap();
    e.unlock(a, true).unwrap();
}

#[test]
fn bad_statements_and_values_are_coded() {
    let e = engine();
    let invalid = |r: crate::Result<Output>| match r {
        Err(Error::InvalidArgument(m)) => m,
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("accepted"),
    };
    let m = invalid(e.db_statement("SELECT ?, ?", vec![Value::Integer(1)], Fetch::Get));
    assert!(m.contains("takes 2 values, got 1"), "{m}");
    let m = invalid(e.db_statement("SELECT ?", vec![Value::Undefined], Fetch::Get));
    assert!(m.contains("undefined"), "{m}");
    let m = invalid(e.db_statement("SELECT 1; SELECT 2", vec![], Fetch::Run));
    assert!(m.contains("exec runs several"), "{m}");
    let err = e.db_statement("SELEC 1", vec![], Fetch::Run).unwrap_err();
    assert!(matches!(&err, Error::Engine { code, .. } if code == "SQLITE_ERROR"));
    put(&e, "dup");
    let err = e
        .db_statement("INSERT INTO store(k) VALUES ('dup')", vec![], Fetch::Run)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Engine { code, .. } if code == "SQLITE_CONSTRAINT_PRIMARYKEY"),
        "{err:?}"
    );
}
