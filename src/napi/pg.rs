//! `PgHandle`: the PostgreSQL engine as the JS shim sees it. Method names
//! and argument lists mirror `SqliteHandle`; every call returns a Promise.
//! Storage-level writes take the same leading lease number as on SQLite and
//! ignore it (each runs in its own transaction); `begin(partition)` returns
//! the transaction id the `tx*` members and `unlock` take, like a lease.

use super::convert::*;
use super::packed::{self, Packed};
use super::rowpack::{unpack_changes, RowTuple};
use super::to_napi;
use crate::error::Error;
use crate::model::{ClientRecord, NewCommit, StoredRow};
use crate::postgres::{Config, PgEngine};
use crate::schema::Schema;
use crate::scope::ScopeFilter;
use crate::window::WindowQuery;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Polls a future with panics contained, like `super::guard` for sync
/// calls.
pub(super) struct Guarded<F>(Pin<Box<F>>);

impl<T, F: Future<Output = crate::Result<T>>> Future for Guarded<F> {
    type Output = napi::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => Poll::Ready(r.map_err(to_napi)),
            Err(p) => Poll::Ready(Err(to_napi(Error::plain(
                "ERR_SYNCULAR_INTERNAL",
                format!(
                    "internal error (panic contained): {}",
                    super::panic_message(p)
                ),
            )))),
        }
    }
}

pub(super) fn guarded<T, F: Future<Output = crate::Result<T>>>(f: F) -> Guarded<F> {
    Guarded(Box::pin(f))
}

#[napi]
pub struct PgHandle {
    engine: Option<Arc<PgEngine>>,
}

thread_local! {
    /// Set by this env's cleanup hook: napi shuts its tokio runtime down in
    /// an earlier-registered hook (hooks run last-in first-out, so ours runs
    /// first), and finalizers run after both.
    static TEARDOWN: Cell<bool> = const { Cell::new(false) };
    static HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// Registers the teardown hook once per env (per JS thread).
fn hook_teardown(env: &Env) -> Result<()> {
    if !HOOKED.with(Cell::get) {
        env.add_env_cleanup_hook((), |()| TEARDOWN.with(|t| t.set(true)))?;
        HOOKED.with(|h| h.set(true));
    }
    Ok(())
}

impl Drop for PgHandle {
    /// Collected by GC: every sqlx object (pool, pinned connections) must be
    /// dropped inside the runtime, where it can spawn its return-to-pool or
    /// close task; outside it, sqlx's drop panics, and a panic in a
    /// finalizer aborts the process. Pinned transactions are closed, which
    /// rolls them back on the server. At env teardown (process or worker
    /// exit) the runtime is gone or going: the engine is leaked and the OS
    /// closes its sockets, which the server treats as a rollback.
    fn drop(&mut self) {
        let Some(engine) = self.engine.take() else {
            return;
        };
        if TEARDOWN.with(Cell::get) {
            std::mem::forget(engine);
            return;
        }
        let owned = InRuntime(Some(engine));
        // Outside a live runtime `spawn` panics and drops the future, whose
        // `InRuntime` then leaks the engine instead of dropping it.
        let _ = catch_unwind(AssertUnwindSafe(move || {
            napi::bindgen_prelude::spawn(async move {
                let mut owned = owned;
                if let Some(engine) = owned.0.take() {
                    engine.abandon_all();
                    drop(engine);
                }
            });
        }));
    }
}

/// An engine that may only be dropped inside a tokio runtime; anywhere
/// else it is leaked.
struct InRuntime(Option<Arc<PgEngine>>);

impl Drop for InRuntime {
    fn drop(&mut self) {
        if let Some(engine) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_err() {
                std::mem::forget(engine);
            }
        }
    }
}

fn filter(json: &str) -> crate::Result<ScopeFilter> {
    ScopeFilter::parse(json)
}

