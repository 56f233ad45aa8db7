//! The engine-side boundary of registered queries on SQLite: whatever the
//! text rewrite makes of a query, SQLite itself lets it read only one
//! partition of the app tables, nothing else, and for a bounded time.
//!
//! - Each app table is read through a TEMP view on the connection,
//!   `temp."_syncular_q_<table>_<shape>"`, that projects the app columns of
//!   the rows whose `_sync_partition` equals `syncular_partition()`. That
//!   function answers the partition of the query running on this thread
//!   (set for the call's duration by [`bind_partition`]), and NULL
//!   otherwise, so a view used outside a query sees no rows.
//! - While the query compiles and runs, an authorizer admits: SELECT,
//!   recursive CTEs, reads of an app table only through its own view, reads
//!   of those views, the JSON table-valued functions, and functions from
//!   an allowlist (`super::authorizer`). Everything else is denied:
//!   `sync_*` and `sqlite_*` tables, an app table named directly
//!   (`main.tasks`, or one the rewrite missed), pragmas and pragma
//!   functions, ATTACH, every write and DDL.
//!   The views' names start with `_syncular_q_`, which no registered query
//!   may write anywhere in its text (`crate::core::query`), so no CTE or alias
//!   can pose as a view: SQLite reports the FROM item being expanded as
//!   the accessor, and that is a view only when the rewrite put it there.
//! - A FROM item the query reads no column of (`SELECT count(*) FROM t`)
//!   reaches the authorizer with no database name, whether it is a table,
//!   a CTE or a view: admitted at once when it is one of the views or a
//!   JSON table function, otherwise only after the statement compiled and
//!   the name was shown to resolve to nothing outside the query (then it
//!   was a CTE of the query's own).
//! - A progress handler stops the query at its time limit, or at once when
//!   the storage closes, checking every [`PROGRESS_OPS`] VM instructions,
//!   but only at the instructions that end a loop: a function call is one
//!   instruction, and a row's result columns are one straight run. So the
//!   functions whose work grows with their arguments read the same clock
//!   themselves (`super::meter`): LIKE, GLOB, `instr`, `replace` and the
//!   trims are the storage's own (`super::pattern`, `super::linear_fns`),
//!   the other text, number and JSON functions are SQLite's own run through
//!   a check (`super::checked_fns`). While the query runs,
//!   `SQLITE_LIMIT_LENGTH` bounds every value it makes or reads (at most
//!   [`MAX_VALUE`], less for a program with long straight runs: see
//!   `super::shape`; every function fails past it, `printf` included) and
//!   LIKE/GLOB patterns are at most [`MAX_PATTERN`] bytes, so one call costs
//!   time linear in that bound and a run stops within about one call of its
//!   limit. Operators that are not function calls (arithmetic, `CAST`,
//!   comparisons) run between checks, each linear in one value: the value
//!   limit keeps their work between two checks within
//!   `super::shape::WORK_BYTES`.
//!
//! Temp objects live only in the connection that made them: the database
//! file gains nothing, and the in-tree storage never sees them.

use super::authorizer::{authorize, Rules, PARTITION_FN};
use super::conn::map_err;
use crate::core::error::{Error, Result};
use crate::core::query;
use crate::core::schema::{quote_ident, Table};
use rusqlite::functions::FunctionFlags;
use rusqlite::hooks::{AuthContext, Authorization};
use rusqlite::Connection;
use rusqlite::OptionalExtension;
use std::cell::RefCell;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

thread_local! {
    /// The partition of the registered query running on this thread. A
    /// query steps on the thread that runs it, so the views it reads see
    /// this value and no other call's.
    static PARTITION: RefCell<Option<String>> = const { RefCell::new(None) };
    /// What the registered query compiling or running on this thread may
    /// read; `None` outside one (the storage's own statements).
    static BOUND: RefCell<Option<Rules>> = const { RefCell::new(None) };
}

/// Registered query text starts with this comment, and no statement of the
/// storage's own does: the statement cache, keyed by text, then never hands
/// a registered query a statement compiled without its rules, nor the
/// reverse.
pub const MARK: &str = "/* syncular registered query */ ";

