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
    /// What sits between the storage and the server (`pooling`).
    pub pooling: Pooling,
    /// The text that opens a transaction: `BEGIN`, and under transaction
    /// pooling with a `schema` the `search_path` for that transaction
    /// (a session `SET` would stay with a server session another client
    /// gets next).
    pub begin: String,
    /// `SET LOCAL search_path TO <schema>; ` under transaction pooling with
    /// a `schema`, else empty: what [`Config::begin`] adds to `BEGIN`, for
    /// transactions that open themselves (registered queries).
    pub local_schema: String,
}

/// How the storage's connections reach PostgreSQL (`pooling`; docs/poolers.md).
///
/// A connection pooler in transaction mode (PgBouncer's `pool_mode =
/// transaction`, Supavisor on port 6543, Neon's `-pooler` endpoint) hands
/// each transaction whichever server session is free, so nothing of a
/// session outlives a transaction there. It cannot be detected from the
/// client (the pooler answers as the server would), so it is declared:
/// `pooling: 'transaction'`, or `pgbouncer=true` in the url as Prisma spells
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// A direct connection, or a pooler in session mode: each client
    /// connection keeps one server session, so prepared statements and
    /// session settings are kept between transactions.
    Session,
    /// Every statement runs inside an explicit transaction that sets what
    /// it needs (`SET LOCAL`), with unnamed statements only.
    Transaction,
}

impl Pooling {
    pub fn parse(s: &str) -> Result<Pooling> {
        match s {
            "none" | "session" => Ok(Pooling::Session),
            "transaction" => Ok(Pooling::Transaction),
            other => Err(Error::invalid(format!(
                "pooling must be 'none', 'session' or 'transaction', not {other:?}"
            ))),
        }
    }
}

/// The url without the storage's own query parameters (`pgbouncer`,
/// `pooling`), and the pooling they name. sqlx would ignore them with a
/// warning; they are read here and never sent to the server.
fn split_pooling(url: &str) -> Result<(String, Option<Pooling>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None));
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let mut kept = Vec::new();
    let mut pooling = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let named = match key {
            "pgbouncer" => match value {
                "true" | "1" => Some(Pooling::Transaction),
                "false" | "0" => Some(Pooling::Session),
                _ => {
                    return Err(Error::invalid(format!(
                        "the url's pgbouncer parameter must be true or false, not {value:?}"
                    )))
                }
            },
            "pooling" => Some(Pooling::parse(value)?),
            _ => {
                kept.push(pair);
                None
            }
        };
        if let Some(p) = named {
            if pooling.is_some_and(|q| q != p) {
                return Err(Error::invalid(
                    "the url names two different poolings (pgbouncer and pooling)",
                ));
            }
            pooling = Some(p);
        }
    }
    let mut out = base.to_owned();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    Ok((out, pooling))
}

