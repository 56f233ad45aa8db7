//! The write lease, group commit and writes in their own transaction.

use super::lease::WOULD_BLOCK;
use super::mutex::lock;
use super::*;
use crate::core::error::Error;
use conn::map_err;
use rusqlite::Connection;

fn engine() -> SqliteEngine {
    let e = SqliteEngine::new(Config::for_tests(Location::Memory));
    let db = e.db().unwrap();
    let w = lock(&db.writer);
    // A deferred foreign key fails at COMMIT, not at the statement:
    // the one way to make a group's physical commit fail on demand.
    w.conn
        .execute_batch(
            "PRAGMA foreign_keys=ON;
             CREATE TABLE parent(id INTEGER PRIMARY KEY);
             CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .unwrap();
    drop(w);
    e
}

fn run(e: &SqliteEngine, id: u32, sql: &str) {
    e.with_lease(id, |h| h.conn.execute_batch(sql).map_err(map_err))
        .unwrap();
}

/// A new lease (the write lock free at once) that has run `sql`.
fn leased(e: &SqliteEngine, sql: &str) -> u32 {
    let id = e.try_lock(None).unwrap().unwrap();
    run(e, id, sql);
    id
}

fn count(e: &SqliteEngine, table: &str) -> i64 {
    e.read(|c| {
        c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .map_err(map_err)
    })
    .unwrap()
}

#[test]
fn held_leases_become_visible_with_the_commit_that_ends_the_group() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    assert_eq!(count(&e, "parent"), 0, "held, not durable");
    let b = leased(&e, "INSERT INTO parent VALUES (2)");
    e.unlock(b, false).unwrap();
    let c = leased(&e, "INSERT INTO parent VALUES (3)");
    e.unlock(c, true).unwrap();
    let ids: Vec<i64> = e
        .read(|conn| {
            let mut st = conn.prepare("SELECT id FROM parent ORDER BY id").unwrap();
            let rows = st.query_map([], |r| r.get(0)).unwrap();
            Ok(rows.map(|r| r.unwrap()).collect())
        })
        .unwrap();
    assert_eq!(ids, vec![1, 3], "the rolled-back lease undid only itself");
}

#[test]
fn a_failed_physical_commit_fails_the_whole_group() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    let b = leased(&e, "INSERT INTO child VALUES (99)");
    e.hold(b).unwrap();
    assert!(e.flush().is_err(), "the deferred key fails the COMMIT");
    assert_eq!(count(&e, "parent"), 0, "no lease of the group survives");
    assert_eq!(count(&e, "child"), 0);
    // The writer is usable again, outside any group.
    let c = leased(&e, "INSERT INTO parent VALUES (5)");
    e.unlock(c, true).unwrap();
    assert_eq!(count(&e, "parent"), 1);
}

#[test]
fn flush_waits_for_a_lease_that_has_run_work_and_rescues_one_that_has_not() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    let b = e.try_lock(None).unwrap().unwrap();
    // b has run nothing: the group commits without it.
    assert!(e.flush().unwrap());
    assert_eq!(count(&e, "parent"), 1);
    run(&e, b, "INSERT INTO parent VALUES (2)");
    e.hold(b).unwrap();
    let c = leased(&e, "INSERT INTO parent VALUES (3)");
    assert!(!e.flush().unwrap(), "c has run work: not now");
    e.unlock(c, true).unwrap();
    assert_eq!(count(&e, "parent"), 3);
}

