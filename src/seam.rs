//! The storage seam every engine implements, in model types only.
//!
//! One trait, so the binding writes each member once. A member returns a
//! [`Call`]: `Now` when the engine answered before returning (SQLite's
//! short calls, which the host then sees settle without a thread hop),
//! `Blocking` with work to run on a worker thread of the host's pool
//! (SQLite's large reads and lock waits), or `Later` with a future the
//! binding drives on its async runtime (PostgreSQL's round trips).
//!
//! Arguments are owned so a `Later` future can keep them; an engine that
//! answers at once only borrows them.
//!
//! Leases: `begin` hands out a lease number. On an engine with one writer
//! (`exclusive_writes`), storage-level writes also take a lease the caller
//! acquired; on the others they run in their own transaction and ignore it.
//! `tx_*` members and `unlock` always name the lease of their transaction.

use crate::core::checkpoint::{Activation, SourceState};
use crate::core::error::Result;
use crate::core::model::admin::{BlobReferencingRow, CommitMetadata, ScopeActivity};
use crate::core::model::reactions::{
    ClaimQuery, FailureUpdate, NewReaction, PruneQuery, PrunedCounts, StoredReaction,
};
use crate::core::model::*;
use crate::core::query::{Request, Value};
use crate::core::records::Records;
use crate::core::schema::Schema;
use crate::core::scope::ScopeFilter;
use crate::core::window::Window;
use std::future::Future;
use std::pin::Pin;

pub type Pending<T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'static>>;
pub type Work<T> = Box<dyn FnOnce() -> Result<T> + Send + 'static>;

/// An engine's answer: ready now, blocking work to run off the caller's
/// thread, or a future to drive.
pub enum Call<T> {
    Now(Result<T>),
    Blocking(Work<T>),
    Later(Pending<T>),
}

impl<T> From<Result<T>> for Call<T> {
    fn from(r: Result<T>) -> Self {
        Call::Now(r)
    }
}

pub fn later<T>(f: impl Future<Output = Result<T>> + Send + 'static) -> Call<T> {
    Call::Later(Box::pin(f))
}

pub fn blocking<T>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Call<T> {
    Call::Blocking(Box::new(move || {
        let _off = OffThread::enter();
        f()
    }))
}

thread_local! {
    static OFF_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the current thread as running blocking work (not the caller's
/// thread) until dropped. Engines use it to keep work that must not make
/// the calling thread wait, such as a read on the SQLite writer
/// connection, to the calling thread.
struct OffThread(bool);

impl OffThread {
    fn enter() -> OffThread {
        OffThread(OFF_THREAD.with(|c| c.replace(true)))
    }
}

impl Drop for OffThread {
    fn drop(&mut self) {
        let was = self.0;
        OFF_THREAD.with(|c| c.set(was));
    }
}

/// Runs `f` marked as blocking work, on a thread of the caller's own that
/// is not the JS thread (the copy's thread, `crate::copy`): engine reads
/// then take their pooled connections, never the writer.
pub fn as_blocking_work<T>(f: impl FnOnce() -> T) -> T {
    let _off = OffThread::enter();
    f()
}

/// True while the current thread runs a [`blocking`] closure.
pub fn off_thread() -> bool {
    OFF_THREAD.with(|c| c.get())
}

impl<T: Send + 'static> Call<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Call<U> {
        match self {
            Call::Now(r) => Call::Now(r.map(f)),
            Call::Blocking(w) => blocking(move || w().map(f)),
            Call::Later(p) => later(async move { p.await.map(f) }),
        }
    }
}

impl<T> Call<T> {
    /// The answer, on this thread: the engine's own tests and the Rust
    /// floor bench (`benches/floor.rs`) call members this way. A `Later`
    /// needs the binding's runtime and is refused here.
    pub fn wait(self) -> Result<T> {
        match self {
            Call::Now(r) => r,
            Call::Blocking(w) => w(),
            Call::Later(_) => Err(crate::Error::invalid(
                "Call::wait: this member answers with a future; drive it on a runtime",
            )),
        }
    }
}

/// What `prefetchRows` learned, for the caller's cache.
pub struct Prefetch {
    pub rows: Vec<Prefetched>,
    /// True when the answers hold until this transaction writes the rows
    /// (read under the write lock or the partition lock); false when they
    /// may only be used as hints that a later read confirms.
    pub stable: bool,
}

