//! `PgHandle` members for RFC 0007 checkpoints, reactions, admin and blob
//! reads, registered queries and index lookups. Names and argument lists
//! mirror the `SqliteHandle` members of `checkpoints.rs`, `reactions.rs`,
//! `admin.rs` and `query.rs`, whose result shaping they reuse; every call
//! returns a Promise. Storage-level writes take the lease number and
//! ignore it, as in `pg.rs`.

use super::admin::{JsBlobReferencingRow, JsCommitMetadata, JsRowScopes, JsScopeActivity};
use super::convert::{int, JsCheckpoint};
use super::packed::{self, Packed};
use super::pg::{guarded, PgHandle};
use super::query::{values, JsQueryRequest, JsQueryResult, QueryValue};
use super::reactions::{lease_expiry, out, JsNewReaction, JsPrunedReactions, JsReaction};
use crate::model::reactions::{ClaimQuery, FailureUpdate, PruneQuery};
use napi::bindgen_prelude::*;
use napi_derive::napi;

fn list<T, U: From<T>>(v: Vec<T>) -> Vec<U> {
    v.into_iter().map(Into::into).collect()
}

#[napi]
impl PgHandle {
    // ---- RFC 0007 checkpoints -------------------------------------------------------

    #[napi]
    pub async fn claim_checkpoint(
        &self, _lease: u32, partition: String, name: String, schema_version: f64, now_ms: f64,
    ) -> Result<JsCheckpoint> {
        guarded(async {
            let version = int(schema_version, "schemaVersion")?;
            let now = int(now_ms, "nowMs")?;
            Ok(self
                .e()
                .claim_checkpoint(&partition, &name, version, now)
                .await?
                .into())
        })
        .await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn advance_checkpoint(
        &self, _lease: u32, partition: String, name: String, owner_epoch: f64, watermark: f64,
        observed_rows: f64, now_ms: f64,
    ) -> Result<bool> {
        guarded(async {
            let epoch = int(owner_epoch, "ownerEpoch")?;
            let watermark = int(watermark, "watermark")?;
            let observed = int(observed_rows, "observedRows")?;
            let now = int(now_ms, "nowMs")?;
            self.e()
                .advance_checkpoint(&partition, &name, epoch, watermark, observed, now)
                .await
        })
        .await
    }

    #[napi]
    pub async fn tx_advance_checkpoint(
        &self, lease: u32, name: String, owner_epoch: f64, watermark: f64, observed_rows: f64,
        now_ms: f64,
    ) -> Result<bool> {
        guarded(async {
            let epoch = int(owner_epoch, "ownerEpoch")?;
            let watermark = int(watermark, "watermark")?;
            let observed = int(observed_rows, "observedRows")?;
            let now = int(now_ms, "nowMs")?;
            self.e()
                .tx_advance_checkpoint(lease, &name, epoch, watermark, observed, now)
                .await
        })
        .await
    }

    #[napi]
    pub async fn source_coverage_seq(&self, partition: String, tables: Vec<String>) -> Result<i64> {
        guarded(self.e().source_coverage_seq(&partition, &tables)).await
    }

    #[napi(ts_return_type = "Promise<'clean' | 'changed' | 'unverifiable'>")]
    pub async fn has_source_changes_above(
        &self, partition: String, tables: Vec<String>, seq: f64,
    ) -> Result<String> {
        guarded(async {
            let seq = int(seq, "seq")?;
            Ok(self
                .e()
                .has_source_changes_above(&partition, &tables, seq)
                .await?
                .as_str()
                .to_owned())
        })
        .await
    }

    #[napi(ts_return_type = "Promise<'activated' | 'stale' | 'unverifiable'>")]
    #[allow(clippy::too_many_arguments)]
    pub async fn activate_checkpoint(
        &self, _lease: u32, partition: String, name: String, owner_epoch: f64, watermark: f64,
        sources: Vec<String>, now_ms: f64,
    ) -> Result<String> {
        guarded(async {
            let epoch = int(owner_epoch, "ownerEpoch")?;
            let watermark = int(watermark, "watermark")?;
            let now = int(now_ms, "nowMs")?;
            Ok(self
                .e()
                .activate_checkpoint(&partition, &name, epoch, watermark, &sources, now)
                .await?
                .as_str()
                .to_owned())
        })
        .await
    }

    // ---- reactions --------------------------------------------------------------------

    #[napi]
    pub async fn tx_enqueue_reactions(
        &self, lease: u32, reactions: Vec<JsNewReaction>,
    ) -> Result<()> {
        guarded(async {
            let list = reactions
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.into_model(i))
                .collect::<crate::Result<Vec<_>>>()?;
            self.e().tx_enqueue_reactions(lease, &list).await
        })
        .await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_reactions(
        &self, _lease: u32, partition: String, lease_owner: String, types: Vec<String>,
        now_ms: f64, lease_duration_ms: f64, limit: f64,
    ) -> Result<Vec<JsReaction>> {
        guarded(async {
            let now = int(now_ms, "nowMs")?;
            let q = ClaimQuery {
                lease_owner: &lease_owner,
                types: &types,
                now_ms: now,
                lease_expires_at_ms: lease_expiry(now, lease_duration_ms)?,
                limit: int(limit, "limit")?,
            };
            Ok(out(self.e().claim_reactions(&partition, &q).await?))
        })
        .await
    }

    #[napi]
    pub async fn complete_reaction(
        &self, _lease: u32, partition: String, idempotency_key: String, lease_owner: String,
        completed_at_ms: f64,
    ) -> Result<bool> {
        guarded(async {
            let at = int(completed_at_ms, "completedAtMs")?;
            self.e()
                .complete_reaction(&partition, &idempotency_key, &lease_owner, at)
                .await
        })
        .await
    }

    #[napi]
    pub async fn extend_reaction_lease(
        &self, _lease: u32, partition: String, idempotency_key: String, lease_owner: String,
        lease_expires_at_ms: f64,
    ) -> Result<bool> {
        guarded(async {
            let at = int(lease_expires_at_ms, "leaseExpiresAtMs")?;
            self.e()
                .extend_reaction_lease(&partition, &idempotency_key, &lease_owner, at)
                .await
        })
        .await
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn fail_reaction(
        &self, _lease: u32, partition: String, idempotency_key: String, lease_owner: String,
        failure_json: String, failure_at_ms: f64, retry_at_ms: Option<f64>,
    ) -> Result<bool> {
        guarded(async {
            let u = FailureUpdate {
                lease_owner: &lease_owner,
                failure_json: &failure_json,
                failure_at_ms: int(failure_at_ms, "failure.atMs")?,
                retry_at_ms: retry_at_ms.map(|v| int(v, "retryAtMs")).transpose()?,
            };
            self.e()
                .fail_reaction(&partition, &idempotency_key, &u)
                .await
        })
        .await
    }

    #[napi]
    pub async fn retry_reaction(
        &self, _lease: u32, partition: String, idempotency_key: String, now_ms: f64,
    ) -> Result<bool> {
        guarded(async {
            let now = int(now_ms, "nowMs")?;
            self.e()
                .retry_reaction(&partition, &idempotency_key, now)
                .await
        })
        .await
    }

    #[napi]
    pub async fn get_reaction(
        &self, partition: String, idempotency_key: String,
    ) -> Result<Option<JsReaction>> {
        guarded(async {
            Ok(self
                .e()
                .get_reaction(&partition, &idempotency_key)
                .await?
                .map(Into::into))
        })
        .await
    }

    #[napi]
    pub async fn list_reactions(
        &self, partition: String, statuses: Option<Vec<String>>, types: Option<Vec<String>>,
        limit: f64,
    ) -> Result<Vec<JsReaction>> {
        guarded(async {
            let limit = int(limit, "limit")?;
            Ok(out(self
                .e()
                .list_reactions(
                    &partition,
                    statuses.as_deref().unwrap_or_default(),
                    types.as_deref().unwrap_or_default(),
                    limit,
                )
                .await?))
        })
        .await
    }

    #[napi]
    pub async fn prune_reactions(
        &self, _lease: u32, partition: String, completed_before_ms: f64,
        dead_letter_before_ms: f64, limit: f64,
    ) -> Result<JsPrunedReactions> {
        guarded(async {
            let q = PruneQuery {
                completed_before_ms: int(completed_before_ms, "completedBeforeMs")?,
                dead_letter_before_ms: int(dead_letter_before_ms, "deadLetterBeforeMs")?,
                limit: int(limit, "limit")?,
            };
            Ok(self.e().prune_reactions(&partition, &q).await?.into())
        })
        .await
    }

    // ---- admin and blob reads ----------------------------------------------------------

    #[napi]
    pub async fn list_commit_metadata(
        &self, partition: String, after_seq: f64, limit: f64, table: Option<String>,
    ) -> Result<Vec<JsCommitMetadata>> {
        guarded(async {
            let after = int(after_seq, "afterSeq")?;
            let limit = int(limit, "limit")?;
            Ok(list(
                self.e()
                    .list_commit_metadata(&partition, after, limit, table.as_deref())
                    .await?,
            ))
        })
        .await
    }

    #[napi]
    pub async fn scope_activity(
        &self, partition: String, variable: String, value: String, limit: f64,
    ) -> Result<Vec<JsScopeActivity>> {
        guarded(async {
            let limit = int(limit, "limit")?;
            Ok(list(
                self.e()
                    .scope_activity(&partition, &variable, &value, limit)
                    .await?,
            ))
        })
        .await
    }

    #[napi]
    pub async fn get_row_scopes(
        &self, partition: String, table: String, row_id: String,
    ) -> Result<Option<JsRowScopes>> {
        guarded(async {
            Ok(self
                .e()
                .get_row_scopes(&partition, &table, &row_id)
                .await?
                .map(|(server_version, scopes)| JsRowScopes {
                    server_version,
                    scopes,
                }))
        })
        .await
    }

    #[napi]
    pub async fn list_rows_referencing_blob(
        &self, partition: String, blob_id: String,
    ) -> Result<Vec<JsBlobReferencingRow>> {
        guarded(async {
            Ok(list(
                self.e()
                    .list_rows_referencing_blob(&partition, &blob_id)
                    .await?,
            ))
        })
        .await
    }

    #[napi]
    pub async fn list_referenced_blob_ids(&self, partition: String) -> Result<Vec<String>> {
        guarded(self.e().list_referenced_blob_ids(&partition)).await
    }

    // ---- registered queries and index lookups ------------------------------------------

    /// With `gate_running`, the serve gate at that version is read in the
    /// query's snapshot and returned as `gate`.
    #[napi(
        ts_return_type = "Promise<{ rows: Record<string, unknown>[]; maxCommitSeq: number; gate?: JsServeGate; error?: string }>"
    )]
    pub async fn query_authoritative(
        &self, partition: String, request: JsQueryRequest, params: Vec<QueryValue>,
        gate_running: Option<f64>,
    ) -> Result<JsQueryResult> {
        let (request, tables) = request.into_parts();
        let params = values(params);
        guarded(async {
            let running = gate_running
                .map(|v| int(v, "runningSchemaVersion"))
                .transpose()?;
            self.e()
                .query_authoritative(&partition, &request, &params, &tables, running)
                .await
                .map(JsQueryResult)
        })
        .await
    }

