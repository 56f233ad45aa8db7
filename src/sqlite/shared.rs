//! `storage.db`: the host's synchronous SQLite connection (upstream's
//! `SqliteDatabase`: `exec`, `run`, `query(sql).run/get/all`) served on the
//! storage's own writer connection, so the segment, blob and lease stores
//! share the file with the storage through one copy of SQLite and one set
//! of POSIX locks (see docs/shared-file.md).
//!
//! A statement runs at once on the calling thread, under the writer mutex:
//!
//! - Writer idle (autocommit): in a transaction of its own, durable when
//!   the call returns. Only another process can hold the write lock then;
//!   the statement waits for it up to `busyTimeoutMs`.
//! - A transaction open (a lease, or a commit group held open): the
//!   statement joins it, as it would on the in-tree storage's single
//!   connection, and becomes durable with that transaction's COMMIT. No
//!   wait, no SQLITE_BUSY: the write lock is ours already.
//!
//! A joined write belongs to the host, not to the transaction it joined, so
//! it must survive that transaction's failure. Each is kept ([`Staged`])
//! until the physical transaction commits; whenever its work is undone
//! instead (ROLLBACK, a failed COMMIT, ROLLBACK TO a savepoint older than
//! it), it runs again: in place after a ROLLBACK TO, in a transaction of its
//! own after the transaction ended. The store tables are written by these
//! statements alone, in one order, so running them again gives the same
//! rows.
//!
//! Transaction control through `db` (BEGIN, COMMIT, SAVEPOINT …) and the
//! pragmas that set how the connection works are refused: they belong to
//! the storage.

use super::bind::{cell, Bound};
use super::conn::{self, map_err};
use super::writer::{Staged, Writer};
use crate::core::error::{Error, Result};
use crate::core::model::Cell;
use crate::core::query::Value;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Batch, Connection, Statement};
use std::cell::Cell as StdCell;
use std::time::Duration;

/// Statements through `db` start with this comment in the statement
/// cache, so none is ever handed a statement the storage compiled (which
/// the authorizer below never saw), nor the reverse.
const MARK: &str = "/* syncular storage.db */ ";

/// The code of a statement `db` does not run.
pub const REFUSED: &str = "ERR_SYNCULAR_DB_REFUSED";

/// Log target of writes that could not be run again.
const TARGET: &str = "syncular::db";

/// Pragmas whose value, once set, changes how the storage's own statements
/// run on this connection. Reading them is allowed.
const SETTINGS: &[&str] = &[
    "journal_mode",
    "locking_mode",
    "synchronous",
    "busy_timeout",
    "query_only",
    "wal_autocheckpoint",
    "foreign_keys",
    "defer_foreign_keys",
    "recursive_triggers",
    "writable_schema",
    "read_uncommitted",
    // The registered-query bounds and the storage's own guards: built-ins
    // the isolation layer replaced (LIKE's case rule), the schema cookie,
    // size and memory limits (the heap limits are process-wide), where
    // temporary data goes, and checks the storage relies on.
    "case_sensitive_like",
    "schema_version",
    "max_page_count",
    "hard_heap_limit",
    "soft_heap_limit",
    "temp_store",
    "temp_store_directory",
    "data_store_directory",
    "mmap_size",
    "threads",
    "trusted_schema",
    "ignore_check_constraints",
    "legacy_alter_table",
    "cell_size_check",
];

/// Names the storage keeps for its own objects (the registered queries'
/// views): `db` may not create or drop one.
const RESERVED_PREFIX: &str = "_syncular_";

fn reserved(name: &str) -> bool {
    name.len() >= RESERVED_PREFIX.len()
        && name.as_bytes()[..RESERVED_PREFIX.len()].eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes())
}

#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Outside,
    Inside,
    Refused,
}

thread_local! {
    /// Whether a `db` statement is compiling on this thread (and whether
    /// the authorizer refused something of it).
    static SCOPE: StdCell<Scope> = const { StdCell::new(Scope::Outside) };
}

struct InScope;

impl InScope {
    fn enter() -> InScope {
        SCOPE.with(|s| s.set(Scope::Inside));
        InScope
    }

    fn refused(&self) -> bool {
        SCOPE.with(|s| s.get() == Scope::Refused)
    }
}

impl Drop for InScope {
    fn drop(&mut self) {
        SCOPE.with(|s| s.set(Scope::Outside));
    }
}

