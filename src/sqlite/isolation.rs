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
//!   [`FUNCTIONS`]. Everything else is denied: `sync_*` and `sqlite_*`
//!   tables, an app table named directly (`main.tasks`, or one the rewrite
//!   missed), pragmas and pragma functions, ATTACH, every write and DDL.
//! - A progress handler stops the query at its time limit, or at once when
//!   the storage closes.
//!
//! Temp objects live only in the connection that made them: the database
//! file gains nothing, and the in-tree storage never sees them.

use super::conn::map_err;
use crate::error::{Error, Result};
use crate::query;
use crate::schema::{quote_ident, Table};
use rusqlite::functions::FunctionFlags;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::Connection;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The SQL function the views filter on.
const PARTITION_FN: &str = "syncular_partition";

thread_local! {
    /// The partition of the registered query running on this thread. A
    /// query steps on the thread that runs it, so the views it reads see
    /// this value and no other call's.
    static PARTITION: RefCell<Option<String>> = const { RefCell::new(None) };
    /// What the registered query compiling or running on this thread may
    /// read; `None` outside one (the storage's own statements).
    static BOUND: RefCell<Option<Rules>> = const { RefCell::new(None) };
}

/// The authorizer's view of one bounded query run.
struct Rules {
    /// (lower-case table name, its view's name) of the declared tables.
    views: Vec<(String, String)>,
    /// Set when anything was denied: SQLite reports some denials
    /// (functions) as a plain SQLITE_ERROR.
    denied: bool,
    /// Set when the run was stopped at its step budget.
    over_budget: bool,
}

/// Registered query text starts with this comment, and no statement of the
/// storage's own does: the statement cache, keyed by text, then never hands
/// a registered query a statement compiled without its rules, nor the
/// reverse.
pub const MARK: &str = "/* syncular registered query */ ";

/// Functions a registered query may call (lower case). Pure functions of
/// their arguments: none reads outside the query, writes, sleeps, loads
/// code or allocates without bound from a small argument (so no
/// `zeroblob`, `randomblob`, `load_extension`, `sqlite_*`, `fts3_*`).
/// `like`/`glob` are what the LIKE and GLOB operators call.
const FUNCTIONS: &[&str] = &[
    // aggregates
    "count",
    "sum",
    "total",
    "avg",
    "min",
    "max",
    "group_concat",
    "string_agg",
    // window functions: crate::query::WINDOW_FUNCTIONS
    // scalar
    "abs",
    "coalesce",
    "ifnull",
    "iif",
    "if",
    "nullif",
    "typeof",
    "length",
    "octet_length",
    "lower",
    "upper",
    "trim",
    "ltrim",
    "rtrim",
    "substr",
    "substring",
    "replace",
    "instr",
    "hex",
    "unhex",
    "quote",
    "printf",
    "format",
    "char",
    "unicode",
    "round",
    "sign",
    "like",
    "glob",
    "likely",
    "unlikely",
    "likelihood",
    "concat",
    "concat_ws",
    "random",
    // math
    "ceil",
    "ceiling",
    "floor",
    "trunc",
    "ln",
    "log",
    "log10",
    "log2",
    "exp",
    "pow",
    "power",
    "sqrt",
    "mod",
    "pi",
    "degrees",
    "radians",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    // date and time
    "date",
    "time",
    "datetime",
    "julianday",
    "unixepoch",
    "strftime",
    "timediff",
    // JSON
    "json",
    "jsonb",
    "json_array",
    "jsonb_array",
    "json_array_length",
    "json_extract",
    "jsonb_extract",
    "json_insert",
    "jsonb_insert",
    "json_object",
    "jsonb_object",
    "json_patch",
    "jsonb_patch",
    "json_remove",
    "jsonb_remove",
    "json_replace",
    "jsonb_replace",
    "json_set",
    "jsonb_set",
    "json_type",
    "json_valid",
    "json_quote",
    "json_group_array",
    "jsonb_group_array",
    "json_group_object",
    "jsonb_group_object",
    "json_each",
    "json_tree",
    "json_pretty",
    "json_error_position",
    "->",
    "->>",
    // the views' own filter
    PARTITION_FN,
];

