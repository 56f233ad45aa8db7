//! How a copied column is typed: the meta tables' columns come from the
//! one description of the meta layout (`core::meta_layout`), the row
//! tables' from the layout marker or the SQLite declaration.

use crate::core::meta_layout::Type;

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
    /// The kind of a meta column (`core::meta_layout`).
    pub fn of_meta(ty: Type) -> Kind {
        match ty {
            Type::Text => Kind::Text,
            Type::Integer => Kind::Int4,
            Type::BigInteger => Kind::Int8,
            Type::SmallInteger => Kind::Int2,
            Type::Boolean => Kind::Bool,
            Type::Json => Kind::Json,
            Type::Bytes => Kind::Bytea,
        }
    }

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

/// The meta columns of a row table (storage-layout §3.1), in order around
/// the app columns: the first two lead, the rest follow.
use Kind::*;

pub const ROW_LEAD: &[(&str, Kind)] = &[("_sync_partition", Text), ("_sync_row_id", Text)];
pub const ROW_TAIL: &[(&str, Kind)] = &[
    ("_sync_server_version", Int8),
    ("_sync_scopes", Json),
    ("_sync_payload", Bytea),
    ("_sync_column_versions", Bytea),
];
