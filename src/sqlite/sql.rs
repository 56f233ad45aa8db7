//! SQL text of the SQLite dialect: the meta layout shared with the in-tree
//! `SqliteServerStorage`, and the statements the engine prepares. Keeping
//! the text here leaves the engine modules with logic only. The meta
//! tables are rendered from `core::meta_layout` with SQLite's types.

pub use crate::core::meta_layout::ROW_SCOPES_BY_ROW;
use crate::core::meta_layout::{self, Column, Dialect, Table, Type, SCHEMA_META, TABLES};
use std::sync::LazyLock;

/// SQLite's column types: INTEGER for every integer and flag, TEXT for
/// JSON (storage-layout §2).
pub const DIALECT: Dialect = Dialect {
    type_name: |ty| match ty {
        Type::Text | Type::Json => "TEXT",
        Type::Bytes => "BLOB",
        Type::Integer | Type::BigInteger | Type::SmallInteger | Type::Boolean => "INTEGER",
    },
    false_literal: "0",
};

/// Meta tables and indexes, in the in-tree layout (storage-layout §2, §4),
/// every column declared; without the late index ([`row_scopes_by_row_ddl`]).
pub fn meta_ddl() -> &'static str {
    static DDL: LazyLock<String> = LazyLock::new(|| {
        let mut ddl = String::from("\n");
        for t in TABLES {
            ddl.push_str(&t.create(&DIALECT, |_| true));
            ddl.push_str(";\n");
            for ix in t.indexes.iter().filter(|ix| !ix.late) {
                ddl.push_str(&t.create_index(ix, "\n  "));
                ddl.push_str(";\n");
            }
        }
        ddl
    });
    &DDL
}

/// Adds a late column to a table an older in-tree version wrote (SQLite
/// has no `ADD COLUMN IF NOT EXISTS`: the caller checks first).
pub fn add_column(table: &Table, column: &Column) -> String {
    table.add_column(column, &DIALECT, false)
}

/// The row scope index by row: not in [`meta_ddl`], which runs when the
/// storage opens, on the calling thread (the first call, or `storage.db`).
/// Built over every entry of a file an older version wrote (hundreds of
/// milliseconds at 200k commits, issue 48), it is created there only when
/// the table is empty, and otherwise by `ensureSchema`, off that thread.
/// One line, as this storage has always written it.
pub fn row_scopes_by_row_ddl() -> &'static str {
    static DDL: LazyLock<String> = LazyLock::new(|| {
        let (t, ix) = meta_layout::index(ROW_SCOPES_BY_ROW).expect("a meta index");
        t.create_index(ix, " ")
    });
    &DDL
}

/// Objects whose presence means the meta DDL has already run: the tables,
/// their indexes but the late one, and the writer fence trigger.
pub fn meta_objects() -> &'static [&'static str] {
    static NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        let mut names = Vec::new();
        for t in TABLES {
            names.push(t.name);
            names.extend(t.indexes.iter().filter(|ix| !ix.late).map(|ix| ix.name));
        }
        names.push("sync_commits_writer_fence");
        names
    });
    &NAMES
}

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

/// `sync_schema_meta`, as the meta DDL makes it (for `ensureSchema`).
pub fn schema_meta_ddl() -> &'static str {
    static DDL: LazyLock<String> = LazyLock::new(|| {
        let t = meta_layout::table(SCHEMA_META).expect("a meta table");
        t.create(&DIALECT, |_| true)
    });
    &DDL
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_ddl_makes_every_object_the_open_looks_for() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(meta_ddl()).unwrap();
        conn.execute_batch(WRITER_FENCE_TRIGGER).unwrap();
        let has = |name: &str| -> bool {
            conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = ?1)",
                [name],
                |r| r.get(0),
            )
            .unwrap()
        };
        for name in meta_objects() {
            assert!(has(name), "{name}");
        }
        assert!(!has(ROW_SCOPES_BY_ROW));
        conn.execute_batch(row_scopes_by_row_ddl()).unwrap();
        assert!(has(ROW_SCOPES_BY_ROW));
        conn.execute_batch(schema_meta_ddl()).unwrap();
    }
}
