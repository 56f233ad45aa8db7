//! JS-facing shapes and argument checks.

use crate::error::{Error, Result};
use crate::model::*;
use napi_derive::napi;

/// A JS number that must be a safe integer (NaN, fractions, ±Infinity and
/// values beyond 2^53 are refused, never truncated).
pub fn int(v: f64, name: &str) -> Result<i64> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE_INTEGER as f64 {
        Ok(v as i64)
    } else {
        Err(Error::invalid(format!(
            "{name} must be a safe integer, got {v}"
        )))
    }
}

pub fn non_negative(v: f64, name: &str) -> Result<i64> {
    let i = int(v, name)?;
    if i < 0 {
        return Err(Error::invalid(format!("{name} must be ≥ 0, got {v}")));
    }
    Ok(i)
}

/// `queryTimeoutMs`: a positive integer of milliseconds, or the default.
pub fn query_timeout(ms: Option<f64>) -> Result<std::time::Duration> {
    match ms {
        None => Ok(crate::query::DEFAULT_TIMEOUT),
        Some(v) => {
            let ms = int(v, "queryTimeoutMs")?;
            if ms < 1 {
                return Err(Error::invalid(format!(
                    "queryTimeoutMs must be ≥ 1, got {v}"
                )));
            }
            Ok(std::time::Duration::from_millis(ms as u64))
        }
    }
}

#[napi(object)]
pub struct JsRegistryEntry {
    pub partition: String,
    pub log_epoch: String,
    pub epoch_required: bool,
    pub last_authenticated_at_ms: i64,
}

impl From<RegistryEntry> for JsRegistryEntry {
    fn from(e: RegistryEntry) -> Self {
        JsRegistryEntry {
            partition: e.partition,
            log_epoch: e.log_epoch,
            epoch_required: e.epoch_required,
            last_authenticated_at_ms: e.last_authenticated_at_ms,
        }
    }
}

#[napi(object)]
pub struct JsClientRecord {
    pub client_id: String,
    pub actor_id: String,
    pub wire_version: i64,
    pub cursor: i64,
    pub updated_at_ms: i64,
    pub subscriptions: String,
}

impl From<ClientRecord> for JsClientRecord {
    fn from(c: ClientRecord) -> Self {
        JsClientRecord {
            client_id: c.client_id,
            actor_id: c.actor_id,
            wire_version: c.wire_version,
            cursor: c.cursor,
            updated_at_ms: c.updated_at_ms,
            subscriptions: c.subscriptions_json,
        }
    }
}

#[napi(object)]
pub struct JsClientCursor {
    pub client_id: String,
    pub cursor: i64,
    pub updated_at_ms: i64,
}

impl From<ClientCursor> for JsClientCursor {
    fn from(c: ClientCursor) -> Self {
        JsClientCursor {
            client_id: c.client_id,
            cursor: c.cursor,
            updated_at_ms: c.updated_at_ms,
        }
    }
}

#[napi(object)]
pub struct JsPruneResult {
    pub previous_horizon_seq: i64,
    pub horizon_seq: i64,
    pub removed_commits: i64,
}

impl From<PruneResult> for JsPruneResult {
    fn from(p: PruneResult) -> Self {
        JsPruneResult {
            previous_horizon_seq: p.previous_horizon_seq,
            horizon_seq: p.horizon_seq,
            removed_commits: p.removed_commits,
        }
    }
}

#[napi(object)]
pub struct JsPending {
    pub partition: String,
    pub name: String,
}

#[napi(object)]
pub struct JsServeGate {
    pub stored_schema_version: i64,
    pub log_epoch: Option<String>,
    pub pending: Vec<JsPending>,
}

impl From<ServeGate> for JsServeGate {
    fn from(g: ServeGate) -> Self {
        JsServeGate {
            stored_schema_version: g.stored_schema_version,
            log_epoch: g.log_epoch,
            pending: g
                .pending
                .into_iter()
                .map(|(partition, name)| JsPending { partition, name })
                .collect(),
        }
    }
}

#[napi(object)]
pub struct JsCheckpoint {
    pub partition: String,
    pub name: String,
    pub schema_version: i64,
    pub state: String,
    pub watermark: i64,
    pub owner_epoch: i64,
    pub observed_rows: i64,
    pub updated_at_ms: i64,
}

impl From<Checkpoint> for JsCheckpoint {
    fn from(c: Checkpoint) -> Self {
        JsCheckpoint {
            partition: c.partition,
            name: c.name,
            schema_version: c.schema_version,
            state: c.state,
            watermark: c.watermark,
            owner_epoch: c.owner_epoch,
            observed_rows: c.observed_rows,
            updated_at_ms: c.updated_at_ms,
        }
    }
}

#[napi(object)]
pub struct JsDeclaration {
    pub partition: String,
    pub name: String,
    pub schema_version: f64,
}

impl JsDeclaration {
    pub fn into_model(self) -> Result<CheckpointDeclaration> {
        Ok(CheckpointDeclaration {
            schema_version: int(self.schema_version, "checkpoint schemaVersion")?,
            partition: self.partition,
            name: self.name,
        })
    }
}

/// The prune cursor of `pruneCommitsThrough`: `log_epoch` absent selects the
/// legacy 0.15.x form.
pub fn prune_target(through_seq: f64, log_epoch: Option<String>) -> Result<PruneTarget> {
    let through = non_negative(through_seq, "throughSeq")
        .map_err(|_| crate::error::Error::query("sync.storage.invalid_prune_cursor"))?;
    match log_epoch {
        Some(e) if e.is_empty() => Err(crate::error::Error::query(
            "sync.storage.invalid_prune_cursor",
        )),
        Some(e) => Ok(PruneTarget::Checked {
            log_epoch: e,
            through_seq: through,
        }),
        None => Ok(PruneTarget::Legacy(through)),
    }
}