/// The whole seam: every area below. The binding holds a `dyn Engine`;
/// each engine implements the areas in its own area modules, so a member
/// is written once per engine, where its work is.
pub trait Engine:
    Lifecycle + Log + Reads + Checkpoints + Clients + Reactions + Admin + Transaction
{
}

impl<T> Engine for T where
    T: Lifecycle + Log + Reads + Checkpoints + Clients + Reactions + Admin + Transaction
{
}

/// Opening, closing, health, leases and the schema.
#[allow(clippy::too_many_arguments)]
pub trait Lifecycle: Send + Sync + 'static {
    /// `telemetry::SQLITE` or `telemetry::POSTGRES`, for logs.
    fn name(&self) -> &'static str;
    /// One writer at a time: storage-level writes need a lease.
    fn exclusive_writes(&self) -> bool;
    fn close(&self) -> Call<()>;
    /// Rolls back every open transaction at once (the storage is being
    /// dropped without `close`).
    fn abandon_all(&self) {}
    fn schema_version(&self) -> i64;

    // ---- operations (health, metrics, backup: `docs/operations.md`)
    /// One round trip to the database; answers the server's version
    /// (SQLite: the linked library's, read on a reader connection).
    fn ping(&self) -> Call<String>;
    /// The engine's own numbers, read without touching the database.
    fn stats(&self) -> EngineStats;
    /// An online copy of the database into a new file at `path`.
    fn backup(&self, _path: String) -> Call<()> {
        Call::Now(Err(crate::Error::plain(
            "ERR_SYNCULAR_BACKUP_UNSUPPORTED",
            "backup() copies the embedded SQLite database; back up PostgreSQL with pg_dump (see docs/operations.md)",
        )))
    }

    // ---- leases and transactions
    fn begin(&self, partition: Option<String>) -> Call<u32>;
    fn unlock(&self, lease: u32, commit: bool) -> Call<()>;
    /// Group commit: ends `lease` with its work committed into the open
    /// transaction but not yet durable; `flush` makes it durable. Engines
    /// without groups commit at once.
    fn hold(&self, lease: u32) -> Call<()> {
        self.unlock(lease, true)
    }
    /// Makes every held lease durable; `false` when a lease that has
    /// already run calls is open, so nothing could be flushed now.
    fn flush(&self) -> Call<bool> {
        Call::Now(Ok(true))
    }
    fn is_held(&self, lease: u32) -> bool;
    /// Test hook: the next COMMIT and/or ROLLBACK fail (SQLite: see
    /// `SqliteEngine::arm_faults`; PostgreSQL arms the rollback after a
    /// registered query's answer instead, `PgEngine::arm_trailing_fault`).
    fn arm_faults(&self, _commit: bool, _rollback: bool) -> crate::Result<()> {
        Err(crate::Error::invalid(
            "fault injection is a test hook of the SQLite engine",
        ))
    }

    // ---- the schema
    fn ensure_schema(
        &self, lease: u32, schema: Schema, declarations: Vec<CheckpointDeclaration>, now_ms: i64,
    ) -> Call<bool>;
    /// Gives the declared indexes a layout repair replaced the form the
    /// older version created (recorded at the repair); the names restored.
    /// A storage-level write under `lease`.
    fn restore_layout(&self, lease: u32) -> Call<Vec<String>>;
}

/// Partitions, their log epochs, and the commit log's counters and pruning.
#[allow(clippy::too_many_arguments)]
pub trait Log: Send + Sync + 'static {
    fn touch_partition(
        &self, lease: u32, partition: String, at_ms: i64, epoch: String,
    ) -> Call<RegistryEntry>;
    fn rotate_partition_log_epoch(
        &self, lease: u32, partition: String, epoch: String, at_ms: i64,
    ) -> Call<RegistryEntry>;
    fn list_partition_registry(&self) -> Call<Vec<RegistryEntry>>;
    fn get_partition_log_epoch(&self, partition: String) -> Call<Option<String>>;

    // ---- the log
    fn get_max_commit_seq(&self, partition: String) -> Call<i64>;
    fn get_horizon_seq(&self, partition: String) -> Call<i64>;
    fn set_horizon_seq(&self, lease: u32, partition: String, seq: i64) -> Call<()>;
    fn prune_commits_through(
        &self, lease: u32, partition: String, target: PruneTarget,
    ) -> Call<PruneResult>;
    fn get_commit_seq_before(&self, partition: String, before_ms: i64) -> Call<i64>;
}

