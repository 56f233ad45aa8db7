//! SQL text of the PostgreSQL dialect: the meta layout shared with the
//! in-tree `PostgresServerStorage` (storage-layout §2, §4; BIGINT, SMALLINT,
//! JSONB and BYTEA columns), the writer fence, and the statements the
//! engine runs. Placeholders are `$n`.

/// Meta tables and indexes, one statement per `;`.
pub const META_DDL: &str = r#"
CREATE TABLE IF NOT EXISTS sync_partitions(
  partition TEXT PRIMARY KEY,
  max_commit_seq BIGINT NOT NULL DEFAULT 0,
  horizon_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sync_partition_registry(
  partition TEXT PRIMARY KEY,
  log_epoch TEXT NOT NULL,
  epoch_required BOOLEAN NOT NULL DEFAULT FALSE,
  last_authenticated_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS sync_row_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, row_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, row_id)
);
CREATE INDEX IF NOT EXISTS sync_row_scopes_by_row
  ON sync_row_scopes(partition, tbl, row_id);
CREATE TABLE IF NOT EXISTS sync_commits(
  partition TEXT NOT NULL, commit_seq BIGINT NOT NULL,
  client_id TEXT NOT NULL, client_commit_id TEXT NOT NULL,
  actor_id TEXT NOT NULL, created_at_ms BIGINT NOT NULL,
  writer_version BIGINT,
  PRIMARY KEY(partition, commit_seq)
);
CREATE INDEX IF NOT EXISTS sync_commits_by_time
  ON sync_commits(partition, created_at_ms);
CREATE TABLE IF NOT EXISTS sync_changes(
  partition TEXT NOT NULL, commit_seq BIGINT NOT NULL, idx INTEGER NOT NULL,
  tbl TEXT NOT NULL, row_id TEXT NOT NULL, op SMALLINT NOT NULL,
  row_version BIGINT, scopes JSONB NOT NULL, payload BYTEA,
  PRIMARY KEY(partition, commit_seq, idx)
);
CREATE INDEX IF NOT EXISTS sync_changes_by_table
  ON sync_changes(partition, commit_seq, tbl, idx);
CREATE TABLE IF NOT EXISTS sync_change_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, commit_seq BIGINT NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, commit_seq)
);
CREATE TABLE IF NOT EXISTS sync_push_results(
  partition TEXT NOT NULL, client_id TEXT NOT NULL,
  client_commit_id TEXT NOT NULL, result JSONB NOT NULL,
  PRIMARY KEY(partition, client_id, client_commit_id)
);
CREATE TABLE IF NOT EXISTS sync_reactions(
  partition TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  type TEXT NOT NULL, version INTEGER NOT NULL, payload JSONB NOT NULL,
  source_client_id TEXT NOT NULL, source_client_commit_id TEXT NOT NULL,
  source_commit_seq BIGINT NOT NULL, created_at_ms BIGINT NOT NULL,
  available_at_ms BIGINT NOT NULL, status TEXT NOT NULL,
  attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL,
  lease_owner TEXT, lease_expires_at_ms BIGINT, completed_at_ms BIGINT,
  last_failure JSONB,
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
  cursor BIGINT NOT NULL, subscriptions JSONB NOT NULL,
  updated_at_ms BIGINT NOT NULL,
  PRIMARY KEY(partition, client_id)
);
ALTER TABLE sync_clients ADD COLUMN IF NOT EXISTS wire_version INTEGER NOT NULL DEFAULT 1;
CREATE TABLE IF NOT EXISTS sync_blob_refs(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id TEXT NOT NULL,
  blob_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, row_id, blob_id)
);
CREATE INDEX IF NOT EXISTS sync_blob_refs_by_blob
  ON sync_blob_refs(partition, blob_id);
CREATE TABLE IF NOT EXISTS sync_tombstones(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id TEXT NOT NULL,
  commit_seq BIGINT NOT NULL,
  PRIMARY KEY(partition, tbl, row_id)
);
CREATE TABLE IF NOT EXISTS sync_backfill_checkpoints(
  partition TEXT NOT NULL, name TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('declared', 'backfilling', 'activated')),
  watermark BIGINT NOT NULL DEFAULT 0,
  owner_epoch BIGINT NOT NULL DEFAULT 0,
  observed_rows BIGINT NOT NULL DEFAULT 0,
  updated_at_ms BIGINT NOT NULL,
  PRIMARY KEY(partition, name)
);
CREATE TABLE IF NOT EXISTS sync_writer_fence(
  partition TEXT PRIMARY KEY,
  required_writer_version INTEGER NOT NULL
);
ALTER TABLE sync_commits ADD COLUMN IF NOT EXISTS writer_version BIGINT;
CREATE TABLE IF NOT EXISTS sync_schema_meta(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version BIGINT NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}'
)
"#;

