//! The pool: options, the per-connection `search_path`, the one-time meta
//! DDL, and mapping PostgreSQL errors.

use super::sql;
use crate::error::{Error, Result};
use crate::schema::quote_ident;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::Connection as _;
use sqlx::{AssertSqlSafe, Executor, PgPool};
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    pub url: String,
    pub max_connections: u32,
    /// Confines the storage to this schema (created when missing).
    pub schema: Option<String>,
    /// How long one registered query may run (`queryTimeoutMs`).
    pub query_timeout: Duration,
    /// The size bounds of one registered query's result.
    pub result_limits: crate::query::result::Limits,
    /// How long a call may wait for a connection (`connectTimeoutMs`):
    /// while the server is unreachable, each call fails with
    /// `PG_POOL_TIMEOUT` after this long, and connection attempts back off
    /// to at most a fifth of it, so the storage serves again within that
    /// of the server answering.
    pub connect_timeout: Duration,
}

/// `connectTimeoutMs` when not given: 5 s (so retries back off to 1 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Config {
    pub fn parse(
        url: &str, max_connections: Option<u32>, schema: Option<String>,
    ) -> Result<Config> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::invalid(format!(
                "invalid PostgreSQL url {url:?}: expected postgres://…"
            )));
        }
        let max_connections = max_connections.unwrap_or(10);
        if max_connections == 0 {
            return Err(Error::invalid("maxConnections must be at least 1"));
        }
        if let Some(s) = &schema {
            if s.is_empty() || s.len() > 63 {
                return Err(Error::invalid("schema must be 1..63 bytes"));
            }
        }
        Ok(Config {
            url: url.to_owned(),
            max_connections,
            schema,
            query_timeout: crate::query::DEFAULT_TIMEOUT,
            result_limits: Default::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }
}

/// The connect options of `cfg.url`, with an `application_name` that names
/// this storage (`tag`), after the one the URL gives if any: `close()`
/// finds the storage's running statements by it to cancel them.
pub fn connect_options(cfg: &Config, tag: &str) -> Result<PgConnectOptions> {
    let opts = PgConnectOptions::from_str(&cfg.url).map_err(map_err)?;
    let name = match opts.get_application_name() {
        Some(own) => format!("{own} {tag}"),
        None => tag.to_owned(),
    };
    // PostgreSQL keeps 63 bytes; the tag must survive, so cut the front.
    let mut cut = name.len().saturating_sub(63);
    while !name.is_char_boundary(cut) {
        cut += 1;
    }
    Ok(opts.application_name(&name[cut..]))
}

/// Cancels every statement a connection of this storage (`tag`) is running,
/// from a connection of its own; a role may cancel its own sessions. Best
/// effort and bounded: a server that does not answer within two seconds is
/// left to the statements' own time limits.
pub async fn cancel_running(cfg: &Config, tag: &str) {
    let Ok(opts) = connect_options(cfg, &format!("{tag} closing")) else {
        return;
    };
    let cancel = async {
        let mut c = sqlx::PgConnection::connect_with(&opts).await.ok()?;
        sqlx::query(
            "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity \
             WHERE application_name LIKE '%' || $1 AND state <> 'idle' AND pid <> pg_backend_pid()",
        )
        .bind(tag)
        .execute(&mut c)
        .await
        .ok()?;
        let _ = c.close().await;
        Some(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), cancel).await;
}

/// One connection made directly, before the pool exists: a server that
/// refuses, cannot be reached or rejects the login is reported now, with
/// host, port and reason, where the pool would retry until
/// `connect_timeout` and then say only `PG_POOL_TIMEOUT`.
async fn first_connection(opts: &PgConnectOptions, cfg: &Config) -> Result<sqlx::PgConnection> {
    let at = match opts.get_socket() {
        Some(socket) => format!("{}", socket.display()),
        None => format!("{}:{}", opts.get_host(), opts.get_port()),
    };
    match tokio::time::timeout(cfg.connect_timeout, sqlx::PgConnection::connect_with(opts)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(connect_error(e, &at)),
        Err(_) => Err(Error::Engine {
            code: "PG_CONNECT_TIMEOUT".into(),
            message: format!(
                "cannot connect to PostgreSQL at {at}: no answer within {} ms (connectTimeoutMs)",
                cfg.connect_timeout.as_millis()
            ),
        }),
    }
}