/// Table-valued functions a query may read (they read only their
/// arguments).
const TABLE_FUNCTIONS: &[&str] = &["json_each", "json_tree"];

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
pub fn register(conn: &Connection) -> Result<()> {
    conn.authorizer(Some(|ctx: AuthContext<'_>| bound_verdict(&ctx)));
    conn.create_scalar_function(
        PARTITION_FN,
        0,
        // Deterministic within one statement run, so the planner can seek
        // the partition index with it.
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |_| Ok(PARTITION.with(|p| p.borrow().clone())),
    )
    .map_err(map_err)
}

/// The installed authorizer's verdict (see [`register`]).
pub fn bound_verdict(ctx: &AuthContext<'_>) -> Authorization {
    BOUND.with(|b| match b.borrow_mut().as_mut() {
        None => Authorization::Allow,
        Some(rules) => {
            let verdict = authorize(ctx, &rules.views);
            if verdict != Authorization::Allow {
                rules.denied = true;
            }
            verdict
        }
    })
}

/// The views `tables` read through (with their names) exist on `conn`
/// (created on first use; a transaction that rolls back takes a view made
/// inside it along, and the next query makes it again).
fn ensure_views(conn: &Connection, tables: &[(&Table, String)]) -> Result<()> {
    for (t, view) in tables {
        let present = conn
            .prepare_cached("SELECT 1 FROM temp.sqlite_master WHERE type = 'view' AND name = ?1")
            .and_then(|mut st| st.exists([view]))
            .map_err(map_err)?;
        if present {
            continue;
        }
        let cols: Vec<String> = t.columns.iter().map(|c| quote_ident(&c.name)).collect();
        let ddl = format!(
            "CREATE TEMP VIEW IF NOT EXISTS {} AS SELECT {} FROM main.{} WHERE \"_sync_partition\" = {PARTITION_FN}()",
            quote_ident(view),
            cols.join(", "),
            t.quoted,
        );
        conn.execute_batch(&ddl).map_err(map_err)?;
    }
    Ok(())
}

/// Everything that bounds one registered query on one connection; undone
/// on drop, whatever happened.
pub struct Bounded<'c> {
    conn: &'c Connection,
}

/// Makes the views of `tables` (the declared, materialized tables) when
/// missing, binds `partition` for them, and installs the authorizer and the
/// time limit.
/// `budget`: when given, the run stops (with [`super::OVER_BUDGET`]) after
/// that many thousand VM steps.
pub fn bound<'c>(
    conn: &'c Connection, partition: &str, tables: &[&Table], limit: Duration,
    closed: &Arc<AtomicBool>, budget: Option<u32>,
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
        })
    });
    let deadline = Instant::now() + limit;
    let closed = closed.clone();
    // Every 1000 VM steps: a few microseconds, and a clock read per call
    // costs nothing next to it.
    let mut left = budget;
    conn.progress_handler(
        1000,
        Some(move || {
            if closed.load(Ordering::Relaxed) || Instant::now() >= deadline {
                return true;
            }
            match left.as_mut() {
                Some(0) => {
                    // Runs on the thread stepping the query, which bound it.
                    BOUND.with(|b| {
                        if let Some(r) = b.borrow_mut().as_mut() {
                            r.over_budget = true;
                        }
                    });
                    true
                }
                Some(n) => {
                    *n -= 1;
                    false
                }
                None => false,
            }
        }),
    );
    Ok(Bounded { conn })
}

impl Drop for Bounded<'_> {
    fn drop(&mut self) {
        self.conn.progress_handler(0, None::<fn() -> bool>);
        BOUND.with(|b| *b.borrow_mut() = None);
        PARTITION.with(|p| *p.borrow_mut() = None);
    }
}

fn authorize(ctx: &AuthContext<'_>, views: &[(String, String)]) -> Authorization {
    match ctx.action {
        AuthAction::Select | AuthAction::Recursive => Authorization::Allow,
        AuthAction::Function { function_name } => allow(
            FUNCTIONS
                .iter()
                .chain(crate::query::WINDOW_FUNCTIONS)
                .any(|f| f.eq_ignore_ascii_case(function_name)),
        ),
        AuthAction::Read { table_name, .. } => {
            // No database: a CTE or subquery of the query itself.
            let Some(db) = ctx.database_name else {
                return Authorization::Allow;
            };
            if db.eq_ignore_ascii_case("main") {
                if TABLE_FUNCTIONS
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(table_name))
                {
                    return Authorization::Allow;
                }
                // An app table, only from inside its own view.
                let table = table_name.to_ascii_lowercase();
                allow(
                    views
                        .iter()
                        .any(|(t, v)| *t == table && ctx.accessor == Some(v.as_str())),
                )
            } else if db.eq_ignore_ascii_case("temp") {
                allow(views.iter().any(|(_, v)| v == table_name))
            } else {
                Authorization::Deny
            }
        }
        _ => Authorization::Deny,
    }
}

fn allow(yes: bool) -> Authorization {
    if yes {
        Authorization::Allow
    } else {
        Authorization::Deny
    }
}

impl Bounded<'_> {
    /// The coded error for a failure while the query compiled or ran.
    pub fn err(&self, e: rusqlite::Error, limit: Duration, closed: &AtomicBool) -> Error {
        let (denied, over_budget) = BOUND.with(|b| {
            b.borrow()
                .as_ref()
                .map_or((false, false), |r| (r.denied, r.over_budget))
        });
        if over_budget && !closed.load(Ordering::Relaxed) {
            return Error::plain(
                super::OVER_BUDGET,
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

fn query_err(e: rusqlite::Error, limit: Duration, closed: &AtomicBool) -> Error {
    match e.sqlite_error_code() {
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
            e => map_err(e),
        },
    }
}