/// The writer fence (storage-layout §4.2), sent as separate statements: the
/// plpgsql body cannot go through the `;` split. Same names and condition
/// as the in-tree storage, so processes of either implementation fence each
/// other. Every name is qualified with `schema` (as PostgreSQL's
/// `quote_ident` renders it): the trigger fires in whatever session inserts
/// into `sync_commits`, whose `search_path` may not name our schema.
pub fn fence_ddl(schema: &str) -> [String; 3] {
    [
        format!(
            r#"CREATE OR REPLACE FUNCTION {schema}.syncular_writer_fence() RETURNS trigger AS $fence$
BEGIN
  IF EXISTS (
    SELECT 1 FROM {schema}.sync_writer_fence f
    WHERE f.partition = NEW.partition
      AND (NEW.writer_version IS NULL OR NEW.writer_version < f.required_writer_version)
  ) THEN
    RAISE EXCEPTION 'sync.storage.writer_fence_rejected';
  END IF;
  RETURN NEW;
END
$fence$ LANGUAGE plpgsql"#
        ),
        format!("DROP TRIGGER IF EXISTS sync_commits_writer_fence ON {schema}.sync_commits"),
        format!(
            "CREATE TRIGGER sync_commits_writer_fence BEFORE INSERT ON {schema}.sync_commits \
             FOR EACH ROW EXECUTE FUNCTION {schema}.syncular_writer_fence()"
        ),
    ]
}

/// Relations whose presence (in the first schema of the search path), with
/// the fence trigger and the two late columns, means the meta DDL has run.
pub const META_OBJECTS: &[&str] = &[
    "sync_partitions",
    "sync_partition_registry",
    "sync_row_scopes",
    "sync_row_scopes_by_row",
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
];

/// Counts `META_OBJECTS`, counting the relation set as one short when the
/// trigger or a late column is missing, or when the fence function names
/// its table without our schema (written by an older version of this
/// package, or by the in-tree storage, whose `migrate()` replaces it with
/// an unqualified body on every `ensureSchema`).
pub const COUNT_META_OBJECTS: &str = "SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = current_schema() AND c.relname = ANY($1))
 - CASE WHEN EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relname = 'sync_commits' AND t.tgname = 'sync_commits_writer_fence')
     AND EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
        AND table_name = 'sync_commits' AND column_name = 'writer_version')
     AND EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
        AND table_name = 'sync_clients' AND column_name = 'wire_version')
     AND EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.proname = 'syncular_writer_fence'
        AND strpos(p.prosrc, quote_ident(current_schema()) || '.sync_writer_fence') > 0)
   THEN 0 ELSE 1 END";

pub const SCHEMA_META_DDL: &str = "CREATE TABLE IF NOT EXISTS sync_schema_meta(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version BIGINT NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}'
)";

/// The migration fence (see the SQLite text).
pub const FENCE_EXISTING_PARTITIONS: &str =
    "INSERT INTO sync_writer_fence (partition, required_writer_version)
SELECT partition, $1 FROM sync_partitions
ON CONFLICT (partition) DO UPDATE SET required_writer_version =
  GREATEST(sync_writer_fence.required_writer_version, EXCLUDED.required_writer_version)";

/// The serve gate in one statement, so one snapshot (see the SQLite text).
pub const SERVE_GATE: &str = "SELECT 0::int AS k, (SELECT schema_version FROM sync_schema_meta WHERE id = 1)::text AS a, \
(SELECT log_epoch FROM sync_partition_registry WHERE partition = $1) AS b \
UNION ALL SELECT 1, partition, name FROM sync_backfill_checkpoints WHERE schema_version = $2 AND state <> 'activated'";

pub const SAVEPOINT: &str = "SAVEPOINT syncular_push_candidate";
pub const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT syncular_push_candidate";
pub const RELEASE_SAVEPOINT: &str = "RELEASE SAVEPOINT syncular_push_candidate";

/// The push lock (storage-layout §11.2, newer form): lock the counter row;
/// only when it is missing, insert it and lock again.
pub const LOCK_PARTITION: &str =
    "SELECT max_commit_seq FROM sync_partitions WHERE partition = $1 FOR UPDATE";
pub const INSERT_PARTITION: &str =
    "INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ($1, 0) ON CONFLICT DO NOTHING";

/// `COMMIT` behind a statement that fails in an aborted transaction:
/// PostgreSQL answers a bare `COMMIT` there with `ROLLBACK` and no error,
/// and a caller must never be told that writes are durable when an earlier
/// error (a deferred write refused, a statement the caller ignored) undid
/// them. The probe fails with 25P02 (`ERR_SYNCULAR_TX_ABORTED`) and the
/// transaction is rolled back.
pub(crate) const CHECKED_COMMIT: &str = "SELECT 1; COMMIT";
