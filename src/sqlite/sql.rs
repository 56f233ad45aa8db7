//! SQL text of the SQLite dialect: the meta layout shared with the in-tree
//! `SqliteServerStorage`, and the statements the engine prepares. Keeping
//! the text here leaves the engine modules with logic only.

/// Meta tables and indexes, in the in-tree layout (storage-layout §2, §4).
pub const META_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS sync_partitions(
  partition TEXT PRIMARY KEY,
  max_commit_seq INTEGER NOT NULL DEFAULT 0,
  horizon_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sync_partition_registry(
  partition TEXT PRIMARY KEY,
  log_epoch TEXT NOT NULL,
  epoch_required INTEGER NOT NULL DEFAULT 0,
  last_authenticated_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sync_row_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, row_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, row_id)
);
CREATE TABLE IF NOT EXISTS sync_commits(
  partition TEXT NOT NULL, commit_seq INTEGER NOT NULL,
  client_id TEXT NOT NULL, client_commit_id TEXT NOT NULL,
  actor_id TEXT NOT NULL, created_at_ms INTEGER NOT NULL,
  writer_version INTEGER,
  PRIMARY KEY(partition, commit_seq)
);
CREATE INDEX IF NOT EXISTS sync_commits_by_time
  ON sync_commits(partition, created_at_ms);
CREATE TABLE IF NOT EXISTS sync_changes(
  partition TEXT NOT NULL, commit_seq INTEGER NOT NULL, idx INTEGER NOT NULL,
  tbl TEXT NOT NULL, row_id TEXT NOT NULL, op INTEGER NOT NULL,
  row_version INTEGER, scopes TEXT NOT NULL, payload BLOB,
  PRIMARY KEY(partition, commit_seq, idx)
);
CREATE INDEX IF NOT EXISTS sync_changes_by_table
  ON sync_changes(partition, commit_seq, tbl, idx);
CREATE TABLE IF NOT EXISTS sync_change_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, commit_seq INTEGER NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, commit_seq)
);
CREATE TABLE IF NOT EXISTS sync_push_results(
  partition TEXT NOT NULL, client_id TEXT NOT NULL,
  client_commit_id TEXT NOT NULL, result TEXT NOT NULL,
  PRIMARY KEY(partition, client_id, client_commit_id)
);
CREATE TABLE IF NOT EXISTS sync_reactions(
  partition TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  type TEXT NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL,
  source_client_id TEXT NOT NULL, source_client_commit_id TEXT NOT NULL,
  source_commit_seq INTEGER NOT NULL, created_at_ms INTEGER NOT NULL,
  available_at_ms INTEGER NOT NULL, status TEXT NOT NULL,
  attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL,
  lease_owner TEXT, lease_expires_at_ms INTEGER, completed_at_ms INTEGER,
  last_failure TEXT,
  PRIMARY KEY(partition, idempotency_key),
  CHECK(status IN ('pending', 'leased', 'completed', 'dead-letter'))
);
CREATE INDEX IF NOT EXISTS sync_reactions_due
  ON sync_reactions(partition, status, available_at_ms, created_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_lease
  ON sync_reactions(partition, status, lease_expires_at_ms);
CREATE INDEX IF NOT EXISTS sync_reactions_completed
  ON sync_reactions(partition, status, completed_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_dead_letter
  ON sync_reactions(partition, status, available_at_ms, idempotency_key);
CREATE TABLE IF NOT EXISTS sync_clients(
  partition TEXT NOT NULL, client_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  wire_version INTEGER NOT NULL DEFAULT 1,
  cursor INTEGER NOT NULL, subscriptions TEXT NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY(partition, client_id)
);
CREATE TABLE IF NOT EXISTS sync_blob_refs(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id TEXT NOT NULL,
  blob_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, row_id, blob_id)
);
CREATE INDEX IF NOT EXISTS sync_blob_refs_by_blob
  ON sync_blob_refs(partition, blob_id);
CREATE TABLE IF NOT EXISTS sync_tombstones(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id TEXT NOT NULL,
  commit_seq INTEGER NOT NULL,
  PRIMARY KEY(partition, tbl, row_id)
);
CREATE TABLE IF NOT EXISTS sync_backfill_checkpoints(
  partition TEXT NOT NULL, name TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('declared', 'backfilling', 'activated')),
  watermark INTEGER NOT NULL DEFAULT 0,
  owner_epoch INTEGER NOT NULL DEFAULT 0,
  observed_rows INTEGER NOT NULL DEFAULT 0,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY(partition, name)
);
CREATE TABLE IF NOT EXISTS sync_writer_fence(
  partition TEXT PRIMARY KEY,
  required_writer_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sync_schema_meta(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}'
);
"#;

/// The row scope index by row: not in [`META_DDL`], which runs when the
/// storage opens, on the calling thread (the first call, or `storage.db`).
/// Built over every entry of a file an older version wrote (hundreds of
/// milliseconds at 200k commits, issue 48), it is created there only when
/// the table is empty, and otherwise by `ensureSchema`, off that thread.
pub const ROW_SCOPES_BY_ROW: &str = "sync_row_scopes_by_row";
pub const ROW_SCOPES_BY_ROW_DDL: &str =
    "CREATE INDEX IF NOT EXISTS sync_row_scopes_by_row ON sync_row_scopes(partition, tbl, row_id)";