/// The authorizer's verdict outside registered queries (see
/// `isolation::bound_verdict`): everything, except what `db` may not run.
pub(super) fn verdict(ctx: &AuthContext<'_>) -> Authorization {
    let deny = SCOPE.with(|s| s.get()) != Scope::Outside
        && match ctx.action {
            AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => true,
            AuthAction::Pragma {
                pragma_name,
                pragma_value: Some(_),
            } => SETTINGS.iter().any(|p| p.eq_ignore_ascii_case(pragma_name)),
            // Another database on the storage's connection: its files are
            // beyond the storage's locks and bounds.
            AuthAction::Attach { .. } | AuthAction::Detach { .. } => true,
            AuthAction::CreateIndex { index_name: n, .. }
            | AuthAction::CreateTempIndex { index_name: n, .. }
            | AuthAction::DropIndex { index_name: n, .. }
            | AuthAction::DropTempIndex { index_name: n, .. }
            | AuthAction::CreateTable { table_name: n }
            | AuthAction::CreateTempTable { table_name: n }
            | AuthAction::DropTable { table_name: n }
            | AuthAction::DropTempTable { table_name: n }
            | AuthAction::CreateTrigger {
                trigger_name: n, ..
            }
            | AuthAction::CreateTempTrigger {
                trigger_name: n, ..
            }
            | AuthAction::DropTrigger {
                trigger_name: n, ..
            }
            | AuthAction::DropTempTrigger {
                trigger_name: n, ..
            }
            | AuthAction::CreateView { view_name: n }
            | AuthAction::CreateTempView { view_name: n }
            | AuthAction::DropView { view_name: n }
            | AuthAction::DropTempView { view_name: n } => reserved(n),
            _ => false,
        };
    if deny {
        SCOPE.with(|s| s.set(Scope::Refused));
        Authorization::Deny
    } else {
        Authorization::Allow
    }
}

fn refused() -> Error {
    Error::plain(
        REFUSED,
        "storage.db shares the storage's connection: transaction control (BEGIN, COMMIT, \
         ROLLBACK, SAVEPOINT, RELEASE), connection settings and limits (PRAGMA journal_mode=, \
         busy_timeout=, case_sensitive_like=, schema_version=, max_page_count=, \
         hard_heap_limit=, …), ATTACH and DETACH, and objects named _syncular_… belong to the \
         storage. Each statement through db commits on its own, or with the storage \
         transaction open at the time",
    )
}

fn db_err(scope: &InScope, e: rusqlite::Error) -> Error {
    if scope.refused() {
        return refused();
    }
    match e {
        rusqlite::Error::MultipleStatement => {
            Error::invalid("run and query take one statement; exec runs several")
        }
        // SQLite's own message, without the statement text (which carries
        // the cache mark).
        rusqlite::Error::SqlInputError { error, msg, .. } => {
            map_err(rusqlite::Error::SqliteFailure(error, Some(msg)))
        }
        e => map_err(e),
    }
}

/// What the caller wants of a statement.
#[derive(Clone, Copy, PartialEq)]
pub enum Fetch {
    /// Step to the end; `changes` and `lastInsertRowid`.
    Run,
    /// The first row, if any.
    Get,
    /// Every row.
    All,
}

#[derive(Debug)]
pub enum Output {
    Ran {
        changes: i64,
        last_insert_rowid: i64,
    },
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<Cell>>,
    },
}

/// The busy wait of a statement on an idle writer, undone when it ends:
/// the storage's own lock attempts on this connection must fail at once.
struct Waiting<'c>(&'c Connection);

impl<'c> Waiting<'c> {
    fn new(conn: &'c Connection, timeout: Duration) -> Result<Waiting<'c>> {
        conn::set_busy_timeout(conn, timeout)?;
        Ok(Waiting(conn))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let _ = self.0.busy_timeout(Duration::ZERO);
    }
}

fn bind(st: &mut Statement<'_>, params: &[Value]) -> Result<()> {
    let expected = st.parameter_count();
    if params.len() != expected {
        return Err(Error::invalid(format!(
            "the statement takes {expected} values, got {}",
            params.len()
        )));
    }
    for (i, v) in params.iter().enumerate() {
        if matches!(v, Value::Undefined) {
            return Err(Error::invalid(format!(
                "value {} is undefined: bind null for SQL NULL",
                i + 1
            )));
        }
        st.raw_bind_parameter(i + 1, Bound(v)).map_err(map_err)?;
    }
    Ok(())
}

fn step(st: &mut Statement<'_>, conn: &Connection, fetch: Fetch) -> rusqlite::Result<Output> {
    let columns: Vec<String> = match fetch {
        Fetch::Run => Vec::new(),
        _ => st.column_names().into_iter().map(str::to_owned).collect(),
    };
    let width = st.column_count();
    let mut rows = st.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        if fetch != Fetch::Run {
            let cells = (0..width)
                .map(|i| row.get_ref(i).map(cell))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            out.push(cells);
            if fetch == Fetch::Get {
                break;
            }
        }
    }
    drop(rows);
    Ok(match fetch {
        Fetch::Run => Output::Ran {
            changes: conn.changes() as i64,
            last_insert_rowid: conn.last_insert_rowid(),
        },
        _ => Output::Rows { columns, rows: out },
    })
}

/// Compiles `sql` as `db` would run it: one statement, nothing refused.
pub(super) fn prepare(w: &mut Writer, sql: &str) -> Result<()> {
    let scope = InScope::enter();
    let _wait = idle_wait(&w.conn, w.busy_timeout)?;
    w.conn
        .prepare_cached(&format!("{MARK}{sql}"))
        .map(drop)
        .map_err(|e| db_err(&scope, e))
}

fn idle_wait(conn: &Connection, timeout: Duration) -> Result<Option<Waiting<'_>>> {
    if conn.is_autocommit() {
        Waiting::new(conn, timeout).map(Some)
    } else {
        Ok(None)
    }
}