#[napi]
impl PgHandle {
    /// Validates the options; the pool connects on first use.
    #[napi(constructor)]
    pub fn new(
        env: Env, url: String, max_connections: Option<f64>, schema: Option<String>,
        query_timeout_ms: Option<f64>,
    ) -> Result<Self> {
        hook_teardown(&env)?;
        super::guard(|| {
            let max = max_connections
                .map(|v| non_negative(v, "maxConnections"))
                .transpose()?
                .map(|v| v.min(u32::MAX as i64) as u32);
            let mut cfg = Config::parse(&url, max, schema)?;
            cfg.query_timeout = super::convert::query_timeout(query_timeout_ms)?;
            Ok(PgHandle {
                engine: Some(Arc::new(PgEngine::new(cfg))),
            })
        })
    }

    pub(super) fn e(&self) -> &PgEngine {
        self.engine.as_deref().expect("engine present until drop")
    }

    #[napi]
    pub async fn close(&self) -> Result<()> {
        self.e().close().await;
        Ok(())
    }

    // ---- transactions ---------------------------------------------------------

    #[napi]
    pub async fn begin(&self, partition: String) -> Result<u32> {
        guarded(self.e().begin(&partition)).await
    }

    #[napi]
    pub async fn unlock(&self, lease: u32, commit: bool) -> Result<()> {
        guarded(self.e().unlock(lease, commit)).await
    }

    #[napi]
    pub fn is_held(&self, lease: u32) -> bool {
        self.e().is_held(lease)
    }

    // ---- schema and partitions --------------------------------------------------

    #[napi]
    pub async fn ensure_schema(
        &self, _lease: u32, schema_json: String, declarations: Vec<JsDeclaration>, now_ms: f64,
    ) -> Result<bool> {
        guarded(async {
            let schema = Schema::parse(&schema_json)?;
            let decls = declarations
                .into_iter()
                .map(JsDeclaration::into_model)
                .collect::<crate::Result<Vec<_>>>()?;
            self.e()
                .ensure_schema(schema, &decls, int(now_ms, "nowMs")?)
                .await
        })
        .await
    }

    #[napi]
    pub fn schema_version(&self) -> i64 {
        self.e().writer_version()
    }

    #[napi]
    pub async fn touch_partition(
        &self, _lease: u32, partition: String, at_ms: f64, epoch: String,
    ) -> Result<JsRegistryEntry> {
        guarded(async {
            let at = int(at_ms, "authenticatedAtMs")?;
            Ok(self
                .e()
                .touch_partition(&partition, at, &epoch)
                .await?
                .into())
        })
        .await
    }

    #[napi]
    pub async fn rotate_partition_log_epoch(
        &self, _lease: u32, partition: String, epoch: String, at_ms: f64,
    ) -> Result<JsRegistryEntry> {
        guarded(async {
            let at = int(at_ms, "authenticatedAtMs")?;
            Ok(self
                .e()
                .rotate_partition_log_epoch(&partition, &epoch, at)
                .await?
                .into())
        })
        .await
    }

    #[napi]
    pub async fn list_partition_registry(&self) -> Result<Vec<JsRegistryEntry>> {
        guarded(async {
            Ok(self
                .e()
                .list_partition_registry()
                .await?
                .into_iter()
                .map(Into::into)
                .collect())
        })
        .await
    }

    #[napi]
    pub async fn get_partition_log_epoch(&self, partition: String) -> Result<Option<String>> {
        guarded(self.e().get_partition_log_epoch(&partition)).await
    }

    // ---- the log ------------------------------------------------------------------

    #[napi]
    pub async fn get_max_commit_seq(&self, partition: String) -> Result<i64> {
        guarded(self.e().get_max_commit_seq(&partition)).await
    }

    #[napi]
    pub async fn get_horizon_seq(&self, partition: String) -> Result<i64> {
        guarded(self.e().get_horizon_seq(&partition)).await
    }

