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
mod checkpoints;
mod conn;
pub(crate) mod engine;
mod log;
mod meta;
mod ops;
mod prefetch;
mod query;
mod reactions;
mod rows;
mod schema_sync;
pub mod sql;
mod window;

pub use conn::Config;

use crate::error::{Error, Result};
use crate::schema::Schema;
use crate::telemetry::{self, Site, Slow};
use conn::map_err;
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
}

/// Runs `$body` with `$c: &mut PgConnection` on a pool connection
/// (committed state, autocommit).
macro_rules! read {
    ($self:expr, |$c:ident| $body:expr) => {{
        let mut __conn = $self.acquire().await?;
        let _slow = $crate::postgres::slow!("read");
        let $c: &mut sqlx::PgConnection = &mut *__conn;
        $body
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
/// to the pool still inside the failed transaction).
macro_rules! write {
    ($self:expr, |$c:ident| $body:expr) => {{
        let mut __conn = $self.acquire().await?;
        let _slow = $crate::postgres::slow!("write");
        $crate::postgres::exec(&mut *__conn, "BEGIN").await?;
        let __out = $crate::postgres::body(async {
            let $c: &mut sqlx::PgConnection = &mut *__conn;
            $body
        })
        .await;
        $crate::postgres::finish(__conn, __out).await
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
    (@locked $guard:ident, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let $st: &mut $crate::postgres::TxState = &mut *$guard;
        $st.ready().await?;
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
        $crate::postgres::with_tx!(@locked __guard, |$st, $c, $p| $body)
    }};
    ($self:expr, $id:expr, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let __slot = $self.tx_slot($id)?;
        let mut __guard = __slot.lock().await;
        let _slow = $crate::postgres::slow!("tx");
        $crate::postgres::with_tx!(@locked __guard, |$st, $c, $p| $body)
    }};
}

pub(crate) use {read, slow, snapshot, with_tx, write};

/// Awaits a `write!` body; fixes its error type so `?` works inside it.
pub(crate) async fn body<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    f.await
}

pub(crate) async fn exec(c: &mut PgConnection, sql: &'static str) -> Result<()> {
    c.execute(sql).await.map_err(map_err)?;
    Ok(())
}

/// Commits on `Ok` (a failed COMMIT rolls back and reports), rolls back on
/// `Err`; a connection whose ROLLBACK fails is closed, never pooled.
pub(crate) async fn finish<T>(mut conn: PoolConnection<Postgres>, out: Result<T>) -> Result<T> {
    match out {
        Ok(v) => match exec(&mut conn, "COMMIT").await {
            Ok(()) => Ok(v),
            Err(e) => {
                if exec(&mut conn, "ROLLBACK").await.is_err() {
                    conn.close_on_drop();
                }
                Err(e)
            }
        },
        Err(e) => {
            if exec(&mut conn, "ROLLBACK").await.is_err() {
                conn.close_on_drop();
            }
            Err(e)
        }
    }
}

impl PgEngine {
    pub fn new(cfg: Config) -> PgEngine {
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
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    async fn pool(&self) -> Result<&PgPool> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed"));
        }
        self.pool
            .get_or_try_init(|| conn::open(&self.cfg, &self.tag))
            .await
    }

    /// A pool connection; a wait above the slow threshold warns on
    /// `syncular::pool`.
    pub(crate) async fn acquire(&self) -> Result<PoolConnection<Postgres>> {
        let pool = self.pool().await?;
        let waited = telemetry::pool_wait_started();
        let conn = pool.acquire().await.map_err(map_err);
        telemetry::pool_waited(waited, telemetry::POSTGRES, pool.size(), pool.num_idle());
        conn
    }

    /// Rolls back open transactions and closes the pool; later calls fail
    /// with `storage is closed`.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // A running statement (a runaway registered query) would hold its
        // transaction's slot and its pool connection until its own time
        // limit; cancel it so closing takes as long as a round trip.
        if self.pool.get().is_some() {
            conn::cancel_running(&self.cfg, &self.tag).await;
        }
        let open: Vec<TxSlot> = lock(&self.txs).drain().map(|(_, s)| s).collect();
        for slot in open {
            let mut st = slot.lock().await;
            if let Some(mut c) = st.conn.take() {
                if exec(&mut c, "ROLLBACK").await.is_err() {
                    c.close_on_drop();
                }
            }
        }
        if let Some(pool) = self.pool.get() {
            pool.close().await;
        }
    }

    /// Drops every pinned connection without a round trip: the server rolls
    /// back a transaction whose connection closes. For a handle collected
    /// by GC; must run inside the runtime.
    pub fn abandon_all(&self) {
        self.closed.store(true, Ordering::Release);
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

    fn set_loaded(&self, schema: Schema) {
        self.loaded.set(schema, rows::TableSql::new);
    }

    pub fn writer_version(&self) -> i64 {
        self.loaded.version()
    }

    // ---- transactions ---------------------------------------------------------

    /// Pins a pool connection (READ COMMITTED, no lock yet). `BEGIN` goes
    /// out with the transaction's first statement.
    pub async fn begin(&self, partition: &str) -> Result<u32> {
        let conn = self.acquire().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).max(1);
        let slot = Arc::new(tokio::sync::Mutex::new(TxState {
            conn: Some(conn),
            partition: partition.to_owned(),
            savepoint: false,
            begun: false,
            pending_put: None,
        }));
        lock(&self.txs).insert(id, slot);
        Ok(id)
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
        let begun = st.begun;
        let Some(mut conn) = st.conn.take() else {
            return if commit {
                Err(Error::tx_finished())
            } else {
                Ok(())
            };
        };
        if !begun {
            // Nothing was sent: the connection goes back to the pool as is.
            return Ok(());
        }
        if commit {
            let _slow =
                Slow::start(telemetry::POSTGRES, "commit", Site::Text("commit")).sql("COMMIT");
            if let Some(put) = pending {
                // The deferred push result and COMMIT in one round trip.
                let out = prefetch::put_and_commit(&mut conn, &st.partition, &put).await;
                return match out {
                    Ok(true) => Ok(()),
                    Ok(false) => finish(conn, Ok(())).await,
                    Err(e) => finish::<()>(conn, Err(e)).await,
                };
            }
            finish(conn, Ok(())).await
        } else {
            finish::<()>(conn, Err(Error::tx_finished()))
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
