//! The PostgreSQL engine, on a sqlx pool created lazily on first use.
//!
//! Concurrency follows the in-tree storage (storage-layout §11.5): each
//! transaction pins one pool connection from `begin` to `commit`/`rollback`
//! and serializes on its partition's `sync_partitions` row lock
//! (`FOR UPDATE`); partitions never contend. Storage-level writes run in
//! their own short transaction on a pool connection. Nothing in the push
//! path takes a second connection while holding the partition lock, so a
//! full pool of pushing transactions still makes progress.
//!
//! Transactions are numbered like the SQLite engine's write leases: the
//! binding hands the id to JS and every transaction member takes it back.

mod admin;
mod after_lock;
mod checkpoints;
mod config;
mod conn;
mod deferred;
mod deferred_upsert;
pub(crate) mod engine;
mod error;
mod log;
mod meta;
mod meta_setup;
mod now;
mod ops;
mod prefetch;
mod query;
mod quote;
mod reactions;
mod rows;
mod schema_sync;
pub mod sql;
pub(crate) mod stmt;
mod window;

pub use config::{Config, Pooling};

use crate::error::{Error, Result};
use crate::schema::Schema;
use crate::telemetry::{self, Site, Slow};
use error::map_err;
use sqlx::pool::PoolConnection;
use sqlx::{Executor, PgConnection, PgPool, Postgres};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A schema with the statement text of each of its tables.
pub type Loaded = crate::schema::Loaded<rows::TableSql>;

/// One open transaction: its pinned connection, its partition, and whether
/// the push savepoint is open.
///
/// Round trips are what a PostgreSQL push costs, so the state also holds:
/// `begun` (`BEGIN` is sent with the first statement, not by `begin`) and
/// one deferred push result
/// (`putPushResult` returns nothing, so its insert travels with the next
/// statement's round trip or with `COMMIT`).
pub struct TxState {
    conn: Option<PoolConnection<Postgres>>,
    partition: String,
    savepoint: bool,
    begun: bool,
    pending_put: Option<prefetch::PendingPut>,
    /// An append answered but not sent yet (`deferred`).
    pending_append: Option<deferred::PendingAppend>,
    /// Upserts answered but not sent yet, in call order (`deferred_upsert`).
    pending_rows: Vec<deferred_upsert::PendingRow>,
    /// The upsert statements this connection has prepared, as the lock
    /// batch found them, with those this transaction's batches prepare.
    upserts: std::collections::HashSet<Arc<str>>,
    /// The counter row and fence the lock batch read, until this
    /// transaction appends (`deferred`).
    locked: Option<after_lock::Locked>,
    /// What the lock batch read for the host's next calls.
    after_lock: Option<after_lock::AfterLock>,
    /// The lock batch executed the prepared statements of
    /// `after_lock::prepare` on this connection, in this transaction.
    prepared: bool,
}

type TxSlot = Arc<tokio::sync::Mutex<TxState>>;

pub struct PgEngine {
    cfg: Config,
    pool: tokio::sync::OnceCell<PgPool>,
    loaded: crate::schema::Ensured<rows::TableSql>,
    txs: Mutex<HashMap<u32, TxSlot>>,
    next_id: AtomicU32,
    closed: AtomicBool,
    /// Ends this storage's `application_name`, unique in the process.
    tag: String,
    /// Registered queries: the storage's schema and the guard's cache.
    query: query::State,
    /// Connections between calls (see [`Idle`]).
    idle: Mutex<Idle>,
    /// Calls that took a connection from sqlx's pool.
    pool_waits: telemetry::Waits,
    /// Transactions' partition row locks (`lockPartitionForPush`): how many
    /// and how long taking them took, a round trip included.
    pub(crate) lock_waits: telemetry::Waits,
    /// Client commits a push may follow (see `after_lock`).
    push_keys: after_lock::PushKeys,
}

/// Runs `$body` with `$c: &mut PgConnection` on a pool connection
/// (committed state, autocommit). A body that failed because the
/// connection was gone (it died while idle) runs once more on a tested
/// one: reads are safe to repeat. Under transaction pooling the body runs
/// in a transaction of its own (`Config::begin`, then `COMMIT`): between
/// transactions the pooler may move the connection to another session.
macro_rules! read {
    ($self:expr, |$c:ident| $body:expr) => {{
        let __pooled = $self.pooled();
        $crate::postgres::on_live_connection!(
            $self,
            "read",
            |__conn| {
                if __pooled {
                    $crate::postgres::exec_text(&mut **__conn, &$self.cfg.begin).await?;
                }
                let $c: &mut sqlx::PgConnection = &mut **__conn;
                $body
            },
            |__conn, __out| {
                if __pooled {
                    $crate::postgres::finish($self, __conn, __out).await
                } else {
                    $self.recycle(__conn, __out.is_ok());
                    __out
                }
            }
        )
    }};
}

