//! Engine-neutral records that flow between the engine and its callers.
//! JSON-valued fields stay as the text the host wrote (`JSON.stringify`
//! output), so they are stored byte-identical to the in-tree storages.

pub mod admin;
pub mod reactions;

#[derive(Debug, Clone, PartialEq)]
pub struct StoredRow {
    pub row_id: String,
    pub server_version: i64,
    pub scopes_json: String,
    pub payload: Vec<u8>,
    pub column_versions: Option<Vec<u8>>,
}

/// What `prefetchRows` learned about one row id: the stored row (or its
/// absence) and, for an absent row, its tombstone.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefetched {
    pub row_id: String,
    pub row: Option<StoredRow>,
    pub tombstone_seq: Tomb,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tomb {
    Unread,
    /// The tombstone's commitSeq, or none.
    Read(Option<i64>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    Upsert,
    Delete,
}

impl ChangeOp {
    pub fn code(self) -> i64 {
        match self {
            ChangeOp::Upsert => 1,
            ChangeOp::Delete => 2,
        }
    }

    pub fn from_code(code: i64) -> ChangeOp {
        if code == 1 {
            ChangeOp::Upsert
        } else {
            ChangeOp::Delete
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub table: String,
    pub row_id: String,
    pub op: ChangeOp,
    pub row_version: Option<i64>,
    pub scopes_json: String,
    pub payload: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewCommit {
    pub client_id: String,
    pub client_commit_id: String,
    pub actor_id: String,
    pub created_at_ms: i64,
    pub changes: Vec<Change>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RegistryEntry {
    pub partition: String,
    pub log_epoch: String,
    pub epoch_required: bool,
    pub last_authenticated_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClientRecord {
    pub client_id: String,
    pub actor_id: String,
    pub wire_version: i64,
    pub cursor: i64,
    pub updated_at_ms: i64,
    pub subscriptions_json: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClientCursor {
    pub client_id: String,
    pub cursor: i64,
    pub updated_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PruneResult {
    pub previous_horizon_seq: i64,
    pub horizon_seq: i64,
    pub removed_commits: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub partition: String,
    pub name: String,
    pub schema_version: i64,
    pub state: String,
    pub watermark: i64,
    pub owner_epoch: i64,
    pub observed_rows: i64,
    pub updated_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointDeclaration {
    pub partition: String,
    pub name: String,
    pub schema_version: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServeGate {
    pub stored_schema_version: i64,
    pub log_epoch: Option<String>,
    pub pending: Vec<(String, String)>,
}

pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Which form of `pruneCommitsThrough` the host called.
#[derive(Clone)]
pub enum PruneTarget {
    /// 0.24 form: epoch-checked.
    Checked { log_epoch: String, through_seq: i64 },
    /// 0.15.x form `(partition, seq)`.
    Legacy(i64),
}

/// One result cell of a registered query, as either engine reads it
/// (PostgreSQL booleans as 0/1, JSON as its text).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// Rows of a registered query, with the snapshot's cursor.
#[derive(Debug)]
pub struct QueryOutput {
    /// The serve gate read first in the same snapshot, when asked for.
    pub gate: Option<ServeGate>,
    /// When the gate was asked for and the query failed: the failure, left
    /// for the caller to report unless the gate refuses first.
    pub error: Option<crate::core::error::Error>,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    pub max_commit_seq: i64,
}

/// A checkpoint owner's progress report (`advanceCheckpoint`).
#[derive(Debug, Clone, Copy)]
pub struct CheckpointProgress {
    pub owner_epoch: i64,
    pub watermark: i64,
    pub observed_rows: i64,
    pub now_ms: i64,
}

/// A client cursor move. With `guard` (actor id, log epoch): the guarded
/// realtime advance; without: `updateClientCursor`.
#[derive(Debug, Clone)]
pub struct CursorAdvance {
    pub client_id: String,
    pub guard: Option<(String, String)>,
    pub cursor: i64,
    pub at_ms: i64,
}
