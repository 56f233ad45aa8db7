//! Reaction members: the transaction's enqueue, the
//! lease-holding lifecycle writes and the two reads. JSON columns cross as
//! text; the shim parses them and sorts claim results.

use super::convert::int;
use super::reply::Reply;
use super::storage::{list, NativeEngine};
use crate::error::Error;
use crate::model::reactions::{
    ClaimQuery, FailureUpdate, NewReaction, PruneQuery, PrunedCounts, StoredReaction,
};
use crate::model::MAX_SAFE_INTEGER;
use napi_derive::napi;

#[napi(object, object_to_js = false)]
pub struct JsNewReaction {
    pub idempotency_key: String,
    #[napi(js_name = "type")]
    pub kind: String,
    pub version: f64,
    /// `JSON.stringify(payload)`.
    pub payload: String,
    pub source_client_id: String,
    pub source_client_commit_id: String,
    pub source_commit_seq: f64,
    pub created_at_ms: f64,
    pub max_attempts: f64,
}

impl JsNewReaction {
    pub(super) fn into_model(self, i: usize) -> crate::Result<NewReaction> {
        let field = |name: &str| format!("reactions[{i}].{name}");
        Ok(NewReaction {
            version: int(self.version, &field("version"))?,
            source_commit_seq: int(self.source_commit_seq, &field("sourceCommitSeq"))?,
            created_at_ms: int(self.created_at_ms, &field("createdAtMs"))?,
            max_attempts: int(self.max_attempts, &field("maxAttempts"))?,
            idempotency_key: self.idempotency_key,
            kind: self.kind,
            payload_json: self.payload,
            source_client_id: self.source_client_id,
            source_client_commit_id: self.source_client_commit_id,
        })
    }
}

#[napi(object, object_from_js = false)]
pub struct JsReaction {
    pub idempotency_key: String,
    #[napi(js_name = "type")]
    pub kind: String,
    pub version: i64,
    /// JSON text.
    pub payload: String,
    pub source_client_id: String,
    pub source_client_commit_id: String,
    pub source_commit_seq: i64,
    pub created_at_ms: i64,
    pub max_attempts: i64,
    pub status: String,
    pub attempts: i64,
    pub available_at_ms: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
    /// JSON text.
    pub last_failure: Option<String>,
}