/// Runs `$attempt` (an async body over `$conn`) on a pool connection and
/// hands connection and result to `$done`. An attempt that failed because
/// the connection had died while idle runs once more on a tested one:
/// nothing of it can have taken effect (no `COMMIT` was sent).
macro_rules! on_live_connection {
    ($self:expr, $kind:expr, |$conn:ident| $attempt:expr, |$dc:ident, $out:ident| $done:expr) => {{
        let mut __conn = $self.acquire().await?;
        let _slow = $crate::postgres::slow!($kind);
        let mut __retried = false;
        loop {
            let __out = {
                let $conn = &mut __conn;
                $crate::postgres::body(async { $attempt }).await
            };
            match __out {
                Err(ref e) if !__retried && $crate::postgres::error::is_connection_lost(e) => {
                    __retried = true;
                    __conn.close_on_drop();
                    drop(__conn);
                    __conn = $self.acquire_tested().await?;
                }
                $out => {
                    let $dc = __conn;
                    break $done;
                }
            }
        }
    }};
}

/// A `telemetry::Slow` guard naming the line that invoked the outermost
/// macro (slow work warns on `syncular::slow`; a cached check otherwise).
macro_rules! slow {
    ($kind:expr) => {
        $crate::telemetry::Slow::start(
            $crate::telemetry::POSTGRES,
            $kind,
            $crate::telemetry::Site::Text(concat!(file!(), ":", line!())),
        )
    };
}

/// Runs `$body` in its own transaction on a pool connection: committed on
/// `Ok`, rolled back on `Err`. The body runs in an async block, so a `?`
/// inside it ends the body, not the caller: the transaction is always
/// finished before the connection goes back to the pool (it used to return
/// to the pool still inside the failed transaction). A body that failed
/// because the connection was gone runs once more on a tested connection
/// (nothing of it was committed: `COMMIT` had not been sent).
macro_rules! write {
    ($self:expr, |$c:ident| $body:expr) => {{
        $crate::postgres::on_live_connection!(
            $self,
            "write",
            |__conn| {
                $crate::postgres::exec_text(&mut **__conn, &$self.cfg.begin).await?;
                let $c: &mut sqlx::PgConnection = &mut **__conn;
                $body
            },
            |__conn, __out| $crate::postgres::finish($self, __conn, __out).await
        )
    }};
}

/// Runs `$body` in one read-only snapshot (REPEATABLE READ READ ONLY) on a
/// pool connection: every statement of the body sees the same committed
/// state.
macro_rules! snapshot {
    ($self:expr, |$c:ident| $body:expr) => {{
        $crate::postgres::write!($self, |$c| {
            $crate::postgres::exec(
                $c,
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY",
            )
            .await?;
            $body
        })
    }};
}

/// Runs `$body` on transaction `$id`'s pinned connection, with `$p` its
/// partition and `$st` the whole state. The transaction is open (`BEGIN`
/// sent) and a deferred push result written before the body runs.
macro_rules! with_tx {
    (@locked $self:expr, $guard:ident, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let $st: &mut $crate::postgres::TxState = &mut *$guard;
        $st.ready($self).await?;
        let $p: String = $st.partition.clone();
        let Some(__conn) = $st.conn.as_mut() else {
            return Err($crate::error::Error::tx_finished());
        };
        let $c: &mut sqlx::PgConnection = &mut *__conn;
        $body
    }};
    // The body times itself (a registered query names its text).
    ($self:expr, $id:expr, untimed, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let __slot = $self.tx_slot($id)?;
        let mut __guard = __slot.lock().await;
        $crate::postgres::with_tx!(@locked $self, __guard, |$st, $c, $p| $body)
    }};
    ($self:expr, $id:expr, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let __slot = $self.tx_slot($id)?;
        let mut __guard = __slot.lock().await;
        let _slow = $crate::postgres::slow!("tx");
        $crate::postgres::with_tx!(@locked $self, __guard, |$st, $c, $p| $body)
    }};
}

pub(crate) use {on_live_connection, read, slow, snapshot, with_tx, write};