/// A failed connection attempt to `at`: refused (`PG_CONNECT_REFUSED`),
/// otherwise unreachable (`PG_CONNECT_FAILED`), or rejected by the server
/// (its SQLSTATE: `28P01` a wrong password, `28000` an unknown role,
/// `3D000` an unknown database), each with sqlx's cause in the message.
pub fn connect_error(e: sqlx::Error, at: &str) -> Error {
    match &e {
        sqlx::Error::Io(io) => Error::Engine {
            code: if io.kind() == std::io::ErrorKind::ConnectionRefused {
                "PG_CONNECT_REFUSED"
            } else {
                "PG_CONNECT_FAILED"
            }
            .into(),
            message: format!("cannot connect to PostgreSQL at {at}: {io}"),
        },
        sqlx::Error::Database(d) => Error::Engine {
            code: d
                .code()
                .map(|c| c.into_owned())
                .unwrap_or_else(|| "PG_ERROR".into()),
            message: format!(
                "PostgreSQL at {at} rejected the connection: {}",
                d.message()
            ),
        },
        _ => Error::Engine {
            code: "PG_CONNECT_FAILED".into(),
            message: format!("cannot connect to PostgreSQL at {at}: {e}"),
        },
    }
}

/// The storage's statements are index probes and range reads whose plan
/// does not depend on the values bound. Under PostgreSQL's default (`auto`)
/// a statement whose generic plan is estimated dearer than a custom one is
/// planned again at every execution: the commit window's page, whose
/// probe list (`unnest($7)`) a generic plan counts as 100 values, spent
/// 160 µs of its 650 planning each time. Registered queries, whose SQL is
/// the host's, set `auto` back for their own transaction
/// (`query::confine`).
pub const GENERIC_PLANS: &str = "SET plan_cache_mode = force_generic_plan";

pub async fn open(cfg: &Config, tag: &str) -> Result<PgPool> {
    let opts = connect_options(cfg, tag)?;
    // Closed at once: the pool opens its own (with the search_path set).
    let _ = first_connection(&opts, cfg).await?.close().await;
    // Every pooled connection: the storage's schema, and generic plans for
    // the storage's own statements (`GENERIC_PLANS`).
    let settings = match cfg.schema.as_deref() {
        Some(s) => format!("SET search_path TO {}; {GENERIC_PLANS}", quote_ident(s)),
        None => GENERIC_PLANS.to_owned(),
    };
    let pool = PgPoolOptions::new()
        .max_connections(cfg.max_connections)
        // sqlx retries a refused connect until this deadline, backing off
        // to at most a fifth of it (see `Config::connect_timeout`).
        .acquire_timeout(cfg.connect_timeout)
        // No ping before handing out a connection (sqlx's default costs one
        // round trip per acquire); a connection that died while idle fails
        // its next statement with a connection error (`PG_CONNECTION`) and
        // is then closed, never pooled again.
        .test_before_acquire(false)
        // No reaper task: a background task holding the pool would drop
        // connections during runtime shutdown at process exit.
        .idle_timeout(None)
        .max_lifetime(None)
        .after_connect(move |conn, _| {
            let settings = settings.clone();
            Box::pin(async move {
                // The lock batch's reads are prepared in the same round
                // trip. `after_lock::prepare` fails only where a `DO` block
                // cannot run (no plpgsql); the batch then sends them whole.
                let text = format!("{settings}; {}", super::after_lock::prepare());
                if sqlx::raw_sql(AssertSqlSafe(text))
                    .execute(&mut *conn)
                    .await
                    .is_err()
                {
                    conn.execute(AssertSqlSafe(settings)).await?;
                }
                Ok(())
            })
        })
        .connect_lazy_with(opts);
    let mut conn = pool.acquire().await.map_err(map_err)?;
    ensure_meta(&mut conn, cfg.schema.as_deref()).await?;
    // This connection may predate the tables `ensure_meta` made. A failure
    // (no plpgsql) only leaves the lock batch sending its reads whole.
    let _ = sqlx::raw_sql(AssertSqlSafe(super::after_lock::prepare()))
        .execute(&mut *conn)
        .await;
    drop(conn);
    Ok(pool)
}

