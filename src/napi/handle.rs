//! `SqliteHandle`: one storage's engine, as the JS shim sees it. Methods
//! taking `lease` run under the write lease the shim acquired with
//! `tryLock`/`lockAsync`; the others read committed state.

use super::args::{Buf, Str};
use super::convert::*;
use super::guard;
use super::rowpack::{unpack_changes, RowTuple};
use super::tasks::{LockTask, ScanTask, WindowTask};
use crate::error::Error;
use crate::model::{ClientRecord, NewCommit, StoredRow};
use crate::schema::Schema;
use crate::scope::ScopeFilter;
use crate::sqlite::{Config, Location, SqliteEngine, Synchronous};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::Arc;
use std::time::Duration;

thread_local! {
    static EXIT_HOOKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// At env teardown (process or worker exit), the scratch directories of the
/// memory databases this env made go too (only those: other workers'
/// storages live on).
fn hook_exit(env: &Env) -> Result<()> {
    if !EXIT_HOOKED.with(std::cell::Cell::get) {
        let owner = crate::sqlite::scratch::this_thread();
        env.add_env_cleanup_hook(owner, crate::sqlite::scratch::remove_owned_by)?;
        EXIT_HOOKED.with(|h| h.set(true));
    }
    Ok(())
}

/// Removes the memory databases' scratch directories made on this thread.
/// The JS layer calls it from `process.on('exit')`: `process.exit()` skips
/// env cleanup hooks.
// Test builds leave out napi's registration, which is its only caller.
#[cfg_attr(test, allow(dead_code))]
#[napi(js_name = "releaseScratch")]
pub fn release_scratch() {
    crate::sqlite::scratch::remove_owned_by(crate::sqlite::scratch::this_thread());
}

#[napi]
pub struct SqliteHandle {
    pub(crate) engine: Arc<SqliteEngine>,
}

fn filter(json: &str) -> crate::Result<ScopeFilter> {
    ScopeFilter::parse(json)
}

#[napi]
impl SqliteHandle {
    /// Validates the options; the database opens on first use.
    #[napi(constructor)]
    pub fn new(
        env: Env, url: Option<String>, synchronous: Option<String>, busy_timeout_ms: Option<f64>,
        query_timeout_ms: Option<f64>,
    ) -> Result<Self> {
        hook_exit(&env)?;
        guard(|| {
            let location = Location::parse(url.as_deref())?;
            let synchronous = Synchronous::parse(synchronous.as_deref())?;
            let busy = busy_timeout_ms
                .map(|v| non_negative(v, "busyTimeoutMs"))
                .transpose()?
                .unwrap_or(30_000);
            let query_timeout = super::convert::query_timeout(query_timeout_ms)?;
            Ok(SqliteHandle {
                engine: Arc::new(SqliteEngine::new(Config {
                    location,
                    synchronous,
                    busy_timeout: Duration::from_millis(busy as u64),
                    query_timeout,
                })),
            })
        })
    }

    #[napi]
    pub fn close(&self) {
        self.engine.close();
    }

    // ---- the write lease ------------------------------------------------------

    #[napi]
    pub fn try_lock(&self, partition: Option<Str>) -> Result<Option<u32>> {
        guard(|| self.engine.try_lock(partition.as_deref()))
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn lock_async(&self, partition: Option<String>) -> AsyncTask<LockTask> {
        AsyncTask::new(LockTask {
            engine: self.engine.clone(),
            partition,
        })
    }

    #[napi]
    pub fn unlock(&self, lease: u32, commit: bool) -> Result<()> {
        guard(|| self.engine.unlock(lease, commit))
    }

    #[napi]
    pub fn is_held(&self, lease: u32) -> bool {
        self.engine.is_held(lease)
    }

    // ---- schema and partitions --------------------------------------------------

    #[napi]
    pub fn ensure_schema(
        &self, lease: u32, schema_json: String, declarations: Vec<JsDeclaration>, now_ms: f64,
    ) -> Result<bool> {
        guard(|| {
            let schema = Schema::parse(&schema_json)?;
            let decls = declarations
                .into_iter()
                .map(JsDeclaration::into_model)
                .collect::<crate::Result<Vec<_>>>()?;
            self.engine
                .ensure_schema(lease, schema, &decls, int(now_ms, "nowMs")?)
        })
    }

    #[napi]
    pub fn schema_version(&self) -> i64 {
        self.engine.writer_version()
    }

    #[napi]
    pub fn touch_partition(
        &self, lease: u32, partition: String, at_ms: f64, epoch: String,
    ) -> Result<JsRegistryEntry> {
        guard(|| {
            let at = int(at_ms, "authenticatedAtMs")?;
            self.engine
                .touch_partition(lease, &partition, at, &epoch)
                .map(Into::into)
        })
    }

    #[napi]
    pub fn rotate_partition_log_epoch(
        &self, lease: u32, partition: String, epoch: String, at_ms: f64,
    ) -> Result<JsRegistryEntry> {
        guard(|| {
            let at = int(at_ms, "authenticatedAtMs")?;
            self.engine
                .rotate_partition_log_epoch(lease, &partition, &epoch, at)
                .map(Into::into)
        })
    }

    #[napi]
    pub fn list_partition_registry(&self) -> Result<Vec<JsRegistryEntry>> {
        guard(|| {
            Ok(self
                .engine
                .list_partition_registry()?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    #[napi]
    pub fn get_partition_log_epoch(&self, partition: String) -> Result<Option<String>> {
        guard(|| self.engine.get_partition_log_epoch(&partition))
    }

    // ---- the log ------------------------------------------------------------------

    #[napi]
    pub fn get_max_commit_seq(&self, partition: String) -> Result<i64> {
        let t = crate::telemetry::call_started(); // TEMP telemetry hook
        let out = guard(|| self.engine.get_max_commit_seq(&partition));
        crate::telemetry::call_finished(t, "getMaxCommitSeq", crate::telemetry::SQLITE); // TEMP telemetry hook
        out
    }

    #[napi]
    pub fn get_horizon_seq(&self, partition: String) -> Result<i64> {
        guard(|| self.engine.get_horizon_seq(&partition))
    }

    #[napi]
    pub fn set_horizon_seq(&self, lease: u32, partition: String, seq: f64) -> Result<()> {
        guard(|| {
            let seq = non_negative(seq, "seq")?;
            self.engine.set_horizon_seq(lease, &partition, seq)
        })
    }

    /// `log_epoch` absent selects the legacy 0.15.x form.
    #[napi]
    pub fn prune_commits_through(
        &self, lease: u32, partition: String, through_seq: f64, log_epoch: Option<String>,
    ) -> Result<JsPruneResult> {
        guard(|| {
            let target = prune_target(through_seq, log_epoch.as_deref())?;
            self.engine
                .prune_commits_through(lease, &partition, target)
                .map(Into::into)
        })
    }

    #[napi]
    pub fn get_commit_seq_before(&self, partition: String, before_ms: f64) -> Result<i64> {
        guard(|| {
            self.engine
                .get_commit_seq_before(&partition, int(before_ms, "createdBeforeMs")?)
        })
    }

    // ---- reads -------------------------------------------------------------------

    #[napi]
    pub fn get_row(&self, partition: Str, table: Str, row_id: Str) -> Result<Option<RowTuple>> {
        guard(|| {
            Ok(self
                .engine
                .get_row(&partition, &table, &row_id)?
                .map(RowTuple))
        })
    }

    #[napi]
    pub fn get_push_result(
        &self, partition: Str, client_id: Str, commit_id: Str,
    ) -> Result<Option<String>> {
        guard(|| {
            self.engine
                .get_push_result(&partition, &client_id, &commit_id)
        })
    }

    #[napi(ts_return_type = "Promise<JsCommit[]>")]
    pub fn read_commit_window(
        &self, partition: String, table: String, filter_json: String, after_seq: f64,
        through_seq: f64, limit_changes: f64,
    ) -> Result<AsyncTask<WindowTask>> {
        guard(|| {
            Ok(AsyncTask::new(WindowTask {
                engine: self.engine.clone(),
                partition,
                table,
                filter: filter(&filter_json)?,
                after_seq: int(after_seq, "afterSeq")?,
                through_seq: int(through_seq, "throughSeq")?,
                limit_changes: int(limit_changes, "limitChanges")?,
            }))
        })
    }

    #[napi]
    pub fn latest_scoped_change_seq(
        &self, partition: String, table: String, filter_json: String,
    ) -> Result<i64> {
        guard(|| {
            self.engine
                .latest_scoped_change_seq(&partition, &table, &filter(&filter_json)?)
        })
    }

    #[napi(ts_return_type = "Promise<JsRow[]>")]
    pub fn scan_rows(
        &self, partition: String, table: String, filter_json: String, after_row_id: String,
        limit: f64,
    ) -> Result<AsyncTask<ScanTask>> {
        guard(|| {
            let filter = filter(&filter_json)?;
            if filter.is_empty() {
                return Err(Error::query("sync.storage.scan_requires_scope"));
            }
            // Resolve the table now so an unknown one fails before any work.
            self.engine.loaded().schema.table(&table)?;
            Ok(AsyncTask::new(ScanTask {
                engine: self.engine.clone(),
                partition,
                table,
                filter,
                after_row_id,
                limit: int(limit, "limit")?,
            }))
        })
    }

    #[napi]
    pub fn read_serve_gate(&self, partition: Str, running: f64) -> Result<JsServeGate> {
        guard(|| {
            Ok(self
                .engine
                .read_serve_gate(&partition, int(running, "runningSchemaVersion")?)?
                .into())
        })
    }

    #[napi]
    pub fn read_checkpoints(&self, partition: String) -> Result<Vec<JsCheckpoint>> {
        guard(|| {
            Ok(self
                .engine
                .read_checkpoints(&partition)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    #[napi]
    pub fn writer_fence_allows(&self, partition: String, version: f64) -> Result<bool> {
        guard(|| {
            self.engine
                .writer_fence_allows(&partition, int(version, "writerVersion")?)
        })
    }

    // ---- clients -------------------------------------------------------------------

    #[napi]
    pub fn get_client_record(
        &self, partition: String, client_id: String,
    ) -> Result<Option<JsClientRecord>> {
        guard(|| {
            Ok(self
                .engine
                .get_client_record(&partition, &client_id)?
                .map(Into::into))
        })
    }

    #[napi]
    pub fn list_client_records(&self, partition: String) -> Result<Vec<JsClientRecord>> {
        guard(|| {
            Ok(self
                .engine
                .list_client_records(&partition)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn put_client_record(
        &self, lease: u32, partition: String, client_id: String, actor_id: String,
        wire_version: f64, cursor: f64, updated_at_ms: f64, subscriptions_json: String,
    ) -> Result<()> {
        guard(|| {
            let record = ClientRecord {
                client_id,
                actor_id,
                wire_version: int(wire_version, "wireVersion")?,
                cursor: int(cursor, "cursor")?,
                updated_at_ms: int(updated_at_ms, "updatedAtMs")?,
                subscriptions_json,
            };
            self.engine.put_client_record(lease, &partition, &record)
        })
    }

    #[napi]
    pub fn list_client_cursors(&self, partition: String) -> Result<Vec<JsClientCursor>> {
        guard(|| {
            Ok(self
                .engine
                .list_client_cursors(&partition)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    /// With `actor_id` and `log_epoch`: the guarded realtime advance;
    /// without: `updateClientCursor`.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn advance_client_cursor(
        &self, lease: u32, partition: String, client_id: String, actor_id: Option<String>,
        log_epoch: Option<String>, cursor: f64, updated_at_ms: f64,
    ) -> Result<()> {
        guard(|| {
            let guard_pair = actor_id.as_deref().zip(log_epoch.as_deref());
            self.engine.advance_client_cursor(
                lease,
                &partition,
                &client_id,
                guard_pair,
                int(cursor, "cursor")?,
                int(updated_at_ms, "updatedAtMs")?,
            )
        })
    }

    #[napi]
    pub fn get_active_client_cursor_floor(
        &self, partition: String, cutoff_ms: f64,
    ) -> Result<Option<i64>> {
        guard(|| {
            self.engine
                .get_active_client_cursor_floor(&partition, int(cutoff_ms, "cutoffMs")?)
        })
    }

    #[napi]
    pub fn declare_checkpoint(
        &self, lease: u32, partition: String, name: String, schema_version: f64, now_ms: f64,
    ) -> Result<JsCheckpoint> {
        guard(|| {
            let d = crate::model::CheckpointDeclaration {
                partition,
                name,
                schema_version: int(schema_version, "schemaVersion")?,
            };
            Ok(self
                .engine
                .declare_checkpoint(lease, &d, int(now_ms, "nowMs")?)?
                .into())
        })
    }

    // ---- the transaction -------------------------------------------------------------

    #[napi]
    pub fn tx_get_row(&self, lease: u32, table: Str, row_id: Str) -> Result<Option<RowTuple>> {
        guard(|| {
            Ok(self
                .engine
                .tx_get_row(lease, &table, &row_id)?
                .map(RowTuple))
        })
    }

    #[napi]
    pub fn tx_get_tombstone_seq(&self, lease: u32, table: Str, row_id: Str) -> Result<Option<i64>> {
        guard(|| self.engine.tx_get_tombstone_seq(lease, &table, &row_id))
    }

    #[napi]
    pub fn tx_clear_tombstone(&self, lease: u32, table: Str, row_id: Str) -> Result<()> {
        guard(|| self.engine.tx_clear_tombstone(lease, &table, &row_id))
    }

    #[napi]
    pub fn tx_get_push_result(
        &self, lease: u32, client_id: Str, commit_id: Str,
    ) -> Result<Option<String>> {
        guard(|| {
            self.engine
                .tx_get_push_result(lease, &client_id, &commit_id)
        })
    }

    #[napi]
    pub fn tx_scan_rows(
        &self, lease: u32, table: String, filter_json: String, after_row_id: String, limit: f64,
    ) -> Result<super::packed::Packed> {
        guard(|| {
            let rows = self.engine.tx_scan_rows(
                lease,
                &table,
                &filter(&filter_json)?,
                &after_row_id,
                int(limit, "limit")?,
            )?;
            Ok(super::packed::rows(rows))
        })
    }

    #[napi]
    pub fn tx_lock_partition_for_push(&self, lease: u32) -> Result<()> {
        guard(|| self.engine.tx_lock_partition_for_push(lease))
    }

    #[napi]
    pub fn tx_commit_rejected_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Result<()> {
        guard(|| {
            self.engine
                .tx_commit_rejected_push_result(lease, &client_id, &commit_id, &result_json)
        })
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn tx_upsert_row(
        &self, lease: u32, table: Str, row_id: Str, server_version: f64, scopes_json: Str,
        payload: Buf, column_versions: Option<Buf>, op_index: Option<f64>,
    ) -> Result<()> {
        let t = crate::telemetry::call_started(); // TEMP telemetry hook
        let out = guard(|| {
            let op_index = op_index
                .map(|v| non_negative(v, "opIndex"))
                .transpose()?
                .map(|v| v as u32);
            let row = StoredRow {
                row_id: row_id.into_string(),
                server_version: int(server_version, "serverVersion")?,
                scopes_json: scopes_json.into_string(),
                payload: payload.to_vec(),
                column_versions: column_versions.map(|c| c.to_vec()),
            };
            self.engine.tx_upsert_row(lease, &table, &row, op_index)
        });
        crate::telemetry::call_finished(t, "tx.upsertRow", crate::telemetry::SQLITE); // TEMP telemetry hook
        out
    }

    #[napi]
    pub fn tx_delete_row(&self, lease: u32, table: Str, row_id: Str) -> Result<()> {
        guard(|| self.engine.tx_delete_row(lease, &table, &row_id))
    }

    /// Changes arrive packed (see `rowpack::unpack_changes`).
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn tx_append_commit(
        &self, lease: u32, client_id: Str, client_commit_id: Str, actor_id: Str,
        created_at_ms: f64, changes: String, payloads: Buf,
    ) -> Result<i64> {
        guard(|| {
            let commit = NewCommit {
                client_id: client_id.into_string(),
                client_commit_id: client_commit_id.into_string(),
                actor_id: actor_id.into_string(),
                created_at_ms: int(created_at_ms, "createdAtMs")?,
                changes: unpack_changes(&changes, &payloads)?,
            };
            self.engine.tx_append_commit(lease, &commit)
        })
    }

    #[napi]
    pub fn tx_put_push_result(
        &self, lease: u32, client_id: Str, commit_id: Str, result_json: String,
    ) -> Result<()> {
        guard(|| {
            self.engine
                .tx_put_push_result(lease, &client_id, &commit_id, &result_json)
        })
    }

    #[napi]
    pub fn tx_set_blob_refs(
        &self, lease: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Result<()> {
        guard(|| {
            self.engine
                .tx_set_blob_refs(lease, &table, &row_id, &blob_ids)
        })
    }

    #[napi]
    pub fn tx_read_serve_gate(&self, lease: u32, running: f64) -> Result<JsServeGate> {
        guard(|| {
            Ok(self
                .engine
                .tx_read_serve_gate(lease, int(running, "runningSchemaVersion")?)?
                .into())
        })
    }

    /// Rows and tombstones of `row_ids`, packed (see `packed::prefetched`).
    #[napi]
    pub fn tx_prefetch_rows(
        &self, lease: u32, table: Str, row_ids: Vec<Str>,
    ) -> Result<super::packed::Packed> {
        guard(|| {
            let ids: Vec<&str> = row_ids.iter().map(|id| &**id).collect();
            Ok(super::packed::prefetched(
                self.engine.tx_prefetch_rows(lease, &table, &ids)?,
            ))
        })
    }
}