    #[napi(ts_return_type = "Promise<{ rows: Record<string, unknown>[]; maxCommitSeq: number }>")]
    pub async fn tx_query_authoritative(
        &self, lease: u32, request: JsQueryRequest, params: Vec<QueryValue>,
    ) -> Result<JsQueryResult> {
        let (request, tables) = request.into_parts();
        let params = values(params);
        guarded(async {
            self.e()
                .tx_query_authoritative(lease, &request, &params, &tables)
                .await
                .map(JsQueryResult)
        })
        .await
    }

    /// `values_in` absent: the caller's `values` was not an array.
    #[napi]
    pub async fn scan_rows_by_index(
        &self, partition: String, table: String, index: String, values_in: Option<Vec<QueryValue>>,
        after_row_id: String, limit: f64,
    ) -> Result<Packed> {
        let vals = values_in.map(values);
        guarded(async {
            let rows = self
                .e()
                .scan_rows_by_index(
                    &partition,
                    &table,
                    &index,
                    vals.as_deref(),
                    &after_row_id,
                    limit,
                )
                .await?;
            Ok(packed::rows(rows))
        })
        .await
    }

    #[napi]
    pub async fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values_in: Option<Vec<QueryValue>>,
        after_row_id: String, limit: f64,
    ) -> Result<Packed> {
        let vals = values_in.map(values);
        guarded(async {
            let rows = self
                .e()
                .tx_scan_rows_by_index(lease, &table, &index, vals.as_deref(), &after_row_id, limit)
                .await?;
            Ok(packed::rows(rows))
        })
        .await
    }
}