/// Creates the schema and the meta layout when anything is missing, under
/// a transaction-scoped advisory lock so concurrent first uses do not race
/// on `CREATE … IF NOT EXISTS`.
async fn ensure_meta(conn: &mut sqlx::PgConnection, schema: Option<&str>) -> Result<()> {
    let present: i64 = sqlx::query_scalar(sql::COUNT_META_OBJECTS)
        .bind(sql::META_OBJECTS)
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
    if present as usize == sql::META_OBJECTS.len() {
        return Ok(());
    }
    conn.execute("BEGIN").await.map_err(map_err)?;
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
        for stmt in sql::META_DDL
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            conn.execute(AssertSqlSafe(stmt)).await.map_err(map_err)?;
        }
        let quoted: Option<String> = sqlx::query_scalar("SELECT quote_ident(current_schema())")
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
        Ok(()) => {
            conn.execute("COMMIT").await.map_err(map_err)?;
            Ok(())
        }
        Err(e) => {
            let _ = conn.execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// The code of an error that ended the connection (it is closed, never
/// pooled again).
pub const CONNECTION_LOST: &str = "PG_CONNECTION";

/// True for an error that says the connection is gone (it died while idle,
/// the server restarted or ended the session), not that the statement
/// failed: the call may run again on another connection.
pub fn is_connection_lost(e: &Error) -> bool {
    match e.primary() {
        Error::Engine { code, .. } => {
            code == CONNECTION_LOST
                || code.starts_with("08")
                || matches!(code.as_str(), "57P01" | "57P02" | "57P03")
        }
        _ => false,
    }
}

/// The SQLSTATE of a database error.
pub fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// Integrity constraint violations (class 23).
pub fn is_constraint(e: &sqlx::Error) -> bool {
    sqlstate(e).is_some_and(|c| c.starts_with("23"))
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

/// Raw engine errors keep PostgreSQL's message (the fence function's text
/// is the message) and carry the SQLSTATE as their code.
pub fn map_err(e: sqlx::Error) -> Error {
    match &e {
        // PostgreSQL text cannot hold U+0000 (22021) and refuses
        // characters its encoding lacks (22P05): the caller's value is the
        // problem, whichever statement met it.
        sqlx::Error::Database(d)
            if matches!(d.code().as_deref(), Some("22021" | "22P05")) =>
        {
            Error::invalid(format!(
                "a text value cannot be stored in PostgreSQL: {} (U+0000 is not allowed in PostgreSQL text)",
                d.message()
            ))
        }
        sqlx::Error::Database(d) => Error::Engine {
            code: d
                .code()
                .map(|c| c.into_owned())
                .unwrap_or_else(|| "PG_ERROR".into()),
            message: d.message().to_owned(),
        },
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => Error::plain(
            "ERR_SYNCULAR_CORRUPT_VALUE",
            format!("unexpected stored value: {e}"),
        ),
        sqlx::Error::PoolTimedOut => Error::Engine {
            code: "PG_POOL_TIMEOUT".into(),
            message: e.to_string(),
        },
        sqlx::Error::PoolClosed => Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed"),
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => Error::Engine {
            code: CONNECTION_LOST.into(),
            message: format!("the connection to PostgreSQL failed: {e}"),
        },
        _ => Error::Engine {
            code: "PG_ERROR".into(),
            message: e.to_string(),
        },
    }
}

/// A constraint error raised by a row write, for push rejection; a data
/// error (class 22: a value the column type cannot hold) is the payload's
/// fault, a `DecodeError` as the codec's own checks give on SQLite.
pub fn row_write_err(e: sqlx::Error, op_index: Option<u32>) -> Error {
    if let Some(code) = sqlstate(&e).filter(|c| c.starts_with("22")) {
        let message = match &e {
            sqlx::Error::Database(d) => d.message().to_owned(),
            _ => e.to_string(),
        };
        let at = op_index.map_or(String::new(), |i| format!(" (operation {i})"));
        return Error::Decode(format!(
            "row value cannot be stored in PostgreSQL{at}: {message} [SQLSTATE {code}]"
        ));
    }
    if is_constraint(&e) {
        let cause = match &e {
            sqlx::Error::Database(d) => d.message().to_owned(),
            _ => e.to_string(),
        };
        Error::Constraint { op_index, cause }
    } else {
        map_err(e)
    }
}