/// Reads of committed state.
#[allow(clippy::too_many_arguments)]
pub trait Reads: Send + Sync + 'static {
    fn get_row(&self, partition: String, table: String, row_id: String) -> Call<Option<StoredRow>>;
    fn get_push_result(
        &self, partition: String, client_id: String, commit_id: String,
    ) -> Call<Option<String>>;
    /// The window in its packed form ([`crate::core::records`]), which both
    /// engines write as they read.
    fn read_commit_window(&self, partition: String, window: Window) -> Call<Records>;
    fn latest_scoped_change_seq(
        &self, partition: String, table: String, filter: ScopeFilter,
    ) -> Call<i64>;
    /// The matched rows in their packed form ([`crate::core::records`]),
    /// which both engines write as they read.
    fn scan_rows(
        &self, partition: String, table: String, filter: ScopeFilter, after_row_id: String,
        limit: i64,
    ) -> Call<Records>;
    /// The index lookup's rows in the same packed form, written as read.
    fn scan_rows_by_index(
        &self, partition: String, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Records>;
    fn query_authoritative(
        &self, partition: String, request: Request, params: Vec<Value>, declared: Vec<String>,
        gate_running: Option<i64>,
    ) -> Call<QueryOutput>;
}

/// RFC 0007: the serve gate, the writer fence and checkpoints.
#[allow(clippy::too_many_arguments)]
pub trait Checkpoints: Send + Sync + 'static {
    fn read_serve_gate(&self, partition: String, running: i64) -> Call<ServeGate>;
    fn read_checkpoints(&self, partition: String) -> Call<Vec<Checkpoint>>;
    fn writer_fence_allows(&self, partition: String, version: i64) -> Call<bool>;
    fn declare_checkpoint(
        &self, lease: u32, declaration: CheckpointDeclaration, now_ms: i64,
    ) -> Call<Checkpoint>;
    fn claim_checkpoint(
        &self, lease: u32, partition: String, name: String, schema_version: i64, now_ms: i64,
    ) -> Call<Checkpoint>;
    fn advance_checkpoint(
        &self, lease: u32, partition: String, name: String, progress: CheckpointProgress,
    ) -> Call<bool>;
    fn source_coverage_seq(&self, partition: String, tables: Vec<String>) -> Call<i64>;
    fn has_source_changes_above(
        &self, partition: String, tables: Vec<String>, seq: i64,
    ) -> Call<SourceState>;
    fn activate_checkpoint(
        &self, lease: u32, partition: String, name: String, owner_epoch: i64, watermark: i64,
        sources: Vec<String>, now_ms: i64,
    ) -> Call<Activation>;
}

/// Client records and cursors.
#[allow(clippy::too_many_arguments)]
pub trait Clients: Send + Sync + 'static {
    fn get_client_record(&self, partition: String, client_id: String)
        -> Call<Option<ClientRecord>>;
    fn list_client_records(&self, partition: String) -> Call<Vec<ClientRecord>>;
    fn put_client_record(&self, lease: u32, partition: String, record: ClientRecord) -> Call<()>;
    fn list_client_cursors(&self, partition: String) -> Call<Vec<ClientCursor>>;
    fn advance_client_cursor(
        &self, lease: u32, partition: String, advance: CursorAdvance,
    ) -> Call<()>;
    fn get_active_client_cursor_floor(
        &self, partition: String, cutoff_ms: i64,
    ) -> Call<Option<i64>>;
}

/// Durable reactions.
#[allow(clippy::too_many_arguments)]
pub trait Reactions: Send + Sync + 'static {
    fn claim_reactions(
        &self, lease: u32, partition: String, query: ClaimQuery,
    ) -> Call<Vec<StoredReaction>>;
    fn complete_reaction(
        &self, lease: u32, partition: String, key: String, owner: String, completed_at_ms: i64,
    ) -> Call<bool>;
    fn extend_reaction_lease(
        &self, lease: u32, partition: String, key: String, owner: String, expires_at_ms: i64,
    ) -> Call<bool>;
    fn fail_reaction(
        &self, lease: u32, partition: String, key: String, update: FailureUpdate,
    ) -> Call<bool>;
    fn retry_reaction(&self, lease: u32, partition: String, key: String, now_ms: i64)
        -> Call<bool>;
    fn get_reaction(&self, partition: String, key: String) -> Call<Option<StoredReaction>>;
    fn list_reactions(
        &self, partition: String, statuses: Vec<String>, types: Vec<String>, limit: i64,
    ) -> Call<Vec<StoredReaction>>;
    fn prune_reactions(
        &self, lease: u32, partition: String, query: PruneQuery,
    ) -> Call<PrunedCounts>;
}

