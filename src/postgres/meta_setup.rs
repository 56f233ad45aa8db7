//! The meta layout at first use: the storage's schema and meta tables made
//! under an advisory lock, the index this storage adds to the in-tree
//! `sync_row_scopes` built concurrently, and the retry of DDL that met
//! another session creating the same object.

use super::error::map_err;
use super::sql;
use crate::core::error::{Error, Result};
use crate::core::schema::quote_ident;
use sqlx::{AssertSqlSafe, Executor};

/// Where `sync_row_scopes` and its added index stand.
#[derive(Debug, PartialEq, Eq)]
enum RowScopesIndex {
    /// No `sync_row_scopes` table yet: the meta DDL makes both.
    Missing,
    /// The table, without a usable index (none, or one a concurrent build
    /// left invalid when it was interrupted).
    Needed {
        invalid: bool,
    },
    Built,
}

async fn row_scopes_index(conn: &mut sqlx::PgConnection) -> Result<RowScopesIndex> {
    let row = super::stmt::query(
        "SELECT to_regclass('sync_row_scopes') IS NOT NULL,
                (SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass('sync_row_scopes_by_row'))",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(map_err)?;
    let table: bool = sqlx::Row::try_get(&row, 0).map_err(map_err)?;
    let valid: Option<bool> = sqlx::Row::try_get(&row, 1).map_err(map_err)?;
    Ok(match (table, valid) {
        (false, _) => RowScopesIndex::Missing,
        (true, Some(true)) => RowScopesIndex::Built,
        (true, Some(false)) => RowScopesIndex::Needed { invalid: true },
        (true, None) => RowScopesIndex::Needed { invalid: false },
    })
}

/// Builds `sync_row_scopes_by_row` on an existing `sync_row_scopes` with
/// `CREATE INDEX CONCURRENTLY`, which lets writers go on (issue 48). One
/// process builds at a time, under a session advisory lock; the others go
/// on without waiting (the index only speeds up deleting a row's scopes).
/// A build interrupted earlier left an invalid index: the lock holder
/// drops it and builds again, so the step resumes on the next start.
pub async fn build_row_scopes_index(conn: &mut sqlx::PgConnection) -> Result<()> {
    let RowScopesIndex::Needed { .. } = row_scopes_index(conn).await? else {
        return Ok(());
    };
    const LOCK: &str = "7079567413725542662";
    let got: bool = super::stmt::query_scalar(AssertSqlSafe(format!(
        "SELECT pg_try_advisory_lock({LOCK})"
    )))
    .fetch_one(&mut *conn)
    .await
    .map_err(map_err)?;
    if !got {
        return Ok(());
    }
    let built = async {
        // Read again under the lock: another process may have finished.
        if let RowScopesIndex::Needed { invalid } = row_scopes_index(conn).await? {
            if invalid {
                conn.execute("DROP INDEX CONCURRENTLY IF EXISTS sync_row_scopes_by_row")
                    .await
                    .map_err(map_err)?;
            }
            conn.execute(AssertSqlSafe(sql::row_scopes_by_row_concurrently()))
                .await
                .map_err(map_err)?;
        }
        Ok::<(), Error>(())
    }
    .await;
    let _ = conn
        .execute(AssertSqlSafe(format!("SELECT pg_advisory_unlock({LOCK})")))
        .await;
    built
}

/// How often a first use retries its DDL after another session created the
/// same object at the same instant ([`ddl_race`]), and the pause before
/// the first retry (longer before each next one).
pub const DDL_RETRIES: u32 = 5;
pub const DDL_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// Whether `e` is what PostgreSQL answers a `CREATE … IF NOT EXISTS` that
/// met another session creating the same object at the same instant: a
/// unique violation in the catalog (`pg_type_typname_nsp_index`,
/// `pg_namespace_nspname_index`) or the duplicate-object codes. The
/// storage's own first uses take an advisory lock and never meet here; an
/// in-tree host starting beside it does not take it (issue 48: 3 of 3
/// simultaneous starts failed). Retrying then finds the object made.
pub fn ddl_race(e: &Error) -> bool {
    matches!(e.primary(), Error::Engine { code, .. }
        if matches!(code.as_str(), "23505" | "42P07" | "42710" | "42P06"))
}

/// Evaluates `$attempt` (one awaited try) again, up to [`DDL_RETRIES`]
/// times with growing pauses, while it fails with an error `$retry`
/// admits (a [`ddl_race`]). A macro: an async closure's future is not
/// `Send` for every lifetime it borrows, which the engine's futures must be.
macro_rules! retry_ddl_race {
    ($retry:expr, $attempt:expr) => {{
        let mut tries = 0;
        loop {
            match $attempt {
                Err(e) if tries < $crate::postgres::meta_setup::DDL_RETRIES && ($retry)(&e) => {
                    tries += 1;
                    tokio::time::sleep($crate::postgres::meta_setup::DDL_PAUSE * tries).await;
                }
                other => break other,
            }
        }
    }};
}
pub(crate) use retry_ddl_race;

/// Creates the schema and the meta layout when anything is missing, under
/// a transaction-scoped advisory lock so concurrent first uses do not race
/// on `CREATE … IF NOT EXISTS`. `in_tx`: the caller's transaction is open
/// (transaction pooling), and commits or rolls back what this does.
pub async fn ensure_meta(
    conn: &mut sqlx::PgConnection, schema: Option<&str>, in_tx: bool,
) -> Result<()> {
    let objects = sql::meta_objects();
    let present: i64 = super::stmt::query_scalar(sql::COUNT_META_OBJECTS)
        .bind(objects)
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
    if present as usize == objects.len() {
        return Ok(());
    }
    // On a database the in-tree storage wrote, `sync_row_scopes` exists
    // without the index this storage adds: building it in this transaction
    // would hold writes to the table (the in-tree hosts' too, in a rolling
    // deploy) for the whole build. Outside a pooler it is built after,
    // concurrently (`build_row_scopes_index`); in a transaction pooler's
    // single transaction it stays here.
    let defer_index = !in_tx && row_scopes_index(conn).await? != RowScopesIndex::Missing;
    if !in_tx {
        conn.execute("BEGIN").await.map_err(map_err)?;
    }
    let run = async {
        conn.execute("SELECT pg_advisory_xact_lock(7079567413725542661)")
            .await
            .map_err(map_err)?;
        if let Some(s) = schema {
            conn.execute(AssertSqlSafe(format!(
                "CREATE SCHEMA IF NOT EXISTS {}",
                quote_ident(s)
            )))
            .await
            .map_err(map_err)?;
        }
        for stmt in sql::meta_ddl(!defer_index) {
            conn.execute(AssertSqlSafe(stmt)).await.map_err(map_err)?;
        }
        let quoted: Option<String> =
            super::stmt::query_scalar("SELECT quote_ident(current_schema())")
                .fetch_one(&mut *conn)
                .await
                .map_err(map_err)?;
        let quoted = quoted.ok_or_else(|| {
            Error::plain(
                "ERR_SYNCULAR_NO_SCHEMA",
                "the connection has no current schema (search_path names none that exists)",
            )
        })?;
        for stmt in sql::fence_ddl(&quoted) {
            conn.execute(AssertSqlSafe(stmt)).await.map_err(map_err)?;
        }
        Ok::<(), Error>(())
    };
    match run.await {
        Ok(()) if in_tx => Ok(()),
        Ok(()) => {
            conn.execute("COMMIT").await.map_err(map_err)?;
            Ok(())
        }
        Err(e) => {
            if !in_tx {
                let _ = conn.execute("ROLLBACK").await;
            }
            Err(e)
        }
    }
}