/// VM instructions between two progress checks (deadline, close, budget).
/// With the value limit (`super::shape::value_limit`) it sets how much
/// work can pass between two checks.
pub const PROGRESS_OPS: i32 = 32;
/// The same for a run on the calling thread. Sparser than off-thread: a
/// check (a clock read, and every few checks a read of SQLite's heap
/// counter) every 20 steps cost 6-9% of a 10k-row scan's time. The work
/// between two checks stays within `super::shape::NOW_WORK_BYTES`, since
/// the calling thread's value limit (`super::shape::now_value_limit`)
/// shrinks with the interval: a larger value sends the run to a worker.
pub const PROGRESS_OPS_NOW: i32 = 100;
/// Progress checks between two reads of SQLite's heap.
const MEMORY_EVERY: u32 = 4;
/// The largest string or BLOB a registered query may make or read (1 MiB).
pub const MAX_VALUE: i32 = 1 << 20;
/// SQLite's heap in the process may not exceed this (1 GiB, far above what
/// page caches and statements take): whatever a query builds between two
/// checks fails with SQLITE_NOMEM before it takes the process's memory.
pub const HEAP_LIMIT: i64 = 1 << 30;
/// The most columns of any result set of a registered query (unless a
/// declared table is wider).
pub const MAX_COLUMNS: i32 = 256;
/// How far SQLite's heap may grow during one registered query beyond
/// `maxResultBytes`, checked at every function call and progress check.
pub const WORKING_MEMORY: u64 = 64 << 20;
/// The longest LIKE or GLOB pattern a registered query may use, in bytes.
pub const MAX_PATTERN: i32 = 256;
/// The longest a registered query may hold the calling thread before it is
/// stopped there and run again off-thread, unless [`STALL_ENV`] says.
pub const NOW_STALL: Duration = Duration::from_millis(2);
/// The environment variable holding that budget in milliseconds, read
/// once: a slower machine (an emulated one runs code 10-50 times slower)
/// may need more for a cheap query to answer at once.
pub const STALL_ENV: &str = "SYNCULAR_NATIVE_STALL_MS";

/// `Ok(budget)` for a value of [`STALL_ENV`] (a number of milliseconds,
/// fractions allowed, at most a minute), `Err(why)` otherwise.
fn parse_stall(v: &str) -> std::result::Result<Duration, &'static str> {
    match v.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 && ms <= 60_000.0 => {
            Ok(Duration::from_secs_f64(ms / 1000.0))
        }
        Ok(_) => Err("not more than 0 and at most 60000"),
        Err(_) => Err("not a number"),
    }
}

/// The calling-thread budget: [`STALL_ENV`] when set and valid, else
/// [`NOW_STALL`] (an invalid value says so on stderr, once).
pub fn now_stall() -> Duration {
    static STALL: OnceLock<Duration> = OnceLock::new();
    *STALL.get_or_init(|| match std::env::var(STALL_ENV) {
        Err(_) => NOW_STALL,
        Ok(v) => parse_stall(&v).unwrap_or_else(|why| {
            let _ = writeln!(
                std::io::stderr(),
                "syncular-native-storage: {STALL_ENV}={v:?} is {why}; the budget stays {} ms",
                NOW_STALL.as_millis()
            );
            NOW_STALL
        }),
    })
}