/// Objects whose presence means the meta DDL has already run.
pub const META_OBJECTS: &[&str] = &[
    "sync_partitions",
    "sync_partition_registry",
    "sync_row_scopes",
    "sync_commits",
    "sync_commits_by_time",
    "sync_changes",
    "sync_changes_by_table",
    "sync_change_scopes",
    "sync_push_results",
    "sync_reactions",
    "sync_reactions_due",
    "sync_reactions_lease",
    "sync_reactions_completed",
    "sync_reactions_dead_letter",
    "sync_clients",
    "sync_blob_refs",
    "sync_blob_refs_by_blob",
    "sync_tombstones",
    "sync_backfill_checkpoints",
    "sync_writer_fence",
    "sync_schema_meta",
    "sync_commits_writer_fence",
];

/// The writer fence (storage-layout §4.2): same name and condition as the
/// in-tree trigger, so processes of either implementation fence each other.
pub const WRITER_FENCE_TRIGGER: &str = r#"
CREATE TRIGGER IF NOT EXISTS sync_commits_writer_fence
BEFORE INSERT ON sync_commits
FOR EACH ROW
WHEN EXISTS (
  SELECT 1 FROM sync_writer_fence f
  WHERE f.partition = NEW.partition
    AND (NEW.writer_version IS NULL OR NEW.writer_version < f.required_writer_version)
)
BEGIN
  SELECT RAISE(ABORT, 'sync.storage.writer_fence_rejected');
END
"#;

/// See `meta::fence_existing_partitions`. `WHERE true` keeps SQLite from
/// reading `ON CONFLICT` as a join constraint of the SELECT.
pub const FENCE_EXISTING_PARTITIONS: &str =
    "INSERT INTO sync_writer_fence (partition, required_writer_version)
SELECT partition, ?1 FROM sync_partitions WHERE true
ON CONFLICT (partition) DO UPDATE SET
  required_writer_version = max(required_writer_version, excluded.required_writer_version)";

/// The serve gate in one statement, so one snapshot: a first row with the
/// stored schema version and the partition's epoch, then one row per
/// incomplete checkpoint at the running version (any partition).
pub const SERVE_GATE: &str = "SELECT 0, (SELECT schema_version FROM sync_schema_meta WHERE id = 1), \
(SELECT log_epoch FROM sync_partition_registry WHERE partition = ?1) \
UNION ALL SELECT 1, partition, name FROM sync_backfill_checkpoints WHERE schema_version = ?2 AND state <> 'activated'";

pub const SCHEMA_META_DDL: &str = "CREATE TABLE IF NOT EXISTS sync_schema_meta(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}'
)";

pub const SAVEPOINT: &str = "SAVEPOINT syncular_push_candidate";
/// Each lease after the first of a commit group runs in this savepoint.
pub const GROUP_MEMBER: &str = "SAVEPOINT syncular_group_member";
pub const RELEASE_GROUP_MEMBER: &str = "RELEASE SAVEPOINT syncular_group_member";
pub const ROLLBACK_TO_GROUP_MEMBER: &str = "ROLLBACK TO SAVEPOINT syncular_group_member";
pub const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT syncular_push_candidate";
pub const RELEASE_SAVEPOINT: &str = "RELEASE SAVEPOINT syncular_push_candidate";

/// `?,?,…` for an `IN (…)` list.
pub fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 2);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('?');
    }
    s
}

/// The scope values of a probe, bound into `value IN (…)`. A short list
/// binds one variable per value; a long one binds a single JSON array read
/// through `json_each`, which stays under SQLite's variable limit (32,766)
/// and keeps one cached statement for every large size.
pub enum ValueSet<'a> {
    Each(&'a [String]),
    Json(String),
}

/// Above this many values a probe binds them as one JSON array.
const EACH_MAX: usize = 64;

impl<'a> ValueSet<'a> {
    pub fn new(values: &'a [String]) -> ValueSet<'a> {
        if values.len() <= EACH_MAX {
            ValueSet::Each(values)
        } else {
            ValueSet::Json(serde_json::to_string(values).unwrap_or_else(|_| "[]".into()))
        }
    }

    /// The list's text, its variables numbered from `first`.
    pub fn sql(&self, first: usize) -> String {
        match self {
            ValueSet::Each(v) => (0..v.len())
                .map(|i| format!("?{}", first + i))
                .collect::<Vec<_>>()
                .join(","),
            ValueSet::Json(_) => format!("SELECT value FROM json_each(?{first})"),
        }
    }

    pub fn bind<'b>(&'b self, binds: &mut Vec<&'b dyn rusqlite::ToSql>) {
        match self {
            ValueSet::Each(v) => binds.extend(v.iter().map(|x| x as &dyn rusqlite::ToSql)),
            ValueSet::Json(j) => binds.push(j),
        }
    }
}
