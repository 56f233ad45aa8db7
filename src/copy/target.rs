//! The PostgreSQL side of a copy: the connection the bulk load and
//! `verify` run on (in the storage's schema), the refusal of a target that
//! already holds sync data, and the meta layout, made by the PostgreSQL
//! engine itself so it is exactly what a host's first use makes.

use super::catalog::Table;
use super::Options;
use crate::core::error::{Error, Result};
use crate::core::schema::quote_ident;
use crate::postgres::{Config, PgEngine};
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use std::str::FromStr;

/// PostgreSQL's errors as engine errors carrying the SQLSTATE.
pub fn pg(e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(d) => Error::Engine {
            code: d.code().map(|c| c.into_owned()).unwrap_or_default(),
            message: d.message().to_owned(),
        },
        _ => Error::Engine {
            code: "PG_CONNECTION".to_owned(),
            message: e.to_string(),
        },
    }
}

/// The target's configuration, as the storage's own options would make it.
pub fn config(o: &Options) -> Result<Config> {
    if !crate::open::is_postgres_url(&o.target) {
        return Err(super::unsupported(
            "the target of a copy from SQLite must be a PostgreSQL url (postgres://…): copying SQLite to SQLite is not supported (storage.backup(path) makes a copy of the file)",
        ));
    }
    Config::parse(&o.target, Some(2), o.schema.clone(), None)
}

/// A connection of the copy's own, its search path on the storage's schema.
pub async fn connect(cfg: &Config) -> Result<PgConnection> {
    let opts = PgConnectOptions::from_str(&cfg.url)
        .map_err(pg)?
        .application_name("syncular-native-storage copy");
    let mut c = PgConnection::connect_with(&opts).await.map_err(pg)?;
    if let Some(s) = &cfg.schema {
        c.execute(AssertSqlSafe(format!(
            "SET search_path TO {}",
            quote_ident(s)
        )))
        .await
        .map_err(pg)?;
    }
    Ok(c)
}

/// Whether relation `name` exists in the current schema.
pub async fn exists(c: &mut PgConnection, name: &str) -> Result<bool> {
    sqlx::query_scalar::<_, bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace \
         WHERE n.nspname = current_schema() AND t.relname = $1)",
    )
    .bind(name)
    .fetch_one(&mut *c)
    .await
    .map_err(pg)
}

/// Refuses a target holding sync data: a row in any meta table, or a
/// relation named like one of the source's row tables.
pub async fn refuse_non_empty(c: &mut PgConnection, plan: &[Table]) -> Result<()> {
    for t in plan {
        if !exists(c, &t.name).await? {
            continue;
        }
        let holds = if t.row.is_some() {
            true
        } else {
            sqlx::query_scalar::<_, bool>(AssertSqlSafe(format!(
                "SELECT EXISTS (SELECT 1 FROM {})",
                t.quoted()
            )))
            .fetch_one(&mut *c)
            .await
            .map_err(pg)?
        };
        if holds {
            let what = if t.row.is_some() {
                format!("a table named {:?} (a row table of the source)", t.name)
            } else {
                format!("rows in {}", t.name)
            };
            return Err(Error::plain(
                "ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY",
                format!(
                    "the target already holds sync data ({what}): copy into an empty database or schema, or compare the two with verify"
                ),
            ));
        }
    }
    Ok(())
}

/// Makes the meta layout the way a host's first use does: the engine's
/// first connection creates the schema, the meta tables and indexes, and
/// the writer fence.
pub async fn make_meta(cfg: &Config) -> Result<()> {
    let engine = PgEngine::new(cfg.clone());
    let made = engine.ping().await;
    engine.close().await;
    made.map(drop)
}

/// Where a copy stands on the target, committed with each step (the
/// snapshot, every pass): `resume` continues from it after an
/// interruption. The in-tree storages never name it.
const PROGRESS_DDL: &str = "CREATE TABLE IF NOT EXISTS sync_native_copy_progress (\
    id INTEGER PRIMARY KEY CHECK (id = 1), phase TEXT NOT NULL, positions TEXT NOT NULL, \
    updated_at_ms BIGINT NOT NULL)";

/// Records `positions` after `phase`, in the caller's open transaction.
pub async fn record(
    c: &mut PgConnection, phase: &str, positions: &serde_json::Value,
) -> Result<()> {
    c.execute(PROGRESS_DDL).await.map_err(pg)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    sqlx::query(
        "INSERT INTO sync_native_copy_progress (id, phase, positions, updated_at_ms) VALUES (1, $1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET phase = EXCLUDED.phase, positions = EXCLUDED.positions, updated_at_ms = EXCLUDED.updated_at_ms",
    )
    .bind(phase)
    .bind(positions.to_string())
    .bind(now)
    .execute(&mut *c)
    .await
    .map_err(pg)?;
    Ok(())
}

/// [`record`] as SQL text, for a pass's batch.
pub fn record_sql(phase: &str, positions: &serde_json::Value) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let (mut ph, mut pos) = (String::new(), String::new());
    super::value::quote(&mut ph, phase);
    super::value::quote(&mut pos, &positions.to_string());
    format!(
        "{PROGRESS_DDL}; INSERT INTO sync_native_copy_progress (id, phase, positions, updated_at_ms) VALUES (1, {ph}, {pos}, {now}) \
         ON CONFLICT (id) DO UPDATE SET phase = EXCLUDED.phase, positions = EXCLUDED.positions, updated_at_ms = EXCLUDED.updated_at_ms"
    )
}

/// The positions the last committed step recorded, if any.
pub async fn recorded(c: &mut PgConnection) -> Result<Option<String>> {
    if !exists(c, "sync_native_copy_progress").await? {
        return Ok(None);
    }
    sqlx::query_scalar::<_, String>("SELECT positions FROM sync_native_copy_progress WHERE id = 1")
        .fetch_optional(&mut *c)
        .await
        .map_err(pg)
}