impl From<StoredReaction> for JsReaction {
    fn from(r: StoredReaction) -> Self {
        JsReaction {
            idempotency_key: r.idempotency_key,
            kind: r.kind,
            version: r.version,
            payload: r.payload_json,
            source_client_id: r.source_client_id,
            source_client_commit_id: r.source_client_commit_id,
            source_commit_seq: r.source_commit_seq,
            created_at_ms: r.created_at_ms,
            max_attempts: r.max_attempts,
            status: r.status,
            attempts: r.attempts,
            available_at_ms: r.available_at_ms,
            lease_owner: r.lease_owner,
            lease_expires_at_ms: r.lease_expires_at_ms,
            completed_at_ms: r.completed_at_ms,
            last_failure: r.last_failure_json,
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct JsPrunedReactions {
    pub completed: i64,
    pub dead_letter: i64,
}

impl From<PrunedCounts> for JsPrunedReactions {
    fn from(c: PrunedCounts) -> Self {
        JsPrunedReactions {
            completed: c.completed,
            dead_letter: c.dead_letter,
        }
    }
}

/// `min(2^53 − 1, now + duration)` as the in-tree storage computes it in
/// doubles: exact whenever the sum is a safe integer, capped otherwise.
pub(super) fn lease_expiry(now_ms: i64, duration_ms: f64) -> crate::Result<i64> {
    if duration_ms.is_nan() {
        return Err(Error::invalid("leaseDurationMs must be a number"));
    }
    let sum = (now_ms as f64 + duration_ms).min(MAX_SAFE_INTEGER as f64);
    int(sum, "nowMs + leaseDurationMs")
}

#[napi]
impl NativeEngine {
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn tx_enqueue_reactions(&self, lease: u32, reactions: Vec<JsNewReaction>) -> Reply<()> {
        self.run("tx.enqueueReactions", |e| {
            let list = reactions
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.into_model(i))
                .collect::<crate::Result<Vec<_>>>()?;
            Ok(e.tx_enqueue_reactions(lease, list))
        })
    }

    #[napi(ts_return_type = "JsReaction[] | Promise<JsReaction[]>")]
    #[allow(clippy::too_many_arguments)]
    pub fn claim_reactions(
        &self,
        lease: u32,
        partition: String,
        lease_owner: String,
        types: Vec<String>,
        now_ms: f64,
        lease_duration_ms: f64,
        limit: f64,
    ) -> Reply<Vec<JsReaction>> {
        self.run("claimReactions", |e| {
            let now = int(now_ms, "nowMs")?;
            let q = ClaimQuery {
                lease_owner,
                types,
                now_ms: now,
                lease_expires_at_ms: lease_expiry(now, lease_duration_ms)?,
                limit: int(limit, "limit")?,
            };
            Ok(e.claim_reactions(lease, partition, q).map(list))
        })
    }

    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn complete_reaction(
        &self,
        lease: u32,
        partition: String,
        idempotency_key: String,
        lease_owner: String,
        completed_at_ms: f64,
    ) -> Reply<bool> {
        self.run("completeReaction", |e| {
            let at = int(completed_at_ms, "completedAtMs")?;
            Ok(e.complete_reaction(lease, partition, idempotency_key, lease_owner, at))
        })
    }

    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn extend_reaction_lease(
        &self,
        lease: u32,
        partition: String,
        idempotency_key: String,
        lease_owner: String,
        lease_expires_at_ms: f64,
    ) -> Reply<bool> {
        self.run("extendReactionLease", |e| {
            let at = int(lease_expires_at_ms, "leaseExpiresAtMs")?;
            Ok(e.extend_reaction_lease(lease, partition, idempotency_key, lease_owner, at))
        })
    }

    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    #[allow(clippy::too_many_arguments)]
    pub fn fail_reaction(
        &self,
        lease: u32,
        partition: String,
        idempotency_key: String,
        lease_owner: String,
        failure_json: String,
        failure_at_ms: f64,
        retry_at_ms: Option<f64>,
    ) -> Reply<bool> {
        self.run("failReaction", |e| {
            let u = FailureUpdate {
                lease_owner,
                failure_json,
                failure_at_ms: int(failure_at_ms, "failure.atMs")?,
                retry_at_ms: retry_at_ms.map(|v| int(v, "retryAtMs")).transpose()?,
            };
            Ok(e.fail_reaction(lease, partition, idempotency_key, u))
        })
    }

    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn retry_reaction(
        &self,
        lease: u32,
        partition: String,
        idempotency_key: String,
        now_ms: f64,
    ) -> Reply<bool> {
        self.run("retryReaction", |e| {
            let now = int(now_ms, "nowMs")?;
            Ok(e.retry_reaction(lease, partition, idempotency_key, now))
        })
    }

    #[napi(ts_return_type = "JsReaction | null | Promise<JsReaction | null>")]
    pub fn get_reaction(
        &self,
        partition: String,
        idempotency_key: String,
    ) -> Reply<Option<JsReaction>> {
        self.run("getReaction", |e| {
            Ok(e.get_reaction(partition, idempotency_key)
                .map(|r| r.map(Into::into)))
        })
    }

    #[napi(ts_return_type = "JsReaction[] | Promise<JsReaction[]>")]
    pub fn list_reactions(
        &self,
        partition: String,
        statuses: Option<Vec<String>>,
        types: Option<Vec<String>>,
        limit: f64,
    ) -> Reply<Vec<JsReaction>> {
        self.run("listReactions", |e| {
            let limit = int(limit, "limit")?;
            let (statuses, types) = (statuses.unwrap_or_default(), types.unwrap_or_default());
            Ok(e.list_reactions(partition, statuses, types, limit)
                .map(list))
        })
    }

    #[napi(ts_return_type = "JsPrunedReactions | Promise<JsPrunedReactions>")]
    pub fn prune_reactions(
        &self,
        lease: u32,
        partition: String,
        completed_before_ms: f64,
        dead_letter_before_ms: f64,
        limit: f64,
    ) -> Reply<JsPrunedReactions> {
        self.run("pruneReactions", |e| {
            let q = PruneQuery {
                completed_before_ms: int(completed_before_ms, "completedBeforeMs")?,
                dead_letter_before_ms: int(dead_letter_before_ms, "deadLetterBeforeMs")?,
                limit: int(limit, "limit")?,
            };
            Ok(e.prune_reactions(lease, partition, q).map(Into::into))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::lease_expiry;
    use crate::model::MAX_SAFE_INTEGER;

    #[test]
    fn lease_expiry_caps_at_max_safe_integer() {
        assert_eq!(lease_expiry(10, 5.0).unwrap(), 15);
        assert_eq!(
            lease_expiry(MAX_SAFE_INTEGER - 1, 5.0).unwrap(),
            MAX_SAFE_INTEGER
        );
        assert_eq!(lease_expiry(1, f64::INFINITY).unwrap(), MAX_SAFE_INTEGER);
        assert_eq!(lease_expiry(1, 1e300).unwrap(), MAX_SAFE_INTEGER);
        assert!(lease_expiry(1, f64::NAN).is_err());
        assert!(lease_expiry(1, 0.5).is_err());
    }
}