    #[napi]
    pub async fn set_horizon_seq(&self, _lease: u32, partition: String, seq: f64) -> Result<()> {
        guarded(async {
            let seq = non_negative(seq, "seq")?;
            self.e().set_horizon_seq(&partition, seq).await
        })
        .await
    }

    #[napi]
    pub async fn prune_commits_through(
        &self, _lease: u32, partition: String, through_seq: f64, log_epoch: Option<String>,
    ) -> Result<JsPruneResult> {
        guarded(async {
            let target = prune_target(through_seq, log_epoch.as_deref())?;
            Ok(self
                .e()
                .prune_commits_through(&partition, target)
                .await?
                .into())
        })
        .await
    }

    #[napi]
    pub async fn get_commit_seq_before(&self, partition: String, before_ms: f64) -> Result<i64> {
        guarded(async {
            self.e()
                .get_commit_seq_before(&partition, int(before_ms, "createdBeforeMs")?)
                .await
        })
        .await
    }

    // ---- reads -------------------------------------------------------------------

    #[napi]
    pub async fn get_row(
        &self, partition: String, table: String, row_id: String,
    ) -> Result<Option<RowTuple>> {
        guarded(async {
            Ok(self
                .e()
                .get_row(&partition, &table, &row_id)
                .await?
                .map(RowTuple))
        })
        .await
    }

    #[napi]
    pub async fn get_push_result(
        &self, partition: String, client_id: String, commit_id: String,
    ) -> Result<Option<String>> {
        guarded(self.e().get_push_result(&partition, &client_id, &commit_id)).await
    }

    #[napi]
    pub async fn read_commit_window(
        &self, partition: String, table: String, filter_json: String, after_seq: f64,
        through_seq: f64, limit_changes: f64,
    ) -> Result<Packed> {
        guarded(async {
            let filter = filter(&filter_json)?;
            let q = WindowQuery {
                table: &table,
                filter: &filter,
                after_seq: int(after_seq, "afterSeq")?,
                through_seq: int(through_seq, "throughSeq")?,
                limit_changes: int(limit_changes, "limitChanges")?,
            };
            Ok(packed::commits(
                self.e().read_commit_window(&partition, &q).await?,
            ))
        })
        .await
    }

    #[napi]
    pub async fn latest_scoped_change_seq(
        &self, partition: String, table: String, filter_json: String,
    ) -> Result<i64> {
        guarded(async {
            self.e()
                .latest_scoped_change_seq(&partition, &table, &filter(&filter_json)?)
                .await
        })
        .await
    }

    #[napi]
    pub async fn scan_rows(
        &self, partition: String, table: String, filter_json: String, after_row_id: String,
        limit: f64,
    ) -> Result<Packed> {
        guarded(async {
            let filter = filter(&filter_json)?;
            if filter.is_empty() {
                return Err(Error::query("sync.storage.scan_requires_scope"));
            }
            let rows = self
                .e()
                .scan_rows(
                    &partition,
                    &table,
                    &filter,
                    &after_row_id,
                    int(limit, "limit")?,
                )
                .await?;
            Ok(packed::rows(rows))
        })
        .await
    }

    #[napi]
    pub async fn read_serve_gate(&self, partition: String, running: f64) -> Result<JsServeGate> {
        guarded(async {
            Ok(self
                .e()
                .read_serve_gate(&partition, int(running, "runningSchemaVersion")?)
                .await?
                .into())
        })
        .await
    }

    #[napi]
    pub async fn read_checkpoints(&self, partition: String) -> Result<Vec<JsCheckpoint>> {
        guarded(async {
            Ok(self
                .e()
                .read_checkpoints(&partition)
                .await?
                .into_iter()
                .map(Into::into)
                .collect())
        })
        .await
    }

    #[napi]
    pub async fn writer_fence_allows(&self, partition: String, version: f64) -> Result<bool> {
        guarded(async {
            self.e()
                .writer_fence_allows(&partition, int(version, "writerVersion")?)
                .await
        })
        .await
    }