/// Awaits a `write!` body; fixes its error type so `?` works inside it.
pub(crate) async fn body<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    f.await
}

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

/// `COMMIT` behind a statement that fails in an aborted transaction:
/// PostgreSQL answers a bare `COMMIT` there with `ROLLBACK` and no error,
/// and a caller must never be told that writes are durable when an earlier
/// error (a deferred write refused, a statement the caller ignored) undid
/// them. The probe fails with 25P02 (`ERR_SYNCULAR_TX_ABORTED`) and the
/// transaction is rolled back.
pub(crate) const CHECKED_COMMIT: &str = "SELECT 1; COMMIT";

/// Commits on `Ok` (a failed COMMIT rolls back and reports), rolls back on
/// `Err`; a connection whose ROLLBACK fails is closed, never pooled, and
/// the ROLLBACK's error rides on the first one as its `rollbackError`
/// (0.30.7). A connection that finished cleanly goes back to the engine's
/// idle list.
pub(crate) async fn finish<T>(
    engine: &PgEngine, mut conn: PoolConnection<Postgres>, out: Result<T>,
) -> Result<T> {
    let failed = match out {
        Ok(v) => match exec(&mut conn, CHECKED_COMMIT).await {
            Ok(()) => {
                engine.recycle(conn, true);
                return Ok(v);
            }
            Err(e) => e,
        },
        Err(e) => e,
    };
    let (out, healthy) = match exec(&mut conn, "ROLLBACK").await {
        Ok(()) => (Err(failed), true),
        Err(rb) => (Err(failed.with_rollback_failure(rb)), false),
    };
    if !healthy {
        conn.close_on_drop();
    }
    engine.recycle(conn, healthy);
    out
}

/// How long `close()` waits, after cancelling running statements, for the
/// calls still running to give back their connections.
pub const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Connections the engine keeps itself between calls: handing one back to
/// sqlx's pool costs a spawned task and a ping round trip on every
/// release. `waiting` counts callers waiting on the pool; while any
/// wait, released connections go to the pool so they are served.
#[derive(Default)]
struct Idle {
    conns: Vec<PoolConnection<Postgres>>,
    waiting: usize,
}

/// Decrements `Idle::waiting` when a pool wait ends (or is dropped).
struct Waiting<'a>(&'a Mutex<Idle>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(self.0).waiting -= 1;
    }
}

impl PgEngine {
    pub fn new(cfg: Config) -> PgEngine {
        if cfg.pooling == Pooling::Transaction {
            stmt::use_unnamed();
        }
        PgEngine {
            cfg,
            pool: tokio::sync::OnceCell::new(),
            loaded: Default::default(),
            txs: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(1),
            closed: AtomicBool::new(false),
            tag: {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                format!(
                    "syncular-{}-{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                )
            },
            query: query::State::default(),
            idle: Mutex::new(Idle::default()),
            pool_waits: Default::default(),
            lock_waits: Default::default(),
            push_keys: Default::default(),
        }
    }

    /// Behind a transaction pooler (`pooling: 'transaction'`).
    pub(crate) fn pooled(&self) -> bool {
        self.cfg.pooling == Pooling::Transaction
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    async fn pool(&self) -> Result<&PgPool> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed"));
        }
        self.pool
            .get_or_try_init(|| conn::open(&self.cfg, &self.tag, after_lock::prepare()))
            .await
    }

    /// A pool connection, the most recently released first; a wait above
    /// the slow threshold warns on `syncular::pool`. No ping: a connection
    /// that died while idle fails its first statement (see `read!`).
    pub(crate) async fn acquire(&self) -> Result<PoolConnection<Postgres>> {
        let pool = self.pool().await?;
        // Taking an idle one or counting as waiting is one step, so a
        // connection released meanwhile is never left idle while this
        // waits on the pool.
        let waiting = {
            let mut idle = lock(&self.idle);
            if let Some(c) = idle.conns.pop() {
                return Ok(c);
            }
            idle.waiting += 1;
            Waiting(&self.idle)
        };
        self.pool_acquire(pool, waiting).await
    }

    /// A connection from sqlx's pool; while this waits (`_waiting`),
    /// released connections go to the pool rather than to the idle list.
    async fn pool_acquire(
        &self, pool: &PgPool, _waiting: Waiting<'_>,
    ) -> Result<PoolConnection<Postgres>> {
        let waited = telemetry::pool_wait_started();
        let started = std::time::Instant::now();
        let conn = pool.acquire().await.map_err(map_err);
        self.pool_waits.record(started.elapsed());
        telemetry::pool_waited(waited, telemetry::POSTGRES, pool.size(), pool.num_idle());
        conn
    }