#[test]
fn a_failed_rollback_after_a_failed_commit_rides_on_the_commit_error() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    // The deferred key fails the COMMIT for real; the ROLLBACK is refused.
    run(&e, a, "INSERT INTO child VALUES (99)");
    e.arm_faults(false, true).unwrap();
    let err = e.unlock(a, true).unwrap_err();
    let Error::RollbackFailed { error, rollback } = &err else {
        panic!("expected the rollback failure attached, got {err:?}");
    };
    assert!(
        matches!(&**error, Error::Engine { code, .. } if code == "SQLITE_CONSTRAINT_FOREIGNKEY"),
        "the COMMIT's error stays the error: {error:?}"
    );
    assert!(matches!(&**rollback, Error::Engine { code, .. } if code == "SQLITE_AUTH"));
    assert_eq!(err.kind(), "engine");
    assert_eq!(err.to_string(), error.to_string());
    let wire: serde_json::Value = serde_json::from_str(&err.to_wire()).unwrap();
    assert_eq!(wire["code"], "SQLITE_CONSTRAINT_FOREIGNKEY");
    assert_eq!(wire["rollbackError"]["code"], "SQLITE_AUTH");
    // The transaction the ROLLBACK could not end is ended by the next lease.
    let b = leased(&e, "INSERT INTO parent VALUES (1)");
    e.unlock(b, true).unwrap();
    assert_eq!(count(&e, "child"), 0);
    assert_eq!(count(&e, "parent"), 1);
}

#[test]
fn a_commit_refused_and_a_rollback_that_succeeds_report_the_commit_error_alone() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.arm_faults(true, false).unwrap();
    let err = e.unlock(a, true).unwrap_err();
    assert!(
        matches!(&err, Error::Engine { code, .. } if code == "SQLITE_AUTH"),
        "{err:?}"
    );
    assert_eq!(count(&e, "parent"), 0, "rolled back");
}

fn code(e: &Error) -> &str {
    match e {
        Error::Plain { code, .. } => code,
        _ => "",
    }
}

#[test]
fn a_write_in_its_own_transaction_commits_or_leaves_nothing() {
    let e = engine();
    run(&e, OWN_TRANSACTION, "INSERT INTO parent VALUES (1)");
    assert_eq!(count(&e, "parent"), 1, "committed in the one call");
    let failed = e.with_lease(OWN_TRANSACTION, |h| {
        h.conn
            .execute_batch("INSERT INTO parent VALUES (2)")
            .map_err(map_err)?;
        Err::<(), _>(Error::plain("ERR_TEST", "refused after a write"))
    });
    assert!(failed.is_err());
    assert_eq!(count(&e, "parent"), 1, "the failed write rolled back");
    // A COMMIT that fails (a deferred key) reports it and keeps nothing.
    let commit = e.with_lease(OWN_TRANSACTION, |h| {
        h.conn
            .execute_batch("INSERT INTO child VALUES (99)")
            .map_err(map_err)
    });
    assert!(commit.is_err(), "the deferred key fails the COMMIT");
    assert_eq!(count(&e, "child"), 0);
    // The writer is free again: a lease is granted at once.
    let a = e.try_lock(None).unwrap().expect("lock free");
    e.unlock(a, false).unwrap();
}

#[test]
fn a_write_in_its_own_transaction_runs_nothing_while_a_lease_or_group_holds_the_writer() {
    let e = engine();
    let a = e.try_lock(None).unwrap().unwrap();
    let mut ran = false;
    let out = e.with_lease(OWN_TRANSACTION, |_| {
        ran = true;
        Ok(())
    });
    assert_eq!(code(&out.unwrap_err()), WOULD_BLOCK);
    assert!(!ran);
    run(&e, a, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    let out = e.with_lease(OWN_TRANSACTION, |h| {
        h.conn
            .execute_batch("INSERT INTO parent VALUES (2)")
            .map_err(map_err)
    });
    assert_eq!(
        code(&out.unwrap_err()),
        WOULD_BLOCK,
        "a held group is not joined"
    );
    assert!(e.flush().unwrap());
    assert_eq!(count(&e, "parent"), 1, "only the held lease's write");
}

#[test]
fn close_rolls_back_held_leases() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    e.close();
    assert!(e.try_lock(None).is_err());
}