/// Registers `syncular_partition()` and the authorizer on a new
/// connection.
///
/// The authorizer is installed once, for the connection's life: it denies
/// by [`BOUND`]'s rules while a registered query is bound on the calling
/// thread and admits everything otherwise. SQLite expires every prepared
/// statement of a connection when an authorizer is installed, so one per
/// query (as before) compiled each registered query and every cached
/// statement of its connection again. A registered statement is compiled,
/// and recompiled after a schema change, only while it is bound (inside
/// `sqlite3_prepare` or `sqlite3_step` under [`bound`]), so its checks
/// always run under its own rules.
pub fn register(conn: &mut Connection) -> Result<()> {
    // SAFETY: sets SQLite's own process-wide heap limit (this library's
    // SQLite is linked into this addon only); idempotent.
    unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(HEAP_LIMIT) };
    conn.authorizer(Some(|ctx: AuthContext<'_>| bound_verdict(&ctx)))
        .map_err(map_err)?;
    conn.create_scalar_function(
        PARTITION_FN,
        0,
        // Deterministic within one statement run, so the planner can seek
        // the partition index with it.
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |_| Ok(PARTITION.with(|p| p.borrow().clone())),
    )
    .map_err(map_err)?;
    super::linear_fns::register(conn)?;
    super::pattern::register(conn).map_err(map_err)?;
    super::checked_fns::register(conn).map_err(map_err)
}

/// The installed authorizer's verdict (see [`register`]).
pub fn bound_verdict(ctx: &AuthContext<'_>) -> Authorization {
    BOUND.with(|b| match b.borrow_mut().as_mut() {
        None => super::shared::verdict(ctx),
        Some(rules) => {
            let verdict = authorize(ctx, rules);
            if verdict != Authorization::Allow {
                rules.denied = true;
            }
            verdict
        }
    })
}

/// The views `tables` read through (with their names) exist on `conn`
/// (created on first use; a transaction that rolls back takes a view made
/// inside it along, and the next query makes it again). A view of that
/// name is trusted only when its text is the one made here: one planted
/// through `storage.db` (reading another partition, say) is dropped and
/// made again.
fn ensure_views(conn: &Connection, tables: &[(&Table, String)]) -> Result<()> {
    for (t, view) in tables {
        let cols: Vec<String> = t.columns.iter().map(|c| quote_ident(&c.name)).collect();
        let body = format!(
            "{} AS SELECT {} FROM main.{} WHERE \"_sync_partition\" = {PARTITION_FN}()",
            quote_ident(view),
            cols.join(", "),
            t.quoted,
        );
        // SQLite keeps the text as given, less TEMP and IF NOT EXISTS.
        let expected = format!("CREATE VIEW {body}");
        let found: Option<Option<String>> = conn
            .prepare_cached("SELECT sql FROM temp.sqlite_master WHERE name = ?1")
            .and_then(|mut st| st.query_row([view], |r| r.get(0)).optional())
            .map_err(map_err)?;
        match found {
            Some(Some(sql)) if sql == expected => continue,
            Some(_) => {
                // Whatever holds the name (a planted view, table, index or
                // trigger) goes: the name is the storage's.
                let kind: String = conn
                    .query_row(
                        "SELECT type FROM temp.sqlite_master WHERE name = ?1",
                        [view],
                        |r| r.get(0),
                    )
                    .map_err(map_err)?;
                let what = match kind.as_str() {
                    "table" => "TABLE",
                    "index" => "INDEX",
                    "trigger" => "TRIGGER",
                    _ => "VIEW",
                };
                conn.execute_batch(&format!("DROP {what} temp.{}", quote_ident(view)))
                    .map_err(map_err)?;
            }
            None => {}
        }
        conn.execute_batch(&format!("CREATE TEMP VIEW {body}"))
            .map_err(map_err)?;
    }
    Ok(())
}

/// Everything that bounds one registered query on one connection; undone
/// on drop, whatever happened.
pub struct Bounded<'c> {
    conn: &'c Connection,
    /// The progress handler's state (see [`progress_check`]).
    _progress: Box<Progress>,
    /// The connection's own limits, restored on drop.
    saved: (i32, i32, i32),
    /// The largest value the run may make or read.
    value: std::cell::Cell<i32>,
    /// A run on the calling thread: a value over its (tighter) limit sends
    /// it to a worker instead of failing it.
    now: bool,
    /// The clock the storage's functions read (`super::meter`).
    _meter: super::meter::Running,
}

