//! Registered authoritative queries (storage-layout §13), engine-neutral:
//! the tokenizer, the partition rewrite of both request forms, the
//! security checks, and bind flattening. Nothing here executes SQL; an
//! engine runs [`Prepared::sql`] with [`Prepared::binds`].
//!
//! Security: a registered query may read only partition-filtered
//! projections of the schema tables it declares. Besides the upstream
//! checks, the rewrite refuses (with `ERR_SYNCULAR_QUERY_REFUSED`) anything
//! that is not one read-only `SELECT`/`WITH … SELECT`, any relation that
//! names an internal table (`sync_*`, `_sync*`, `sqlite_*`), a
//! database-qualified relation, and any relation naming a schema table
//! (bare, quoted, or in another letter case) that the rewrite does not
//! replace.

mod dialect;
pub mod lex;
pub mod result;
mod rewrite;
#[cfg(test)]
mod tests;

pub use dialect::{count_params, dollar_params};
pub use rewrite::{prepare, prepare_for, view_name, Bind, Prepared, Relation, Request, Target};

/// A value bound into a registered query (`AuthoritativeQueryValue`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    /// A JS `undefined` in `params`: refused when the SQL references it.
    Undefined,
}

impl Value {
    /// A JS number: integral values within 2^53 bind as INTEGER, others as
    /// REAL.
    pub fn from_f64(v: f64) -> Value {
        if v.is_finite()
            && v.fract() == 0.0
            && v.abs() <= crate::core::model::MAX_SAFE_INTEGER as f64
        {
            Value::Integer(v as i64)
        } else {
            Value::Real(v)
        }
    }
}

/// Plain-`Error` code of plan and metadata problems (messages as upstream).
pub const PLAN_ERROR: &str = "ERR_SYNCULAR_QUERY_PLAN";
/// Code of the security refusals this package adds.
pub const REFUSED: &str = "ERR_SYNCULAR_QUERY_REFUSED";
/// Code of a registered query stopped at its time limit.
pub const TIMEOUT: &str = "ERR_SYNCULAR_QUERY_TIMEOUT";
/// `queryTimeoutMs` when the host gives none: far above any point or page
/// query, short enough that a runaway one frees its connection soon.
/// The SQL standard's window functions, which both engines' registered
/// queries may call (each engine adds its own allowlist).
pub const WINDOW_FUNCTIONS: &[&str] = &[
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
];

pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub fn timed_out(limit: std::time::Duration) -> crate::core::error::Error {
    crate::core::error::Error::plain(
        TIMEOUT,
        format!(
            "registered query exceeded its time limit of {} ms (queryTimeoutMs)",
            limit.as_millis()
        ),
    )
}

pub const MSG_NO_SCHEMA: &str = "ensureSchema(schema) must run before registered queries";

/// The schema an engine last ensured; registered queries refuse to run
/// before `ensureSchema` (either engine's loaded-schema slot).
pub fn ensured<S>(
    slot: &crate::core::schema::Ensured<S>,
) -> crate::core::error::Result<std::sync::Arc<crate::core::schema::Loaded<S>>> {
    slot.current()
        .ok_or_else(|| crate::core::error::Error::plain("ERR_SYNCULAR_NO_SCHEMA", MSG_NO_SCHEMA))
}
pub const MSG_ONE_SELECT: &str = "registered query must be one SELECT";

/// Names starting with this (any letter case) are the engines' own (the
/// partition views): a registered query may not write it anywhere in its
/// text, so nothing it defines (a CTE, an alias) can pose as one of them.
/// (Upstream's own names, such as the host's `_syncular_registered_query`
/// wrapper alias, do not start with it.)
pub const RESERVED_PREFIX: &str = "_syncular_q_";

/// The longest registered query text, in bytes (64 KiB): the checks and
/// parsers that run before any time limit applies stay bounded.
pub const MAX_TEXT: usize = 64 << 10;
pub const MSG_PLAN_REQUIRED: &str =
    "registered query requires generated relation plans; regenerate queries";
pub const MSG_BOUNDARIES: &str =
    "registered query relation boundaries do not match its SQL; regenerate queries";
pub const MSG_TABLES: &str = "registered query table metadata does not match its SQL";
pub const MSG_NAME: &str =
    "registered query relation name does not match its SQL; regenerate queries";
pub const MSG_UNKNOWN: &str = "registered query targets an unknown table";
pub const MSG_NOT_MATERIALIZED: &str = "registered query targets a non-materialized table";
pub const MSG_BINDS: &str = "registered query bind metadata does not match its SQL";