    // ---- clients -------------------------------------------------------------------

    #[napi]
    pub async fn get_client_record(
        &self, partition: String, client_id: String,
    ) -> Result<Option<JsClientRecord>> {
        guarded(async {
            Ok(self
                .e()
                .get_client_record(&partition, &client_id)
                .await?
                .map(Into::into))
        })
        .await
    }

    #[napi]
    pub async fn list_client_records(&self, partition: String) -> Result<Vec<JsClientRecord>> {
        guarded(async {
            Ok(self
                .e()
                .list_client_records(&partition)
                .await?
                .into_iter()
                .map(Into::into)
                .collect())
        })
        .await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn put_client_record(
        &self, _lease: u32, partition: String, client_id: String, actor_id: String,
        wire_version: f64, cursor: f64, updated_at_ms: f64, subscriptions_json: String,
    ) -> Result<()> {
        guarded(async {
            let record = ClientRecord {
                client_id,
                actor_id,
                wire_version: int(wire_version, "wireVersion")?,
                cursor: int(cursor, "cursor")?,
                updated_at_ms: int(updated_at_ms, "updatedAtMs")?,
                subscriptions_json,
            };
            self.e().put_client_record(&partition, &record).await
        })
        .await
    }

    #[napi]
    pub async fn list_client_cursors(&self, partition: String) -> Result<Vec<JsClientCursor>> {
        guarded(async {
            Ok(self
                .e()
                .list_client_cursors(&partition)
                .await?
                .into_iter()
                .map(Into::into)
                .collect())
        })
        .await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn advance_client_cursor(
        &self, _lease: u32, partition: String, client_id: String, actor_id: Option<String>,
        log_epoch: Option<String>, cursor: f64, updated_at_ms: f64,
    ) -> Result<()> {
        guarded(async {
            let guard_pair = actor_id.as_deref().zip(log_epoch.as_deref());
            self.e()
                .advance_client_cursor(
                    &partition,
                    &client_id,
                    guard_pair,
                    int(cursor, "cursor")?,
                    int(updated_at_ms, "updatedAtMs")?,
                )
                .await
        })
        .await
    }

    #[napi]
    pub async fn get_active_client_cursor_floor(
        &self, partition: String, cutoff_ms: f64,
    ) -> Result<Option<i64>> {
        guarded(async {
            self.e()
                .get_active_client_cursor_floor(&partition, int(cutoff_ms, "cutoffMs")?)
                .await
        })
        .await
    }

    #[napi]
    pub async fn declare_checkpoint(
        &self, _lease: u32, partition: String, name: String, schema_version: f64, now_ms: f64,
    ) -> Result<JsCheckpoint> {
        guarded(async {
            let d = crate::model::CheckpointDeclaration {
                partition,
                name,
                schema_version: int(schema_version, "schemaVersion")?,
            };
            Ok(self
                .e()
                .declare_checkpoint(&d, int(now_ms, "nowMs")?)
                .await?
                .into())
        })
        .await
    }

    // ---- the transaction -------------------------------------------------------------

    #[napi]
    pub async fn tx_get_row(
        &self, lease: u32, table: String, row_id: String,
    ) -> Result<Option<RowTuple>> {
        guarded(async {
            Ok(self
                .e()
                .tx_get_row(lease, &table, &row_id)
                .await?
                .map(RowTuple))
        })
        .await
    }

    #[napi]
    pub async fn tx_get_tombstone_seq(
        &self, lease: u32, table: String, row_id: String,
    ) -> Result<Option<i64>> {
        guarded(self.e().tx_get_tombstone_seq(lease, &table, &row_id)).await
    }

    #[napi]
    pub async fn tx_clear_tombstone(
        &self, lease: u32, table: String, row_id: String,
    ) -> Result<()> {
        guarded(self.e().tx_clear_tombstone(lease, &table, &row_id)).await
    }

    #[napi]
    pub async fn tx_get_push_result(
        &self, lease: u32, client_id: String, commit_id: String,
    ) -> Result<Option<String>> {
        guarded(self.e().tx_get_push_result(lease, &client_id, &commit_id)).await
    }

    #[napi]
    pub async fn tx_scan_rows(
        &self, lease: u32, table: String, filter_json: String, after_row_id: String, limit: f64,
    ) -> Result<Packed> {
        guarded(async {
            let rows = self
                .e()
                .tx_scan_rows(
                    lease,
                    &table,
                    &filter(&filter_json)?,
                    &after_row_id,
                    int(limit, "limit")?,
                )
                .await?;
            Ok(packed::rows(rows))
        })
        .await
    }

    #[napi]
    pub async fn tx_lock_partition_for_push(&self, lease: u32) -> Result<()> {
        guarded(self.e().tx_lock_partition_for_push(lease)).await
    }

    #[napi]
    pub async fn tx_commit_rejected_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Result<()> {
        guarded(self.e().tx_commit_rejected_push_result(
            lease,
            &client_id,
            &commit_id,
            &result_json,
        ))
        .await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn tx_upsert_row(
        &self, lease: u32, table: String, row_id: String, server_version: f64, scopes_json: String,
        payload: Uint8Array, column_versions: Option<Uint8Array>, op_index: Option<f64>,
    ) -> Result<()> {
        let payload = payload.to_vec();
        let column_versions = column_versions.map(|c| c.to_vec());
        guarded(async move {
            let op_index = op_index
                .map(|v| non_negative(v, "opIndex"))
                .transpose()?
                .map(|v| v as u32);
            let row = StoredRow {
                row_id,
                server_version: int(server_version, "serverVersion")?,
                scopes_json,
                payload,
                column_versions,
            };
            self.e().tx_upsert_row(lease, &table, &row, op_index).await
        })
        .await
    }

    #[napi]
    pub async fn tx_delete_row(&self, lease: u32, table: String, row_id: String) -> Result<()> {
        guarded(self.e().tx_delete_row(lease, &table, &row_id)).await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn tx_append_commit(
        &self, lease: u32, client_id: String, client_commit_id: String, actor_id: String,
        created_at_ms: f64, changes: String, payloads: Uint8Array,
    ) -> Result<i64> {
        let payloads = payloads.to_vec();
        guarded(async move {
            let commit = NewCommit {
                client_id,
                client_commit_id,
                actor_id,
                created_at_ms: int(created_at_ms, "createdAtMs")?,
                changes: unpack_changes(&changes, &payloads)?,
            };
            self.e().tx_append_commit(lease, &commit).await
        })
        .await
    }

    #[napi]
    pub async fn tx_put_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Result<()> {
        guarded(
            self.e()
                .tx_put_push_result(lease, &client_id, &commit_id, &result_json),
        )
        .await
    }

    #[napi]
    pub async fn tx_set_blob_refs(
        &self, lease: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Result<()> {
        guarded(self.e().tx_set_blob_refs(lease, &table, &row_id, &blob_ids)).await
    }

    #[napi]
    pub async fn tx_read_serve_gate(&self, lease: u32, running: f64) -> Result<JsServeGate> {
        guarded(async {
            Ok(self
                .e()
                .tx_read_serve_gate(lease, int(running, "runningSchemaVersion")?)
                .await?
                .into())
        })
        .await
    }

    /// Reads the rows and tombstones of `row_ids` into the transaction's
    /// cache in one statement (a hint: correctness never depends on it).
    #[napi]
    pub async fn tx_prefetch_rows(
        &self, lease: u32, table: String, row_ids: Option<Vec<String>>,
    ) -> Result<()> {
        let ids = row_ids.unwrap_or_default();
        guarded(self.e().tx_prefetch_rows(lease, &table, &ids)).await
    }
}