/// Makes the views of `tables` (the declared, materialized tables) when
/// missing, binds `partition` for them, and installs the authorizer and the
/// time limit.
/// `budget`: when given, the run stops (with `OVER_BUDGET`) after
/// that many thousand VM steps.
pub fn bound<'c>(
    conn: &'c Connection, partition: &str, tables: &[&Table], limit: Duration,
    closed: &Arc<AtomicBool>, budget: Option<u32>, memory: u64,
) -> Result<Bounded<'c>> {
    let named: Vec<(&Table, String)> = tables.iter().map(|t| (*t, query::view_name(t))).collect();
    ensure_views(conn, &named)?;
    PARTITION.with(|p| *p.borrow_mut() = Some(partition.to_owned()));
    let views: Vec<(String, String)> = named
        .into_iter()
        .map(|(t, view)| (t.name.to_ascii_lowercase(), view))
        .collect();
    BOUND.with(|b| {
        *b.borrow_mut() = Some(Rules {
            views,
            denied: false,
            over_budget: false,
            unresolved: Vec::new(),
        })
    });
    let now = budget.is_some();
    let saved = limits(conn);
    // The same limits on either thread: a run answers the same wherever
    // it runs (`printf` answers NULL past the length limit).
    // At most MAX_COLUMNS values in any one result set (a row SQLite builds
    // between two checks holds at most that many values of MAX_VALUE), or
    // the widest declared table's columns.
    let widest = tables.iter().map(|t| t.columns.len()).max().unwrap_or(0);
    let columns = (widest as i32 + 1).max(MAX_COLUMNS);
    set_limits(conn, (MAX_VALUE, MAX_PATTERN, columns));
    let started = Instant::now();
    let deadline = started + limit;
    let stall = now_stall();
    let limits = super::meter::Limits {
        value: MAX_VALUE,
        pattern: MAX_PATTERN,
        memory: memory as i64,
    };
    let meter = super::meter::start(limits, deadline, budget.map(|_| started + stall), closed);
    // Every PROGRESS_OPS VM steps (PROGRESS_OPS_NOW on the calling thread,
    // whose stall budget is tighter): a clock read per call costs little
    // next to them. `budget` is in thousands of steps.
    let ops = if now { PROGRESS_OPS_NOW } else { PROGRESS_OPS };
    let per_call = 1000 / ops as u32;
    let mut progress = Box::new(Progress {
        closed: closed.clone(),
        started,
        deadline,
        stall,
        left: budget.map(|b| b.saturating_mul(per_call)),
        calls: 0,
    });
    // SAFETY: the handle is this open connection's. The handler's data is
    // the boxed `Progress`, which `Bounded` owns and keeps at one address;
    // `Bounded`'s drop removes the handler before the box is freed, and
    // the connection is borrowed for as long as `Bounded` lives, so no
    // statement of it steps after that.
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(
            conn.handle(),
            ops,
            Some(progress_check),
            (&mut *progress as *mut Progress).cast(),
        );
    }
    Ok(Bounded {
        conn,
        _progress: progress,
        saved,
        value: std::cell::Cell::new(MAX_VALUE),
        now,
        _meter: meter,
    })
}

/// What the progress handler of one bounded run checks.
struct Progress {
    closed: Arc<AtomicBool>,
    started: Instant,
    deadline: Instant,
    /// The calling-thread budget of time ([`now_stall`]).
    stall: Duration,
    /// Progress checks left in a calling-thread run's step budget; `None`
    /// off-thread.
    left: Option<u32>,
    calls: u32,
}

/// SQLite's progress handler for a bounded run: non-zero stops the
/// statement (SQLITE_INTERRUPT) at the deadline, once the storage closes,
/// past the working memory, or past a calling-thread run's budget of steps
/// or time. Installed through the C API, not rusqlite's hook (which needs
/// the connection borrowed mutably, and wraps each call in its own
/// closure box), so this runs straight from SQLite's VM loop.
extern "C" fn progress_check(data: *mut std::ffi::c_void) -> std::ffi::c_int {
    // SAFETY: `data` is the `Progress` that `bound` installed, alive and
    // used only by the thread stepping this connection's statement.
    let p = unsafe { &mut *data.cast::<Progress>() };
    // Nothing below panics (arithmetic saturates or is checked), so no
    // unwind can reach SQLite's C frames.
    let at = Instant::now();
    if p.closed.load(Ordering::Relaxed) || at >= p.deadline {
        return 1;
    }
    p.calls = p.calls.wrapping_add(1);
    if p.calls % MEMORY_EVERY == 0 && super::meter::over_memory() {
        return 1;
    }
    match p.left.as_mut() {
        Some(n) if *n == 0 || at.saturating_duration_since(p.started) >= p.stall => {
            // Runs on the thread stepping the query, which bound it.
            over_budget();
            1
        }
        Some(n) => {
            *n -= 1;
            0
        }
        None => 0,
    }
}

