//! Every extended-protocol statement of the engine is built here, so that
//! whether it is prepared under a name is decided in one place; a result
//! is read row by row here (`next_row`), and simple-protocol text sent
//! (`exec`, `exec_text`).
//!
//! sqlx prepares a statement under a name (`sqlx_s_N`) and keeps it for the
//! connection's session. Behind a transaction pooler the next transaction
//! may run on another server session, where that name is missing (26000),
//! taken (42P05), or names another client's statement. Once any storage of
//! the process is opened with `pooling: 'transaction'`, every statement is
//! prepared unnamed instead: the unnamed statement lives until the next
//! one, and the engine sends it inside an explicit transaction, whose
//! server session the pooler does not change (`Config::begin`).
//!
//! The switch is per process, not per storage: the statement builders are
//! called deep inside the engine with a connection and no storage at hand.
//! A process that opens both kinds prepares unnamed statements for both,
//! which costs a direct connection one round trip per statement and is
//! never wrong.

use super::error::map_err;
use crate::core::error::Result;
use sqlx::postgres::{PgArguments, PgRow, Postgres};
use sqlx::query::{Query, QueryScalar};
use sqlx::{Executor, PgConnection, SqlSafeStr};
use std::sync::atomic::{AtomicBool, Ordering};

static UNNAMED: AtomicBool = AtomicBool::new(false);

/// From now on, statements are prepared unnamed (see the module comment).
pub fn use_unnamed() {
    UNNAMED.store(true, Ordering::Release);
}

/// Whether statements are named and kept on the session.
pub fn named() -> bool {
    !UNNAMED.load(Ordering::Acquire)
}

/// `sqlx::query`, named or unnamed as the process decided.
pub fn query<'a>(sql: impl SqlSafeStr) -> Query<'a, Postgres, PgArguments> {
    sqlx::query(sql).persistent(named())
}

/// `sqlx::query_scalar`, named or unnamed as the process decided.
pub fn query_scalar<'a, O>(sql: impl SqlSafeStr) -> QueryScalar<'a, Postgres, O, PgArguments>
where
    (O,): for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
{
    sqlx::query_scalar(sql).persistent(named())
}

/// The next row of a result read as it arrives (`Executor::fetch`), so
/// that each row is decoded while the server still produces the rest.
pub async fn next_row(
    rows: &mut futures_core::stream::BoxStream<'_, std::result::Result<PgRow, sqlx::Error>>,
) -> Result<Option<PgRow>> {
    std::future::poll_fn(|cx| rows.as_mut().poll_next(cx))
        .await
        .transpose()
        .map_err(map_err)
}

/// One simple-protocol statement (or several, `;`-separated).
pub(crate) async fn exec(c: &mut PgConnection, sql: &'static str) -> Result<()> {
    c.execute(sql).await.map_err(map_err)?;
    Ok(())
}

/// [`exec`] of a text made at run time (one simple-protocol message).
pub(crate) async fn exec_text(c: &mut PgConnection, sql: &str) -> Result<()> {
    c.execute(sqlx::AssertSqlSafe(sql.to_owned()))
        .await
        .map_err(map_err)?;
    Ok(())
}
