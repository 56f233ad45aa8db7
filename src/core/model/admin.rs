//! Admin console and blob reads (contract S40–S45), whatever the engine.

#[derive(Debug, Clone, PartialEq)]
pub struct CommitMetadata {
    pub commit_seq: i64,
    pub client_id: String,
    pub client_commit_id: String,
    pub actor_id: String,
    pub created_at_ms: i64,
    pub change_count: i64,
    pub tables: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScopeActivity {
    pub commit_seq: i64,
    pub table: String,
    pub created_at_ms: i64,
    pub actor_id: String,
    pub change_count: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BlobReferencingRow {
    pub table: String,
    pub row_id: String,
    pub scopes_json: String,
}
