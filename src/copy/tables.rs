//! The meta tables a copy moves, with each column's PostgreSQL type
//! (storage-layout §2), in one place: the engine-neutral list of the meta
//! layout that `core` is to get replaces this table without touching the
//! copy's logic.

/// How a column is typed on PostgreSQL, and so how a SQLite value is
/// converted for `COPY` and put in canonical form for `verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int8,
    Int4,
    Int2,
    /// SQLite 0/1, PostgreSQL BOOLEAN.
    Bool,
    Float8,
    /// SQLite TEXT holding JSON, PostgreSQL JSONB; text that is not JSON
    /// stops the copy.
    Json,
    /// An app `json` projection: text that is not JSON becomes NULL, as
    /// the PostgreSQL engine's own projection does (storage-layout §3.2).
    JsonOrNull,
    Bytea,
}

impl Kind {
    pub fn pg_type(self) -> &'static str {
        match self {
            Kind::Text => "TEXT",
            Kind::Int8 => "BIGINT",
            Kind::Int4 => "INTEGER",
            Kind::Int2 => "SMALLINT",
            Kind::Bool => "BOOLEAN",
            Kind::Float8 => "DOUBLE PRECISION",
            Kind::Json | Kind::JsonOrNull => "JSONB",
            Kind::Bytea => "BYTEA",
        }
    }

    /// The kind of an app column of schema type `ty` (storage-layout §3.2).
    pub fn of_schema_type(ty: &str) -> Option<Kind> {
        Some(match ty {
            "string" | "blob_ref" => Kind::Text,
            "json" => Kind::JsonOrNull,
            "integer" => Kind::Int8,
            "float" => Kind::Float8,
            "boolean" => Kind::Bool,
            "bytes" | "crdt" => Kind::Bytea,
            _ => return None,
        })
    }

    /// The kind of a column the layout marker does not list, from its
    /// declared SQLite type (SQLite's affinity rules, simplified).
    pub fn of_sqlite_decl(decl: &str) -> Kind {
        let d = decl.to_ascii_uppercase();
        if d.contains("INT") {
            Kind::Int8
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            Kind::Float8
        } else if d.contains("BLOB") || d.is_empty() {
            Kind::Bytea
        } else {
            Kind::Text
        }
    }
}

/// One meta table: its columns in the in-tree order, its primary key
/// (a prefix of the columns here), and the sequence column `verify`
/// reports the largest value of.
pub struct MetaTable {
    pub name: &'static str,
    pub columns: &'static [(&'static str, Kind)],
    pub key_len: usize,
    pub seq: Option<&'static str>,
    /// Whether a `partition` column groups its rows (all but the marker).
    pub partitioned: bool,
}

use Kind::*;

const fn t(
    name: &'static str, columns: &'static [(&'static str, Kind)], key_len: usize,
    seq: Option<&'static str>,
) -> MetaTable {
    MetaTable {
        name,
        columns,
        key_len,
        seq,
        partitioned: true,
    }
}

/// Every meta table, parents before children. `sync_schema_meta` last: a
/// target whose marker is present is a finished copy.
pub const META: &[MetaTable] = &[
    t(
        "sync_partitions",
        &[
            ("partition", Text),
            ("max_commit_seq", Int8),
            ("horizon_seq", Int8),
        ],
        1,
        Some("max_commit_seq"),
    ),
    t(
        "sync_partition_registry",
        &[
            ("partition", Text),
            ("log_epoch", Text),
            ("epoch_required", Bool),
            ("last_authenticated_at_ms", Int8),
        ],
        1,
        None,
    ),
    t(
        "sync_commits",
        &[
            ("partition", Text),
            ("commit_seq", Int8),
            ("client_id", Text),
            ("client_commit_id", Text),
            ("actor_id", Text),
            ("created_at_ms", Int8),
            ("writer_version", Int8),
        ],
        2,
        Some("commit_seq"),
    ),
    t(
        "sync_changes",
        &[
            ("partition", Text),
            ("commit_seq", Int8),
            ("idx", Int4),
            ("tbl", Text),
            ("row_id", Text),
            ("op", Int2),
            ("row_version", Int8),
            ("scopes", Json),
            ("payload", Bytea),
        ],
        3,
        Some("commit_seq"),
    ),
    t(
        "sync_change_scopes",
        &[
            ("partition", Text),
            ("tbl", Text),
            ("var", Text),
            ("value", Text),
            ("commit_seq", Int8),
        ],
        5,
        Some("commit_seq"),
    ),
    t(
        "sync_row_scopes",
        &[
            ("partition", Text),
            ("tbl", Text),
            ("var", Text),
            ("value", Text),
            ("row_id", Text),
        ],
        5,
        None,
    ),
    t(
        "sync_push_results",
        &[
            ("partition", Text),
            ("client_id", Text),
            ("client_commit_id", Text),
            ("result", Json),
        ],
        3,
        None,
    ),
    t(
        "sync_reactions",
        &[
            ("partition", Text),
            ("idempotency_key", Text),
            ("type", Text),
            ("version", Int4),
            ("payload", Json),
            ("source_client_id", Text),
            ("source_client_commit_id", Text),
            ("source_commit_seq", Int8),
            ("created_at_ms", Int8),
            ("available_at_ms", Int8),
            ("status", Text),
            ("attempts", Int4),
            ("max_attempts", Int4),
            ("lease_owner", Text),
            ("lease_expires_at_ms", Int8),
            ("completed_at_ms", Int8),
            ("last_failure", Json),
        ],
        2,
        None,
    ),
    t(
        "sync_clients",
        &[
            ("partition", Text),
            ("client_id", Text),
            ("actor_id", Text),
            ("wire_version", Int4),
            ("cursor", Int8),
            ("subscriptions", Json),
            ("updated_at_ms", Int8),
        ],
        2,
        None,
    ),
    t(
        "sync_blob_refs",
        &[
            ("partition", Text),
            ("tbl", Text),
            ("row_id", Text),
            ("blob_id", Text),
        ],
        4,
        None,
    ),
    t(
        "sync_tombstones",
        &[
            ("partition", Text),
            ("tbl", Text),
            ("row_id", Text),
            ("commit_seq", Int8),
        ],
        3,
        Some("commit_seq"),
    ),
    t(
        "sync_backfill_checkpoints",
        &[
            ("partition", Text),
            ("name", Text),
            ("schema_version", Int4),
            ("state", Text),
            ("watermark", Int8),
            ("owner_epoch", Int8),
            ("observed_rows", Int8),
            ("updated_at_ms", Int8),
        ],
        2,
        None,
    ),
    t(
        "sync_writer_fence",
        &[("partition", Text), ("required_writer_version", Int4)],
        1,
        None,
    ),
    MetaTable {
        name: "sync_schema_meta",
        columns: &[("id", Int4), ("schema_version", Int8), ("layouts", Text)],
        key_len: 1,
        seq: None,
        partitioned: false,
    },
];

/// The meta columns of a row table (storage-layout §3.1), in order around
/// the app columns: the first two lead, the rest follow.
pub const ROW_LEAD: &[(&str, Kind)] = &[("_sync_partition", Text), ("_sync_row_id", Text)];
pub const ROW_TAIL: &[(&str, Kind)] = &[
    ("_sync_server_version", Int8),
    ("_sync_scopes", Json),
    ("_sync_payload", Bytea),
    ("_sync_column_versions", Bytea),
];