/// Admin console and blob reads.
#[allow(clippy::too_many_arguments)]
pub trait Admin: Send + Sync + 'static {
    fn list_commit_metadata(
        &self, partition: String, after_seq: i64, limit: i64, table: Option<String>,
    ) -> Call<Vec<CommitMetadata>>;
    fn scope_activity(
        &self, partition: String, variable: String, value: String, limit: i64,
    ) -> Call<Vec<ScopeActivity>>;
    fn get_row_scopes(
        &self, partition: String, table: String, row_id: String,
    ) -> Call<Option<(i64, String)>>;
    fn list_rows_referencing_blob(
        &self, partition: String, blob_id: String,
    ) -> Call<Vec<BlobReferencingRow>>;
    fn list_referenced_blob_ids(&self, partition: String) -> Call<Vec<String>>;
}

/// Members of an open transaction, named by its lease.
#[allow(clippy::too_many_arguments)]
pub trait Transaction: Send + Sync + 'static {
    fn tx_get_row(&self, lease: u32, table: String, row_id: String) -> Call<Option<StoredRow>>;
    fn tx_get_tombstone_seq(&self, lease: u32, table: String, row_id: String) -> Call<Option<i64>>;
    fn tx_clear_tombstone(&self, lease: u32, table: String, row_id: String) -> Call<()>;
    fn tx_get_push_result(
        &self, lease: u32, client_id: String, commit_id: String,
    ) -> Call<Option<String>>;
    fn tx_scan_rows(
        &self, lease: u32, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Records>;
    fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Records>;
    fn tx_query_authoritative(
        &self, lease: u32, request: Request, params: Vec<Value>, declared: Vec<String>,
    ) -> Call<QueryOutput>;
    fn tx_lock_partition_for_push(&self, lease: u32) -> Call<()>;
    fn tx_commit_rejected_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()>;
    fn tx_upsert_row(
        &self, lease: u32, table: String, row: StoredRow, op_index: Option<u32>,
    ) -> Call<()>;
    fn tx_delete_row(&self, lease: u32, table: String, row_id: String) -> Call<()>;
    fn tx_append_commit(&self, lease: u32, commit: NewCommit) -> Call<i64>;
    fn tx_put_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()>;
    fn tx_set_blob_refs(
        &self, lease: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Call<()>;
    fn tx_read_serve_gate(&self, lease: u32, running: i64) -> Call<ServeGate>;
    fn tx_advance_checkpoint(
        &self, lease: u32, name: String, progress: CheckpointProgress,
    ) -> Call<bool>;
    fn tx_enqueue_reactions(&self, lease: u32, reactions: Vec<NewReaction>) -> Call<()>;
    fn tx_prefetch_rows(&self, lease: u32, table: String, row_ids: Vec<String>) -> Call<Prefetch>;
}

/// What [`Engine::stats`] reads: counters kept with relaxed atomics on the
/// paths that wait, and gauges of the pool or the WAL. `None`: the engine
/// has no such thing.
#[derive(Debug, Default, Clone)]
pub struct EngineStats {
    /// SQLite: waits for the write lock held by another process.
    /// PostgreSQL: transactions' partition row locks taken, and the time
    /// taking them took.
    pub lock_waits: u64,
    pub lock_wait_micros: u64,
    /// PostgreSQL: calls that found none of the storage's idle
    /// connections and took one from the pool (opening it, or waiting).
    pub pool_waits: u64,
    pub pool_wait_micros: u64,
    pub pool_size: Option<u32>,
    pub pool_idle: Option<u32>,
    pub pool_waiting: Option<u32>,
    pub wal_bytes: Option<u64>,
    /// WAL frames the last checkpoint pass left uncopied.
    pub checkpoint_lag_frames: Option<i64>,
    pub checkpoints: Option<u64>,
}