    /// A connection that answered a ping, after a connection turned out
    /// dead: the idle ones are likely dead too (a server restart), so they
    /// go back to the pool, which tests them on release.
    pub(crate) async fn acquire_tested(&self) -> Result<PoolConnection<Postgres>> {
        let pool = self.pool().await?;
        let mut last = None;
        for _ in 0..=self.cfg.max_connections {
            let (stale, waiting) = {
                let mut idle = lock(&self.idle);
                idle.waiting += 1;
                (std::mem::take(&mut idle.conns), Waiting(&self.idle))
            };
            drop(stale);
            let mut c = self.pool_acquire(pool, waiting).await?;
            match sqlx::Connection::ping(&mut *c).await {
                Ok(()) => return Ok(c),
                Err(e) => {
                    c.close_on_drop();
                    last = Some(map_err(e));
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed")))
    }

    /// Takes back a connection after a call: kept for the next call when
    /// its last statement ended cleanly (`healthy`) and nobody waits on
    /// the pool; otherwise handed to the pool (which pings it, or closes
    /// it when marked so).
    /// `SELECT current_setting('server_version')` through the pool.
    pub async fn ping(&self) -> Result<String> {
        read!(self, |c| {
            crate::postgres::stmt::query_scalar::<String>(
                "SELECT current_setting('server_version')",
            )
            .fetch_one(&mut *c)
            .await
            .map_err(map_err)
        })
    }

    /// The pool's gauges and the wait counters; touches no connection.
    pub fn stats(&self) -> crate::engine::EngineStats {
        let (pool_waits, pool_wait_micros) = self.pool_waits.read();
        let (lock_waits, lock_wait_micros) = self.lock_waits.read();
        let mut out = crate::engine::EngineStats {
            lock_waits,
            lock_wait_micros,
            pool_waits,
            pool_wait_micros,
            pool_size: Some(0),
            pool_idle: Some(0),
            pool_waiting: Some(0),
            ..Default::default()
        };
        if let Some(pool) = self.pool.get() {
            let idle = lock(&self.idle);
            // The storage's own idle list holds connections sqlx counts as in use.
            out.pool_size = Some(pool.size());
            out.pool_idle = Some((pool.num_idle() + idle.conns.len()) as u32);
            out.pool_waiting = Some(idle.waiting as u32);
        }
        out
    }

    pub(crate) fn recycle(&self, conn: PoolConnection<Postgres>, healthy: bool) {
        if healthy && !self.is_closed() {
            let mut idle = lock(&self.idle);
            if idle.waiting == 0 {
                idle.conns.push(conn);
                return;
            }
        }
        drop(conn);
    }

    /// Rolls back open transactions and closes the pool; later calls fail
    /// with `storage is closed`. Returns within [`CLOSE_GRACE`] of the
    /// cancel request even when a statement ignores it (PostgreSQL checks
    /// for cancellation between rows, not inside one function call): its
    /// connection is closed, and its transaction rolled back by the server,
    /// when that call ends.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // A running statement (a runaway registered query) would hold its
        // transaction's slot and its pool connection until its own time
        // limit; cancel it so closing takes as long as a round trip.
        if self.pool.get().is_some() {
            conn::cancel_running(&self.cfg, &self.tag).await;
        }
        let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
        let open: Vec<TxSlot> = lock(&self.txs).drain().map(|(_, s)| s).collect();
        for slot in open {
            // A slot still held by a running call past the deadline: the
            // call drops its connection when it ends (the pool is closed).
            let Ok(mut st) = tokio::time::timeout_at(deadline, slot.lock()).await else {
                continue;
            };
            if let Some(mut c) = st.conn.take() {
                let rolled = tokio::time::timeout_at(deadline, exec(&mut c, "ROLLBACK")).await;
                if !matches!(rolled, Ok(Ok(()))) {
                    c.close_on_drop();
                }
            }
        }
        let idle: Vec<_> = std::mem::take(&mut lock(&self.idle).conns);
        drop(idle);
        if let Some(pool) = self.pool.get() {
            // Marks the pool closed at once; waits for checked-out
            // connections only until the deadline.
            let _ = tokio::time::timeout_at(deadline, pool.close()).await;
        }
    }

    /// Drops every pinned connection without a round trip: the server rolls
    /// back a transaction whose connection closes. For a handle collected
    /// by GC; must run inside the runtime.
    pub fn abandon_all(&self) {
        self.closed.store(true, Ordering::Release);
        let idle: Vec<_> = std::mem::take(&mut lock(&self.idle).conns);
        drop(idle);
        for (_, slot) in lock(&self.txs).drain() {
            if let Ok(mut st) = slot.try_lock() {
                if let Some(mut c) = st.conn.take() {
                    c.close_on_drop();
                }
            }
        }
    }

    pub fn loaded(&self) -> Arc<Loaded> {
        self.loaded.get()
    }

    /// `deferrable`: per table, whether its upserts may be deferred
    /// (`deferred_upsert::check`).
    fn set_loaded(&self, schema: Schema, deferrable: &[bool]) {
        let by_name: HashMap<String, bool> = schema
            .tables
            .iter()
            .zip(deferrable)
            .map(|(t, d)| (t.name.clone(), *d))
            .collect();
        self.loaded.set(schema, |t| {
            rows::TableSql::new(t).deferring(by_name.get(&t.name).copied().unwrap_or(false))
        });
    }

    pub fn writer_version(&self) -> i64 {
        self.loaded.version()
    }

    // ---- transactions ---------------------------------------------------------

    /// Pins a pool connection (READ COMMITTED, no lock yet). `BEGIN` goes
    /// out with the transaction's first statement.
    pub async fn begin(&self, partition: &str) -> Result<u32> {
        let conn = self.acquire().await?;
        Ok(self.pin(conn, partition))
    }

    fn pin(&self, conn: PoolConnection<Postgres>, partition: &str) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        let slot = Arc::new(tokio::sync::Mutex::new(TxState {
            conn: Some(conn),
            partition: partition.to_owned(),
            savepoint: false,
            begun: false,
            pending_put: None,
            pending_append: None,
            pending_rows: Vec::new(),
            upserts: Default::default(),
            locked: None,
            after_lock: None,
            prepared: false,
        }));
        lock(&self.txs).insert(id, slot);
        id
    }

    pub fn is_held(&self, id: u32) -> bool {
        lock(&self.txs).contains_key(&id)
    }

    pub(crate) fn tx_slot(&self, id: u32) -> Result<TxSlot> {
        lock(&self.txs)
            .get(&id)
            .cloned()
            .ok_or_else(Error::tx_finished)
    }

    /// Ends transaction `id`. Rolling back one that is gone is a no-op;
    /// committing one is an error.
    pub async fn unlock(&self, id: u32, commit: bool) -> Result<()> {
        let slot = lock(&self.txs).remove(&id);
        let Some(slot) = slot else {
            return if commit {
                Err(Error::tx_finished())
            } else {
                Ok(())
            };
        };
        let mut st = slot.lock().await;
        let pending = st.pending_put.take();
        let rows = !st.pending_rows.is_empty();
        let head = st.take_batch();
        let begun = st.begun;
        let Some(mut conn) = st.conn.take() else {
            return if commit {
                Err(Error::tx_finished())
            } else {
                Ok(())
            };
        };
        if !begun {
            // Nothing was sent: the connection goes back as is.
            self.recycle(conn, true);
            return Ok(());
        }
        if commit {
            let _slow =
                Slow::start(telemetry::POSTGRES, "commit", Site::Text("commit")).sql("COMMIT");
            if head.is_some() || pending.is_some() {
                // The deferred upserts, append, push result and COMMIT in
                // one round trip.
                let out = prefetch::put_and_commit(
                    &mut conn,
                    &st.partition,
                    head.as_deref(),
                    pending.as_ref(),
                    st.prepared,
                )
                .await;
                return match out {
                    Ok(true) => {
                        self.recycle(conn, true);
                        Ok(())
                    }
                    Ok(false) => finish(self, conn, Ok(())).await,
                    Err(e) => {
                        if rows {
                            deferred_upsert::refused(self, &e);
                        }
                        finish::<()>(self, conn, Err(e)).await
                    }
                };
            }
            finish(self, conn, Ok(())).await
        } else {
            finish::<()>(self, conn, Err(Error::tx_finished()))
                .await
                .or(Ok(()))
        }
    }

    pub(super) fn table(&self, table: &str) -> Result<(Arc<Loaded>, usize)> {
        let loaded = self.loaded();
        let i = loaded.schema.index_of(table)?;
        Ok((loaded, i))
    }
}