#[test]
fn a_write_in_its_own_call_runs_nothing_while_another_connection_holds_the_lock() {
    let e = engine();
    let path = match &e.db().unwrap().cfg.location {
        Location::File(p) => p.clone(),
        Location::Memory => unreachable!("a memory database is a scratch file"),
    };
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let insert = |h: Held<'_>| {
        h.conn
            .execute("INSERT INTO parent VALUES (7)", [])
            .map(|_| ())
            .map_err(map_err)
    };
    let one = e.with_lease_one_statement(OWN_TRANSACTION, insert);
    assert_eq!(code(&one.unwrap_err()), WOULD_BLOCK, "one statement");
    let own = e.with_lease(OWN_TRANSACTION, insert);
    assert_eq!(code(&own.unwrap_err()), WOULD_BLOCK, "own transaction");
    other.execute_batch("COMMIT").unwrap();
    e.with_lease_one_statement(OWN_TRANSACTION, insert).unwrap();
    assert_eq!(count(&e, "parent"), 1, "in autocommit, committed");
    assert!(e.db().unwrap().writer.lock().unwrap().conn.is_autocommit());
}

/// Runs `sql` under lease `id` with every VM step interrupted: SQLite rolls
/// back the whole transaction of an interrupted write.
fn interrupted(e: &SqliteEngine, id: u32, sql: &str) -> Error {
    extern "C" fn stop(_: *mut std::ffi::c_void) -> std::ffi::c_int {
        1
    }
    e.with_lease(id, |h| {
        // SAFETY: this open connection's handle; removed before returning.
        unsafe {
            rusqlite::ffi::sqlite3_progress_handler(
                h.conn.handle(),
                1,
                Some(stop),
                std::ptr::null_mut(),
            )
        };
        let out = h.conn.execute_batch(sql).map_err(map_err);
        unsafe {
            rusqlite::ffi::sqlite3_progress_handler(h.conn.handle(), 0, None, std::ptr::null_mut())
        };
        out
    })
    .unwrap_err()
}

const MANY_CTE: &str = "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000) INSERT INTO parent SELECT n + 100 FROM s";

#[test]
fn a_transaction_the_database_rolled_back_refuses_its_calls_and_its_commit() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    let _ = interrupted(&e, a, MANY_CTE);
    // Without the check, this write would commit on its own.
    let next = e.with_lease(a, |h| {
        h.conn
            .execute_batch("INSERT INTO parent VALUES (2)")
            .map_err(map_err)
    });
    assert_eq!(code(&next.unwrap_err()), crate::core::error::TX_ABORTED);
    assert_eq!(
        code(&e.unlock(a, true).unwrap_err()),
        crate::core::error::TX_ABORTED
    );
    assert_eq!(count(&e, "parent"), 0, "nothing of it stored");
    // The writer serves the next transaction.
    let b = leased(&e, "INSERT INTO parent VALUES (3)");
    e.unlock(b, true).unwrap();
    assert_eq!(count(&e, "parent"), 1);
}

#[test]
fn a_member_rolled_back_by_the_database_fails_the_held_commits_of_its_group() {
    let e = engine();
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    let b = e.try_lock(None).unwrap().unwrap();
    let _ = interrupted(&e, b, MANY_CTE);
    // The member rolls back (as upstream's handler does after an error);
    // the group's held commit was lost with the transaction, and the flush
    // that would have made it durable says so.
    e.unlock(b, false).unwrap();
    assert_eq!(
        code(&e.flush().unwrap_err()),
        crate::core::error::TX_ABORTED
    );
    assert_eq!(count(&e, "parent"), 0);
    assert!(e.flush().unwrap(), "reported once");
    // A lease begun before the flush is told too, and its work undone.
    let a = leased(&e, "INSERT INTO parent VALUES (1)");
    e.hold(a).unwrap();
    let b = e.try_lock(None).unwrap().unwrap();
    let _ = interrupted(&e, b, MANY_CTE);
    e.unlock(b, false).unwrap();
    let c = leased(&e, "INSERT INTO parent VALUES (5)");
    assert_eq!(
        code(&e.unlock(c, true).unwrap_err()),
        crate::core::error::TX_ABORTED
    );
    assert_eq!(count(&e, "parent"), 0);
    let d = leased(&e, "INSERT INTO parent VALUES (6)");
    e.unlock(d, true).unwrap();
    assert!(e.flush().unwrap());
    assert_eq!(count(&e, "parent"), 1);
}