/// `connectTimeoutMs` when not given: 5 s (so retries back off to 1 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Config {
    pub fn parse(
        url: &str, max_connections: Option<u32>, schema: Option<String>, pooling: Option<Pooling>,
    ) -> Result<Config> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::invalid(format!(
                "invalid PostgreSQL url {url:?}: expected postgres://…"
            )));
        }
        let (url, in_url) = split_pooling(url)?;
        let pooling = match (pooling, in_url) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::invalid(format!(
                    "the pooling option ({a:?}) and the url ({b:?}) disagree"
                )))
            }
            (a, b) => a.or(b).unwrap_or(Pooling::Session),
        };
        let max_connections = max_connections.unwrap_or(10);
        if max_connections == 0 {
            return Err(Error::invalid("maxConnections must be at least 1"));
        }
        if let Some(s) = &schema {
            if s.is_empty() || s.len() > 63 {
                return Err(Error::invalid("schema must be 1..63 bytes"));
            }
        }
        let local_schema = match (&schema, pooling) {
            (Some(s), Pooling::Transaction) => {
                format!("SET LOCAL search_path TO {}; ", quote_ident(s))
            }
            _ => String::new(),
        };
        let begin = format!("BEGIN; {local_schema}")
            .trim_end_matches("; ")
            .to_owned();
        Ok(Config {
            url,
            pooling,
            local_schema,
            begin,
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
            super::prefetch::lit(tag)?
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
            message: if d.message().contains("unsupported startup parameter") {
                // PgBouncer's answer to a parameter it does not track. The
                // storage sends none of its own beyond application_name.
                format!(
                    "the server or pooler at {at} rejected the connection: {} (a pooler such as PgBouncer refuses startup parameters it does not track: remove it from the url, or list it in the pooler's ignore_startup_parameters)",
                    d.message()
                )
            } else {
                format!(
                    "PostgreSQL at {at} rejected the connection: {}",
                    d.message()
                )
            },
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
    // Every pooled connection: the storage's schema, and generic plans for
    // the storage's own statements (`GENERIC_PLANS`).
    // Under transaction pooling nothing is set on a session: each
    // transaction sets its own (`Config::begin`), and unnamed statements
    // get a plan of their own anyway.
    let pooled = cfg.pooling == Pooling::Transaction;
    let settings = match cfg.schema.as_deref() {
        Some(s) => format!("SET search_path TO {}; {GENERIC_PLANS}", quote_ident(s)),
        None => GENERIC_PLANS.to_owned(),
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
        .after_connect(move |conn, _| {
            let settings = settings.clone();
            Box::pin(async move {
                if pooled {
                    return Ok(());
                }
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
    let _ = sqlx::raw_sql(AssertSqlSafe(super::after_lock::prepare()))
        .execute(&mut *conn)
        .await;
    drop(conn);
    Ok(pool)
}

/// The index this storage adds to the in-tree `sync_row_scopes`.
const ROW_SCOPES_INDEX: &str = "sync_row_scopes_by_row";

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
async fn build_row_scopes_index(conn: &mut sqlx::PgConnection) -> Result<()> {
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
            conn.execute(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS sync_row_scopes_by_row \
                 ON sync_row_scopes(partition, tbl, row_id)",
            )
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
                Err(e) if tries < $crate::postgres::conn::DDL_RETRIES && ($retry)(&e) => {
                    tries += 1;
                    tokio::time::sleep($crate::postgres::conn::DDL_PAUSE * tries).await;
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
async fn ensure_meta(
    conn: &mut sqlx::PgConnection, schema: Option<&str>, in_tx: bool,
) -> Result<()> {
    let present: i64 = super::stmt::query_scalar(sql::COUNT_META_OBJECTS)
        .bind(sql::META_OBJECTS)
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
    if present as usize == sql::META_OBJECTS.len() {
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
        for stmt in sql::META_DDL
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .filter(|s| !(defer_index && s.contains(ROW_SCOPES_INDEX)))
        {
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

/// The code of a call on a transaction an earlier error aborted.
pub use crate::error::TX_ABORTED;

/// The code of an error that says a pooler broke an assumption of the
/// storage's `pooling` setting.
pub const POOLER: &str = "ERR_SYNCULAR_POOLER";

/// What [`POOLER`] errors say, naming the setting.
const MOVED: &str = "the connection's server session changed between transactions, as a \
connection pooler in transaction mode (PgBouncer pool_mode = transaction, Supavisor's port 6543, \
Neon's -pooler endpoint) does; open the storage with pooling: 'transaction' (or pgbouncer=true in the url)";

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
        // A statement this connection prepared is missing (26000) or its
        // name is taken (42P05): the server session changed between
        // transactions, which only a pooler in transaction mode does.
        sqlx::Error::Database(d)
            if matches!(d.code().as_deref(), Some("26000" | "42P05"))
                && d.message().contains("sqlx_s_") =>
        {
            Error::plain(POOLER, format!("{}: {MOVED}", d.message()))
        }
        // A statement (COMMIT's probe among them) in a transaction an
        // earlier error aborted: nothing of it can be committed.
        sqlx::Error::Database(d) if d.code().as_deref() == Some("25P02") => Error::plain(
            TX_ABORTED,
            format!(
                "the transaction was aborted by an earlier error and is rolled back; nothing of it is committed ({})",
                d.message()
            ),
        ),
        // A connection exception sent as an error rather than by closing
        // the socket: a pooler whose server session ended (PgBouncer's
        // "server conn crashed?", 08P01) closes the client's too.
        sqlx::Error::Database(d) if d.code().is_some_and(|c| c.starts_with("08")) => {
            Error::Engine {
                code: CONNECTION_LOST.into(),
                message: format!(
                    "the connection to PostgreSQL failed: {} [SQLSTATE {}]",
                    d.message(),
                    d.code().unwrap_or_default()
                ),
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str, option: Option<&str>) -> Result<Config> {
        Config::parse(url, None, None, option.map(Pooling::parse).transpose()?)
    }

    #[test]
    fn pooling_from_the_option_or_the_url() {
        let base = "postgres://u@h:6543/db";
        assert_eq!(parse(base, None).unwrap().pooling, Pooling::Session);
        assert_eq!(
            parse(base, Some("transaction")).unwrap().pooling,
            Pooling::Transaction
        );
        assert_eq!(
            parse(base, Some("session")).unwrap().pooling,
            Pooling::Session
        );
        assert_eq!(parse(base, Some("none")).unwrap().pooling, Pooling::Session);
        let cfg = parse(
            "postgres://u@h:6543/db?sslmode=disable&pgbouncer=true",
            None,
        )
        .unwrap();
        assert_eq!(cfg.pooling, Pooling::Transaction);
        // The storage's own parameters never reach the server.
        assert_eq!(cfg.url, "postgres://u@h:6543/db?sslmode=disable");
        let cfg = parse("postgres://u@h/db?pooling=transaction", Some("transaction")).unwrap();
        assert_eq!(
            (cfg.pooling, cfg.url.as_str()),
            (Pooling::Transaction, "postgres://u@h/db")
        );
        assert!(parse(base, Some("statement")).is_err());
        assert!(parse("postgres://u@h/db?pgbouncer=yes", None).is_err());
        assert!(parse("postgres://u@h/db?pgbouncer=true", Some("session")).is_err());
        assert!(parse("postgres://u@h/db?pgbouncer=true&pooling=session", None).is_err());
    }

    #[test]
    fn transaction_pooling_sets_the_schema_per_transaction() {
        let cfg = Config::parse(
            "postgres://h/db",
            None,
            Some("s x".into()),
            Some(Pooling::Transaction),
        )
        .unwrap();
        assert_eq!(cfg.begin, "BEGIN; SET LOCAL search_path TO \"s x\"");
        let cfg = Config::parse("postgres://h/db", None, Some("s".into()), None).unwrap();
        assert_eq!(cfg.begin, "BEGIN");
    }

    #[test]
    fn no_startup_parameter_a_pooler_refuses() {
        let cfg = parse("postgres://u@h/db", Some("transaction")).unwrap();
        let opts = connect_options(&cfg, "tag").unwrap();
        assert!(!format!("{opts:?}").contains("extra_float_digits: Some"));
    }
}
