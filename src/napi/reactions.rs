//! Reaction members: the transaction's enqueue, the
//! lease-holding lifecycle writes and the two reads. JSON columns cross as
//! text; the shim parses them and sorts claim results.

use super::convert::int;
use super::reply::Reply;
use super::storage::NativeEngine;
use crate::core::error::Error;
use crate::core::model::reactions::{
    ClaimQuery, FailureUpdate, NewReaction, PruneQuery, PrunedCounts, StoredReaction,
};
use crate::core::model::MAX_SAFE_INTEGER;
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

/// See `update_reaction`.
#[napi(object, object_to_js = false)]
pub struct JsReactionUpdate {
    pub kind: String,
    pub lease_owner: Option<String>,
    pub at_ms: f64,
    /// `{code, atMs, details?}` as JSON text.
    pub failure: Option<String>,
    pub retry_at_ms: Option<f64>,
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
        &self, lease: u32, partition: String, lease_owner: String, types: Vec<String>, now_ms: f64,
        lease_duration_ms: f64, limit: f64,
    ) -> Reply<Vec<StoredReaction>> {
        self.run("claimReactions", |e| {
            let now = int(now_ms, "nowMs")?;
            let q = ClaimQuery {
                lease_owner,
                types,
                now_ms: now,
                lease_expires_at_ms: lease_expiry(now, lease_duration_ms)?,
                limit: int(limit, "limit")?,
            };
            Ok(e.claim_reactions(lease, partition, q))
        })
    }

    /// The lease holder's updates of one reaction: `kind` is `complete`,
    /// `extend` (the lease, to `atMs`), `fail` (with `failure` JSON and,
    /// to retry, `retryAtMs`) or `retry` (a dead letter, now).
    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn update_reaction(
        &self, lease: u32, partition: String, idempotency_key: String, update: JsReactionUpdate,
    ) -> Reply<bool> {
        let member = match update.kind.as_str() {
            "complete" => "completeReaction",
            "extend" => "extendReactionLease",
            "fail" => "failReaction",
            _ => "retryReaction",
        };
        self.run(member, |e| {
            let at = int(update.at_ms, "atMs")?;
            let owner = || {
                let owner = update.lease_owner.clone();
                owner.ok_or_else(|| Error::invalid("leaseOwner must be a string"))
            };
            let key = idempotency_key;
            Ok(match update.kind.as_str() {
                "complete" => e.complete_reaction(lease, partition, key, owner()?, at),
                "extend" => e.extend_reaction_lease(lease, partition, key, owner()?, at),
                "retry" => e.retry_reaction(lease, partition, key, at),
                "fail" => {
                    let u = FailureUpdate {
                        lease_owner: owner()?,
                        failure_json: update.failure.unwrap_or_default(),
                        failure_at_ms: at,
                        retry_at_ms: update
                            .retry_at_ms
                            .map(|v| int(v, "retryAtMs"))
                            .transpose()?,
                    };
                    e.fail_reaction(lease, partition, key, u)
                }
                other => return Err(Error::invalid(format!("unknown reaction update {other:?}"))),
            })
        })
    }

    #[napi(ts_return_type = "JsReaction[] | Promise<JsReaction[]>")]
    pub fn list_reactions(
        &self, partition: String, statuses: Option<Vec<String>>, types: Option<Vec<String>>,
        limit: f64,
    ) -> Reply<Vec<StoredReaction>> {
        self.run("listReactions", |e| {
            let limit = int(limit, "limit")?;
            let (statuses, types) = (statuses.unwrap_or_default(), types.unwrap_or_default());
            Ok(e.list_reactions(partition, statuses, types, limit))
        })
    }

    #[napi(ts_return_type = "JsPrunedReactions | Promise<JsPrunedReactions>")]
    pub fn prune_reactions(
        &self, lease: u32, partition: String, completed_before_ms: f64, dead_letter_before_ms: f64,
        limit: f64,
    ) -> Reply<PrunedCounts> {
        self.run("pruneReactions", |e| {
            let q = PruneQuery {
                completed_before_ms: int(completed_before_ms, "completedBeforeMs")?,
                dead_letter_before_ms: int(dead_letter_before_ms, "deadLetterBeforeMs")?,
                limit: int(limit, "limit")?,
            };
            Ok(e.prune_reactions(lease, partition, q))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::lease_expiry;
    use crate::core::model::MAX_SAFE_INTEGER;

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
