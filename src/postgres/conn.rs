//! Connecting: the connect options (an `application_name` that names the
//! storage), the first connection's checks (the server answers; no
//! undeclared transaction pooler), the pool and what each of its
//! connections sets, and cancelling the storage's statements at close.

use super::config::{Config, Pooling};
use super::error::{connect_error, map_err, MOVED, POOLER};
use super::meta_setup::{build_row_scopes_index, ddl_race, ensure_meta, retry_ddl_race};
use crate::core::error::{Error, Result};
use crate::core::schema::quote_ident;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Connection as _;
use sqlx::{AssertSqlSafe, Executor, PgPool};
use std::str::FromStr;
use std::time::Duration;

/// The connect options of `cfg.url`, with an `application_name` that names
/// this storage (`tag`), after the one the URL gives if any: `close()`
/// finds the storage's running statements by it to cancel them.
///
/// No `extra_float_digits` startup parameter (sqlx sends one by default):
/// PgBouncer refuses parameters it does not track unless an operator lists
/// them in `ignore_startup_parameters`, and PostgreSQL 12 and later print
/// floats exactly at the default. In transaction pooling, no statement
/// cache either (see [`super::stmt`]).
pub fn connect_options(cfg: &Config, tag: &str) -> Result<PgConnectOptions> {
    let mut opts = PgConnectOptions::from_str(&cfg.url)
        .map_err(map_err)?
        .extra_float_digits(None);
    if cfg.pooling == Pooling::Transaction {
        opts = opts.statement_cache_capacity(0);
    }
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
        // One simple-protocol statement: through a transaction pooler a
        // prepared one could bind on another server session.
        let text = format!(
            "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity \
             WHERE application_name LIKE '%' || {} AND state <> 'idle' AND pid <> pg_backend_pid()",
            super::quote::lit(tag)?
        );
        c.execute(AssertSqlSafe(text)).await.ok()?;
        let _ = c.close().await;
        Some(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), cancel).await;
}

fn cfg_at(opts: &PgConnectOptions) -> String {
    match opts.get_socket() {
        Some(socket) => format!("{}", socket.display()),
        None => format!("{}:{}", opts.get_host(), opts.get_port()),
    }
}

