//! Test support for the storage's own SQL functions (`checked_fns`,
//! `pattern`): SQLite's built-ins on a fresh connection and ours must
//! answer every case alike, errors included.

use rusqlite::types::Value;
use rusqlite::Connection;

/// A fresh connection (SQLite's built-ins) and one with ours registered.
pub fn builtin_and_ours(
    register: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> (Connection, Connection) {
    let builtin = Connection::open_in_memory().unwrap();
    let ours = Connection::open_in_memory().unwrap();
    register(&ours).unwrap();
    (builtin, ours)
}

/// The answer of `sql` on `conn`, or its error, as text.
fn answer(conn: &Connection, sql: &str) -> String {
    match conn.query_row(sql, [], |r| r.get::<_, Value>(0)) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// `SELECT <case>` answers alike on both connections, for every case.
pub fn assert_agree<S: AsRef<str>>(
    builtin: &Connection, ours: &Connection, cases: impl IntoIterator<Item = S>,
) {
    for c in cases {
        let c = c.as_ref();
        let sql = format!("SELECT {c}");
        assert_eq!(answer(builtin, &sql), answer(ours, &sql), "{c}");
    }
}