/// Runs one statement (`run`, `get`, `all`).
pub(super) fn statement(
    w: &mut Writer, sql: &str, params: Vec<Value>, fetch: Fetch,
) -> Result<Output> {
    settle_lost(w);
    let scope = InScope::enter();
    let joined = !w.conn.is_autocommit();
    let wait = idle_wait(&w.conn, w.busy_timeout)?;
    let mut st = w
        .conn
        .prepare_cached(&format!("{MARK}{sql}"))
        .map_err(|e| db_err(&scope, e))?;
    let writes = !st.readonly();
    if writes {
        if let Some(f) = w.foreign.as_mut() {
            f.check()?;
        }
    }
    bind(&mut st, &params)?;
    let out = step(&mut st, &w.conn, fetch).map_err(|e| db_err(&scope, e));
    drop(st);
    drop(wait);
    let out = out?;
    if writes {
        let staged = || Staged {
            sql: sql.to_owned(),
            params,
        };
        wrote(&mut w.staged, joined, staged);
    }
    Ok(out)
}

/// Runs every statement of `sql`, in order, each as [`statement`] would
/// (those before a failing one stay done, as on upstream's drivers).
pub(super) fn exec(w: &mut Writer, sql: &str) -> Result<()> {
    use rusqlite::fallible_iterator::FallibleIterator;
    settle_lost(w);
    let scope = InScope::enter();
    let mut batch = Batch::new(&w.conn, sql);
    loop {
        let joined = !w.conn.is_autocommit();
        let wait = idle_wait(&w.conn, w.busy_timeout)?;
        let next = batch.next().map_err(|e| db_err(&scope, e))?;
        let Some(mut st) = next else { return Ok(()) };
        let writes = !st.readonly();
        if writes {
            if let Some(f) = w.foreign.as_mut() {
                f.check()?;
            }
        }
        // Stepped to the end: a statement that returns rows (a PRAGMA, a
        // SELECT) runs too, once.
        step(&mut st, &w.conn, Fetch::Run).map_err(|e| db_err(&scope, e))?;
        let text = st.expanded_sql().unwrap_or_default();
        drop(st);
        drop(wait);
        if writes {
            let staged = || Staged {
                sql: text,
                params: Vec::new(),
            };
            wrote(&mut w.staged, joined, staged);
        }
    }
}

/// A write joined to an open transaction is kept until that commits.
fn wrote(staged: &mut Vec<Staged>, joined: bool, entry: impl FnOnce() -> Staged) {
    if joined {
        staged.push(entry());
    }
}

/// SQLite can end a transaction by itself (SQLITE_FULL, an I/O error):
/// the connection is back in autocommit with writes still staged. They run
/// again now, before a later write could overtake them.
fn settle_lost(w: &mut Writer) {
    if w.conn.is_autocommit() && !w.staged.is_empty() {
        replay_fresh(w);
    }
}

fn run_staged(conn: &Connection, s: &Staged) -> Result<()> {
    let _scope = InScope::enter();
    let mut st = conn
        .prepare_cached(&format!("{MARK}{}", s.sql))
        .map_err(map_err)?;
    bind(&mut st, &s.params)?;
    step(&mut st, conn, Fetch::Run).map(drop).map_err(map_err)
}

fn lost(s: &Staged, e: &Error) {
    tracing::error!(
        target: TARGET,
        sql = %s.sql,
        error = %e,
        "a write through storage.db that had succeeded was undone with the storage \
         transaction it ran in, and could not be run again"
    );
}

/// Runs `staged` again inside the open transaction: a ROLLBACK TO a
/// savepoint older than them undid them.
pub(super) fn replay(conn: &Connection, staged: &[Staged]) {
    for s in staged {
        if let Err(e) = run_staged(conn, s) {
            lost(s, &e);
        }
    }
}

/// The physical transaction ended without committing (ROLLBACK, a failed
/// COMMIT): every staged write runs again in a transaction of its own, and
/// commits.
pub(super) fn replay_fresh(w: &mut Writer) {
    if w.staged.is_empty() || !w.conn.is_autocommit() {
        // Still in the transaction (its ROLLBACK failed): they run once
        // the next lease ends it (`SqliteEngine::try_lock`).
        return;
    }
    let staged = std::mem::take(&mut w.staged);
    let began = idle_wait(&w.conn, w.busy_timeout).and_then(|wait| {
        conn::exec(&w.conn, "BEGIN IMMEDIATE").map_err(map_err)?;
        Ok(wait)
    });
    let wait = match began {
        Ok(wait) => wait,
        Err(e) => {
            staged.iter().for_each(|s| lost(s, &e));
            return;
        }
    };
    replay(&w.conn, &staged);
    if let Err(e) = conn::exec(&w.conn, "COMMIT") {
        let e = conn::rollback_after(&w.conn, map_err(e));
        staged.iter().for_each(|s| lost(s, &e));
        return;
    }
    drop(wait);
}

#[cfg(test)]
#[path = "shared_tests.rs"]
mod tests;