/// Marks the run bound on this thread as stopped at its budget.
fn over_budget() {
    BOUND.with(|b| {
        if let Some(r) = b.borrow_mut().as_mut() {
            r.over_budget = true;
        }
    });
}

/// What any statement of `conn` may make or read, and its LIKE patterns.
fn set_limits(conn: &Connection, (value, pattern, columns): (i32, i32, i32)) {
    use rusqlite::limits::Limit;
    // Setting a limit only fails for an unknown limit.
    let _ = conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, value);
    let _ = conn.set_limit(Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, pattern);
    let _ = conn.set_limit(Limit::SQLITE_LIMIT_COLUMN, columns);
}

/// The connection's limits, for the storage's own statements after the
/// query.
fn limits(conn: &Connection) -> (i32, i32, i32) {
    use rusqlite::limits::Limit;
    (
        conn.limit(Limit::SQLITE_LIMIT_LENGTH)
            .unwrap_or(1_000_000_000),
        conn.limit(Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH)
            .unwrap_or(50_000),
        conn.limit(Limit::SQLITE_LIMIT_COLUMN).unwrap_or(2000),
    )
}

impl Drop for Bounded<'_> {
    fn drop(&mut self) {
        // SAFETY: removes the handler `bound` installed on this connection;
        // its data (`_progress`) is freed only after this.
        unsafe {
            rusqlite::ffi::sqlite3_progress_handler(
                self.conn.handle(),
                0,
                None,
                std::ptr::null_mut(),
            );
        }
        set_limits(self.conn, self.saved);
        BOUND.with(|b| *b.borrow_mut() = None);
        PARTITION.with(|p| *p.borrow_mut() = None);
    }
}

impl Bounded<'_> {
    /// After the statement compiled (and again after a run, which may
    /// have compiled it again): refuses the query when a FROM item it
    /// reads no column of names anything SQLite resolves outside the query
    /// (a table, view or table-valued function of any database, an
    /// `sqlite_` table): such an item was not one of the query's own CTEs.
    /// Asks SQLite itself, by compiling `SELECT 1 FROM <name>` under the
    /// storage's own rules, in the same transaction the query compiled in.
    pub fn verify(&self) -> Result<()> {
        let names = BOUND.with(|b| {
            b.borrow_mut()
                .as_mut()
                .map(|r| std::mem::take(&mut r.unresolved))
                .unwrap_or_default()
        });
        if names.is_empty() {
            return Ok(());
        }
        let rules = BOUND.with(|b| b.borrow_mut().take());
        let mut outcome = Ok(());
        for name in names {
            let probe = format!("SELECT 1 FROM {}", quote_ident(&name));
            if self.conn.prepare(&probe).is_ok() {
                outcome = Err(refused());
                break;
            }
        }
        BOUND.with(|b| *b.borrow_mut() = rules);
        outcome
    }

    /// Lowers the largest value the run may make or read to `bytes`
    /// (its statements and the storage's functions alike).
    pub fn limit_values(&self, bytes: i32) {
        use rusqlite::limits::Limit;
        let _ = self.conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, bytes);
        super::meter::limit_values(bytes);
        self.value.set(bytes);
    }

    /// A value over the run's limit: on the calling thread the run goes
    /// to a worker, where the limit is the query's own.
    fn too_big(&self) -> Error {
        if self.now {
            return Error::plain(
                super::budget::OVER_BUDGET,
                "registered query touched a value too large for the calling thread",
            );
        }
        too_big(self.value.get())
    }

    /// The coded error for a failure while the query compiled or ran.
    pub fn err(&self, e: rusqlite::Error, limit: Duration, closed: &AtomicBool) -> Error {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::TooBig) {
            return self.too_big();
        }
        // A function of the storage's stopped the run: the reason is kept.
        match super::meter::stopped() {
            Some(super::meter::Stop::Closed) => {
                return Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed")
            }
            Some(super::meter::Stop::Deadline) => return query::timed_out(limit),
            Some(super::meter::Stop::Memory) => return out_of_memory(),
            Some(super::meter::Stop::Disk) => return out_of_temp_storage(),
            Some(super::meter::Stop::TooBig) => return self.too_big(),
            Some(super::meter::Stop::Stall) if !closed.load(Ordering::Relaxed) => {
                return Error::plain(
                    super::budget::OVER_BUDGET,
                    "registered query exceeded its step budget",
                )
            }
            _ => {}
        }
        let (denied, over_budget) = BOUND.with(|b| {
            b.borrow()
                .as_ref()
                .map_or((false, false), |r| (r.denied, r.over_budget))
        });
        if over_budget && !closed.load(Ordering::Relaxed) {
            return Error::plain(
                super::budget::OVER_BUDGET,
                "registered query exceeded its step budget",
            );
        }
        if denied {
            return refused();
        }
        query_err(e, limit, closed)
    }
}

