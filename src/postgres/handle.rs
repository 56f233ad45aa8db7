//! The engine's handle, `PgEngine`: its pool (created on first use), the
//! connections it keeps between calls, the open transactions by id, the
//! loaded schema, and closing. How a call runs on a connection is `run`;
//! the transactions themselves are `tx`.

use super::config::{Config, Pooling};
use super::conn;
use super::error::map_err;
use super::query::run as query;
use super::rows::{Loaded, TableSql};
use super::stmt::{self, exec};
use super::tx::lock_reads;
use super::tx::state::TxState;
use crate::core::error::{Error, Result};
use crate::core::schema::Schema;
use crate::core::telemetry;
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub(in crate::postgres) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(in crate::postgres) type TxSlot = Arc<tokio::sync::Mutex<TxState>>;

pub struct PgEngine {
    pub(in crate::postgres) cfg: Config,
    pool: tokio::sync::OnceCell<PgPool>,
    pub(in crate::postgres) loaded: crate::core::schema::Ensured<TableSql>,
    txs: Mutex<HashMap<u32, TxSlot>>,
    next_id: AtomicU32,
    closed: AtomicBool,
    /// Ends this storage's `application_name`, unique in the process.
    tag: String,
    /// Registered queries: the storage's schema and the guard's cache.
    pub(in crate::postgres) query: query::State,
    /// Connections between calls (see [`Idle`]).
    idle: Mutex<Idle>,
    /// Calls that took a connection from sqlx's pool.
    pool_waits: telemetry::Waits,
    /// Transactions' partition row locks (`lockPartitionForPush`): how many
    /// and how long taking them took, a round trip included.
    pub(in crate::postgres) lock_waits: telemetry::Waits,
    /// Client commits a push may follow (see `tx::lock_reads`).
    pub(in crate::postgres) push_keys: lock_reads::PushKeys,
    /// Rollbacks still running after their answer went out.
    trailing: Trailing,
}

/// Read-only transactions answered before their `ROLLBACK` (registered
/// queries, see [`PgEngine::roll_back_after`]): how many still run, a
/// wake-up for `close` when the last one ends, and `close`'s order to give
/// the rest up.
struct Trailing {
    running: AtomicUsize,
    /// `arm_trailing_fault`: 0, or what the next rollback turns into.
    fault: std::sync::atomic::AtomicU8,
    ended: tokio::sync::Notify,
    give_up: tokio::sync::watch::Sender<bool>,
}

impl Default for Trailing {
    fn default() -> Self {
        Trailing {
            running: AtomicUsize::new(0),
            fault: Default::default(),
            ended: tokio::sync::Notify::new(),
            give_up: tokio::sync::watch::channel(false).0,
        }
    }
}

/// Counts one trailing rollback until it ends (or its task is dropped).
struct TrailingRun(Arc<PgEngine>);

impl Drop for TrailingRun {
    fn drop(&mut self) {
        let t = &self.0.trailing;
        if t.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            t.ended.notify_waiters();
        }
    }
}

const FAULT_FAIL: u8 = 1;
const FAULT_HOLD: u8 = 2;