/// Whether `a`'s server session changes between its transactions, which
/// only a pooler in transaction mode does: then the named statements of
/// the default mode would meet other clients' sessions, where a name can
/// stand for another client's statement. Checked once at open, with the
/// session state a pool connection has (`settings`: RDS Proxy pins a
/// connection that has it, and is then safe): `a` reads its backend, a
/// second connection holds a transaction open (a transaction pooler hands
/// it the server `a` just released), and `a` reads its backend again.
/// Directly or in session mode `a` keeps its backend. A check that cannot
/// run or finish (the second connection refused, a pool of one server
/// session that makes `a` wait) finds nothing: a safety net, not proof.
async fn session_moves(
    a: &mut sqlx::PgConnection, opts: &PgConnectOptions, settings: &str,
) -> bool {
    async fn pid(c: &mut sqlx::PgConnection) -> Option<i32> {
        // Simple protocol: one message, whatever session it reaches.
        let row = c.fetch_one("SELECT pg_backend_pid()").await.ok()?;
        sqlx::Row::try_get::<i32, _>(&row, 0).ok()
    }
    let check = async {
        a.execute(AssertSqlSafe(settings.to_owned())).await.ok()?;
        let before = pid(a).await?;
        let mut b = sqlx::PgConnection::connect_with(opts).await.ok()?;
        b.execute("BEGIN").await.ok()?;
        let held = pid(&mut b).await;
        let after = tokio::time::timeout(Duration::from_secs(2), pid(a)).await;
        let _ = b.execute("ROLLBACK").await;
        let _ = b.close().await;
        // A read still waiting after 2 s (a pool of one server session,
        // or a slow server) proves nothing.
        let after = after.ok()??;
        Some(after != before || held == Some(before))
    };
    tokio::time::timeout(Duration::from_secs(5), check)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// One connection made directly, before the pool exists: a server that
/// refuses, cannot be reached or rejects the login is reported now, with
/// host, port and reason, where the pool would retry until
/// `connect_timeout` and then say only `PG_POOL_TIMEOUT`.
async fn first_connection(opts: &PgConnectOptions, cfg: &Config) -> Result<sqlx::PgConnection> {
    let at = cfg_at(opts);
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

/// The storage's statements are index probes and range reads whose plan
/// does not depend on the values bound. Under PostgreSQL's default (`auto`)
/// a statement whose generic plan is estimated dearer than a custom one is
/// planned again at every execution: the commit window's page, whose
/// probe list (`unnest($7)`) a generic plan counts as 100 values, spent
/// 160 µs of its 650 planning each time. Registered queries, whose SQL is
/// the host's, set `auto` back for their own transaction
/// (`query::confine`).
pub const GENERIC_PLANS: &str = "SET plan_cache_mode = force_generic_plan";

/// String literals read as the SQL standard says (backslash is an ordinary
/// character), whatever a role's or database's default says.
pub const CONFORMING: &str = "SET standard_conforming_strings = on";

/// Opens the pool. `prepare`: text run on each session connection (and
/// once more after the meta layout is made) that prepares statements for
/// the layers above; it must not fail where it cannot apply, and a failure
/// only leaves them unprepared (the caller passes the lock batch's,
/// `tx::lock_reads::prepare`).
pub async fn open(cfg: &Config, tag: &str, prepare: String) -> Result<PgPool> {
    let opts = connect_options(cfg, tag)?;
    // Every pooled connection: the storage's schema, and generic plans for
    // the storage's own statements (`GENERIC_PLANS`).
    // Under transaction pooling nothing is set on a session: each
    // transaction sets its own (`Config::begin`), and unnamed statements
    // get a plan of their own anyway.
    let pooled = cfg.pooling == Pooling::Transaction;
    // And `standard_conforming_strings` on, as the registered-query guard
    // reads SQL: a simple-protocol message is tokenized whole before any
    // `SET LOCAL` in it runs, so the one-message registered query
    // (`query::one_message`) is read under the session's own setting. Its
    // text reads the same either way (the guard's printer and the engine's
    // literals write backslash strings as E''); this keeps it so.
    let settings = match cfg.schema.as_deref() {
        Some(s) => format!(
            "SET search_path TO {}; {GENERIC_PLANS}; {CONFORMING}",
            quote_ident(s)
        ),
        None => format!("{GENERIC_PLANS}; {CONFORMING}"),
    };
    // Closed once checked: the pool opens its own (with the search_path set).
    let mut first = first_connection(&opts, cfg).await?;
    let moves = !pooled && session_moves(&mut first, &opts, &settings).await;
    let _ = first.close().await;
    if moves {
        return Err(Error::plain(
            POOLER,
            format!("PostgreSQL at {}: {MOVED}", cfg_at(&opts)),
        ));
    }
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
        .after_connect({
            let prepare = prepare.clone();
            move |conn, _| {
                let settings = settings.clone();
                let prepare = prepare.clone();
                Box::pin(async move {
                    if pooled {
                        return Ok(());
                    }
                    // The caller's statements are prepared in the same round
                    // trip. `prepare` fails only where a `DO` block
                    // cannot run (no plpgsql); the batch then sends them whole.
                    let text = format!("{settings}; {prepare}");
                    if sqlx::raw_sql(AssertSqlSafe(text))
                        .execute(&mut *conn)
                        .await
                        .is_err()
                    {
                        conn.execute(AssertSqlSafe(settings)).await?;
                    }
                    Ok(())
                })
            }
        })
        .connect_lazy_with(opts);
    let mut conn = pool.acquire().await.map_err(map_err)?;
    if pooled {
        // All in one transaction: outside one, the pooler may hand the
        // next statement to another server session.
        // A connection whose ROLLBACK failed is closed, never retried on.
        let broken = std::sync::atomic::AtomicBool::new(false);
        retry_ddl_race!(
            |e| !broken.load(std::sync::atomic::Ordering::Relaxed) && ddl_race(e),
            async {
                conn.execute(AssertSqlSafe(cfg.begin.clone()))
                    .await
                    .map_err(map_err)?;
                match ensure_meta(&mut conn, cfg.schema.as_deref(), true).await {
                    Ok(()) => conn.execute("COMMIT").await.map(drop).map_err(map_err),
                    Err(e) => {
                        if conn.execute("ROLLBACK").await.is_err() {
                            conn.close_on_drop();
                            broken.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e)
                    }
                }
            }
            .await
        )?;
        return Ok(pool);
    }
    retry_ddl_race!(
        ddl_race,
        ensure_meta(&mut conn, cfg.schema.as_deref(), false).await
    )?;
    build_row_scopes_index(&mut conn).await?;
    // This connection may predate the tables `ensure_meta` made. A failure
    // (no plpgsql) only leaves the lock batch sending its reads whole.
    let _ = sqlx::raw_sql(AssertSqlSafe(prepare))
        .execute(&mut *conn)
        .await;
    drop(conn);
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_startup_parameter_a_pooler_refuses() {
        let cfg =
            Config::parse("postgres://u@h/db", None, None, Some(Pooling::Transaction)).unwrap();
        let opts = connect_options(&cfg, "tag").unwrap();
        assert!(!format!("{opts:?}").contains("extra_float_digits: Some"));
    }
}