fn refused() -> Error {
    Error::plain(
        query::REFUSED,
        "registered query reads or does something it may not: only SELECTs over the partition's own rows of the declared tables, with plain functions, are allowed",
    )
}

/// The error of a run that made or read a value over its limit.
pub(super) fn too_big(value: i32) -> Error {
    Error::plain(
        query::result::TOO_LARGE,
        format!("registered query made or read a value of more than {value} bytes, the most this query may hold in one value (1 MiB, less for a query with many operators between two loops: see the bounds docs)"),
    )
}

/// The error of a run stopped for its working memory, or refused memory by
/// SQLite's heap limit ([`HEAP_LIMIT`]).
fn out_of_memory() -> Error {
    Error::plain(
        query::result::TOO_LARGE,
        "registered query needed more working memory than it may use (maxResultBytes + 64 MiB of SQLite's heap)",
    )
}

/// The error of a run whose temporary files (a sort or grouping that
/// spilled) would have passed its budget or the process's
/// (`super::temp_vfs`).
fn out_of_temp_storage() -> Error {
    Error::plain(
        query::result::TOO_LARGE,
        format!(
            "registered query needed more temporary storage than it may use (maxResultBytes + 64 MiB per query, {} MiB for all queries of the process)",
            super::temp_budget::PROCESS_LIMIT >> 20
        ),
    )
}

fn query_err(e: rusqlite::Error, limit: Duration, closed: &AtomicBool) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::OutOfMemory) => out_of_memory(),
        Some(rusqlite::ErrorCode::OperationInterrupted) => {
            if closed.load(Ordering::Relaxed) {
                Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed")
            } else {
                query::timed_out(limit)
            }
        }
        Some(rusqlite::ErrorCode::AuthorizationForStatementDenied) => refused(),
        _ => match e {
            rusqlite::Error::MultipleStatement => {
                Error::plain(query::REFUSED, query::MSG_ONE_SELECT)
            }
            // SQLITE_LIMIT_COLUMN (MAX_COLUMNS), as set by `bound`.
            rusqlite::Error::SqliteFailure(_, Some(m)) if m.starts_with("too many columns") => {
                Error::plain(
                    query::result::TOO_LARGE,
                    format!("registered query is too wide: {m} (at most {MAX_COLUMNS} columns, or the widest declared table's)"),
                )
            }
            e => map_err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_budget_from_the_environment_value() {
        assert_eq!(parse_stall("40"), Ok(Duration::from_millis(40)));
        assert_eq!(parse_stall(" 2.5 "), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_stall("60000"), Ok(Duration::from_secs(60)));
        for bad in ["", "fast", "0", "-1", "NaN", "inf", "60001"] {
            assert!(parse_stall(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