/// How long `close` waits for given-up trailing rollbacks to drop their
/// connections once told to (they do at their next poll).
const GIVE_UP_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

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
            trailing: Trailing::default(),
        }
    }

    /// Behind a transaction pooler (`pooling: 'transaction'`).
    pub(crate) fn pooled(&self) -> bool {
        self.cfg.pooling == Pooling::Transaction
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(in crate::postgres) async fn pool(&self) -> Result<&PgPool> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed"));
        }
        self.pool
            .get_or_try_init(|| conn::open(&self.cfg, &self.tag, lock_reads::prepare()))
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

    /// The pool's gauges and the wait counters; touches no connection.
    pub fn stats(&self) -> crate::seam::EngineStats {
        let (pool_waits, pool_wait_micros) = self.pool_waits.read();
        let (lock_waits, lock_wait_micros) = self.lock_waits.read();
        let mut out = crate::seam::EngineStats {
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

    /// Takes back a connection after a call: kept for the next call when
    /// its last statement ended cleanly (`healthy`) and nobody waits on
    /// the pool; otherwise handed to the pool (which pings it, or closes
    /// it when marked so).
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

    /// Ends a READ ONLY transaction whose answer already went out: its
    /// `ROLLBACK` runs on a task of its own, off the caller's path, and the
    /// connection is recycled only once that succeeded. It is closed
    /// instead when the rollback fails, takes longer than `limit`, or
    /// `close` gives it up; the server then rolls the transaction back.
    /// Nothing else can take the connection meanwhile: the task owns it.
    pub(in crate::postgres) fn roll_back_after(
        self: &Arc<Self>, mut conn: PoolConnection<Postgres>, limit: std::time::Duration,
    ) {
        // Counted before the check (both sequentially consistent, as is
        // `close`'s store then read): `close` either sees this one running
        // or it sees the storage closed and gives its connection up now.
        self.trailing.running.fetch_add(1, Ordering::SeqCst);
        let run = TrailingRun(Arc::clone(self));
        if self.closed.load(Ordering::SeqCst) {
            conn.close_on_drop();
            drop(conn);
            return;
        }
        let mut give_up = self.trailing.give_up.subscribe();
        let sql = match self.trailing.fault.swap(0, Ordering::SeqCst) {
            FAULT_FAIL => "SELECT 1/0",
            FAULT_HOLD => "SELECT pg_sleep(2); SELECT 1/0",
            _ => "ROLLBACK",
        };
        tokio::spawn(async move {
            let rolled = {
                let mut rollback =
                    std::pin::pin!(tokio::time::timeout(limit, exec(&mut conn, sql)));
                let mut stop = std::pin::pin!(give_up.wait_for(|g| *g));
                std::future::poll_fn(|cx| {
                    use std::future::Future;
                    use std::task::Poll;
                    if let Poll::Ready(r) = rollback.as_mut().poll(cx) {
                        return Poll::Ready(matches!(r, Ok(Ok(()))));
                    }
                    match stop.as_mut().poll(cx) {
                        Poll::Ready(_) => Poll::Ready(false),
                        Poll::Pending => Poll::Pending,
                    }
                })
                .await
            };
            if !rolled {
                conn.close_on_drop();
            }
            run.0.recycle(conn, rolled);
            drop(run);
        });
    }

    /// Whether a test armed a fault for the next trailing rollback; the
    /// next storage-level registered query then takes the path that has
    /// one (`query::one_message` ends its own transaction in its batch).
    pub(in crate::postgres) fn trailing_fault_armed(&self) -> bool {
        self.trailing.fault.load(Ordering::SeqCst) != 0
    }

    /// Test hook (`arm_faults`): the next trailing rollback is replaced by
    /// a statement that fails (`fail`, leaving the transaction open and
    /// aborted) or one that sleeps 2 s (`hold`) and then fails.
    pub(crate) fn arm_trailing_fault(&self, fail: bool, hold: bool) {
        let f = if hold {
            FAULT_HOLD
        } else {
            u8::from(fail) * FAULT_FAIL
        };
        self.trailing.fault.store(f, Ordering::SeqCst);
    }

    /// Waits until no trailing rollback runs, or `deadline`; true if none does.
    async fn trailing_ended(&self, deadline: tokio::time::Instant) -> bool {
        loop {
            // Made before the count is read: a wake-up in between is kept.
            let ended = self.trailing.ended.notified();
            if self.trailing.running.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return self.trailing.running.load(Ordering::SeqCst) == 0;
            }
        }
    }

    /// Rolls back open transactions and closes the pool; later calls fail
    /// with `storage is closed`. Returns within [`CLOSE_GRACE`] of the
    /// cancel request even when a statement ignores it (PostgreSQL checks
    /// for cancellation between rows, not inside one function call): its
    /// connection is closed, and its transaction rolled back by the server,
    /// when that call ends. Rollbacks still running after their answer
    /// (`roll_back_after`) are waited for until then, and past it given
    /// up: their connections are closed.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
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
        if !self.trailing_ended(deadline).await {
            self.trailing.give_up.send_replace(true);
            let grace = tokio::time::Instant::now() + GIVE_UP_GRACE;
            self.trailing_ended(grace).await;
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
    /// (`tx::upsert::check`).
    pub(in crate::postgres) fn set_loaded(&self, schema: Schema, deferrable: &[bool]) {
        let by_name: HashMap<String, bool> = schema
            .tables
            .iter()
            .zip(deferrable)
            .map(|(t, d)| (t.name.clone(), *d))
            .collect();
        self.loaded.set(schema, |t| {
            TableSql::new(t).deferring(by_name.get(&t.name).copied().unwrap_or(false))
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

    pub(in crate::postgres) fn pin(&self, conn: PoolConnection<Postgres>, partition: &str) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        let slot = Arc::new(tokio::sync::Mutex::new(TxState::new(conn, partition)));
        lock(&self.txs).insert(id, slot);
        id
    }

    pub fn is_held(&self, id: u32) -> bool {
        lock(&self.txs).contains_key(&id)
    }

    /// Takes transaction `id` out of the open ones (it is ending).
    pub(in crate::postgres) fn take_tx(&self, id: u32) -> Option<TxSlot> {
        lock(&self.txs).remove(&id)
    }

    pub(crate) fn tx_slot(&self, id: u32) -> Result<TxSlot> {
        lock(&self.txs)
            .get(&id)
            .cloned()
            .ok_or_else(Error::tx_finished)
    }

    pub(in crate::postgres) fn table(&self, table: &str) -> Result<(Arc<Loaded>, usize)> {
        let loaded = self.loaded();
        let i = loaded.schema.index_of(table)?;
        Ok((loaded, i))
    }

    /// A connection from the idle list, if the pool is open and one waits
    /// there (no wait, no round trip).
    pub(in crate::postgres) fn take_idle(&self) -> Option<PoolConnection<Postgres>> {
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        self.pool.get()?;
        lock(&self.idle).conns.pop()
    }
}

/// `pg!(self, |this| body)`: a member's body runs later, in a future that
/// owns a clone of the engine (`this`) and the member's arguments.
macro_rules! pg {
    ($self:ident, |$e:ident| $body:expr) => {{
        let engine = ::std::sync::Arc::clone($self);
        $crate::seam::later(async move {
            // A `&PgEngine`: its own methods, not the area traits' namesakes.
            let $e: &$crate::postgres::handle::PgEngine = &engine;
            $body
        })
    }};
}

pub(crate) use pg;
