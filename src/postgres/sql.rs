//! SQL text of the PostgreSQL dialect: the meta layout shared with the
//! in-tree `PostgresServerStorage` (storage-layout §2, §4; BIGINT, SMALLINT,
//! JSONB and BYTEA columns), the writer fence, and the statements the
//! engine runs. Placeholders are `$n`. The meta tables are rendered from
//! `core::meta_layout` with PostgreSQL's types.

use crate::core::meta_layout::{self, Dialect, Late, Table, Type, ROW_SCOPES_BY_ROW, TABLES};
use std::sync::LazyLock;

/// PostgreSQL's column types (storage-layout §2).
pub const DIALECT: Dialect = Dialect {
    type_name: |ty| match ty {
        Type::Text => "TEXT",
        Type::Integer => "INTEGER",
        Type::BigInteger => "BIGINT",
        Type::SmallInteger => "SMALLINT",
        Type::Boolean => "BOOLEAN",
        Type::Json => "JSONB",
        Type::Bytes => "BYTEA",
    },
    false_literal: "FALSE",
};

/// The meta tables, each followed by its indexes and by the `ADD COLUMN IF
/// NOT EXISTS` of its late columns (a table an older version made lacks
/// them); `late_index`: with the late index after its table (left out when
/// it is built concurrently after, see `meta_setup`).
pub fn meta_ddl(late_index: bool) -> Vec<String> {
    let mut out = Vec::new();
    for t in TABLES {
        out.push(t.create(&DIALECT, |c| c.late != Some(Late::PgAltered)));
        for ix in t.indexes.iter().filter(|ix| late_index || !ix.late) {
            out.push(t.create_index(ix, "\n  "));
        }
        for c in t.columns().filter(|c| c.late.is_some()) {
            out.push(t.add_column(c, &DIALECT, true));
        }
    }
    out
}

/// `CREATE INDEX CONCURRENTLY` of the late index, on an existing table.
pub fn row_scopes_by_row_concurrently() -> String {
    let (t, ix) = meta_layout::index(ROW_SCOPES_BY_ROW).expect("a meta index");
    format!(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {}",
        ix.name,
        t.index_target(ix)
    )
}

/// The writer fence (storage-layout §4.2), sent after the meta DDL as
/// statements of their own (the in-tree storage's `;` split of its DDL
/// could not carry the plpgsql body). Same names and condition
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
/// the fence trigger and the late columns, means the meta DDL has run: the
/// tables and all their indexes.
pub fn meta_objects() -> &'static [&'static str] {
    static NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        let indexes = |t: &'static Table| t.indexes.iter().map(|ix| ix.name);
        TABLES
            .iter()
            .flat_map(|t| std::iter::once(t.name).chain(indexes(t)))
            .collect()
    });
    &NAMES
}

/// Counts [`meta_objects`], counting the relation set as one short when the
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presence_check_names_every_late_column() {
        for (t, c) in meta_layout::late_columns() {
            let probe = format!("table_name = '{}' AND column_name = '{}'", t.name, c.name);
            assert!(COUNT_META_OBJECTS.contains(&probe), "{probe}");
        }
    }

    #[test]
    fn a_late_column_is_added_after_its_table() {
        let ddl = meta_ddl(false);
        let at = |s: &str| ddl.iter().position(|x| x.starts_with(s)).unwrap();
        assert!(
            at("CREATE TABLE IF NOT EXISTS sync_clients(")
                < at("ALTER TABLE sync_clients ADD COLUMN IF NOT EXISTS wire_version INTEGER NOT NULL DEFAULT 1")
        );
        assert!(!ddl
            .iter()
            .any(|s| s.contains("wire_version") && s.starts_with("CREATE")));
        assert!(!ddl.iter().any(|s| s.contains(ROW_SCOPES_BY_ROW)));
        assert!(meta_ddl(true).iter().any(|s| s.contains(ROW_SCOPES_BY_ROW)));
    }
}
