//! What bounds a registered query on PostgreSQL besides the guard's
//! allowlist: the size of its result, checked by the server row by row
//! before a row is sent, and the refusal function the cost checks of
//! [`super::cost`] call.
//!
//! The guarded text runs inside a wrapper of this module's own:
//!
//! ```sql
//! SELECT * FROM (<guarded>) AS "_syncular_q_result"
//! WHERE CASE WHEN pg_column_size("_syncular_q_result") <= <maxResultBytes> THEN true
//!            ELSE pg_temp._syncular_q_refuse(…) END
//! LIMIT <maxResultRows + 1>
//! ```
//!
//! so the server stops after one row more than the result may hold, and
//! refuses a row larger than the whole result may be (a row's size as a
//! composite value: every value decompressed). The wrapper's subquery keeps
//! the query's own order (PostgreSQL scans a subquery's output in order
//! when the outer query neither joins, groups nor sorts). Rows are counted
//! again as they arrive (`super::run`), in the same units as SQLite's.

use crate::core::error::Error;
use crate::core::query::result::{self, Limits};

/// The alias of the wrapped query.
const RESULT: &str = "\"_syncular_q_result\"";

/// SQLSTATE of a row refused for its size (raised by [`REFUSE_DDL`]).
pub const ROW_TOO_LARGE: &str = "SYR01";
/// SQLSTATE of a call refused for what it would cost ([`super::cost`]).
pub const TOO_COSTLY: &str = "SYC01";

/// The function the wrapper and the cost checks call when a bound is
/// exceeded: raises `code` with a message naming what and the bound.
/// IMMUTABLE (with constant arguments it raises while the query is planned,
/// which is when the call it guards would have been folded) and PARALLEL
/// SAFE, so it changes no plan. Created with the views, in `pg_temp`: it
/// belongs to the session.
pub const REFUSE_DDL: &str = "CREATE OR REPLACE FUNCTION pg_temp._syncular_q_refuse(code text, what text, cost bigint, bound bigint) \
     RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS \
     $syncular$BEGIN RAISE EXCEPTION USING ERRCODE = code, MESSAGE = format('%s: %s, past %s', what, cost, bound); END$syncular$;";

/// The call of the refusal function, as SQL text.
pub fn refuse_call(code: &str, what: &str, cost: &str, bound: u64) -> String {
    format!("pg_temp._syncular_q_refuse('{code}', '{what}', {cost}, {bound})")
}

/// `guarded` inside the result wrapper (see the module doc).
pub fn wrap(guarded: &str, limits: Limits) -> String {
    let size = format!("pg_catalog.pg_column_size({RESULT})");
    let bytes = limits.bytes;
    format!(
        "SELECT * FROM ({guarded}) AS {RESULT} WHERE CASE WHEN {size} <= {bytes} THEN true ELSE {} END LIMIT {}",
        refuse_call(ROW_TOO_LARGE, "a result row of bytes", &size, bytes),
        limits.rows.saturating_add(1),
    )
}

/// The coded error for one of this module's SQLSTATEs, if `code` is one.
pub fn coded(code: &str, message: &str, limits: Limits) -> Option<Error> {
    match code {
        ROW_TOO_LARGE => Some(result::too_many_bytes(limits.bytes)),
        TOO_COSTLY => Some(Error::plain(
            crate::core::query::REFUSED,
            format!("registered query refused: {message} (the work bound of one call; see README, Registered queries: bounds)"),
        )),
        _ => None,
    }
}
