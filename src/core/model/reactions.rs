//! Durable reactions as the engines read and write them (storage-layout
//! §2.10, §15), whatever the engine.

/// A reaction as the push transaction enqueues it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewReaction {
    pub idempotency_key: String,
    pub kind: String,
    pub version: i64,
    pub payload_json: String,
    pub source_client_id: String,
    pub source_client_commit_id: String,
    pub source_commit_seq: i64,
    pub created_at_ms: i64,
    pub max_attempts: i64,
}

/// A stored reaction; `None` stands for a NULL column.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReaction {
    pub idempotency_key: String,
    pub kind: String,
    pub version: i64,
    pub payload_json: String,
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
    pub last_failure_json: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ClaimQuery {
    pub lease_owner: String,
    pub types: Vec<String>,
    pub now_ms: i64,
    /// `min(2^53 − 1, now + duration)`, computed by the caller.
    pub lease_expires_at_ms: i64,
    pub limit: i64,
}

#[derive(Debug, Clone)]
pub struct FailureUpdate {
    pub lease_owner: String,
    /// `{code, atMs, details?}` as JSON text.
    pub failure_json: String,
    pub failure_at_ms: i64,
    /// `None`: dead-letter.
    pub retry_at_ms: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
pub struct PruneQuery {
    pub completed_before_ms: i64,
    pub dead_letter_before_ms: i64,
    pub limit: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrunedCounts {
    pub completed: i64,
    pub dead_letter: i64,
}
