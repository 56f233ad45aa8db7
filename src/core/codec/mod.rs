//! Full-row payload codec (storage-layout §6.1, SPEC §2.4).
//!
//! Layout of a row payload for `n` columns:
//!
//! * a null bitmap of `ceil(n / 8)` bytes; bit `i` (least significant first
//!   within byte `i >> 3`) set means column `i` is NULL; padding bits must be
//!   zero;
//! * then every non-NULL value in column order, untagged, little-endian and
//!   fixed-width (no varints):
//!   `string`/`json`/`blob_ref` = `u32` byte length + UTF-8,
//!   `integer` = `i64` within ±(2^53 − 1), `float` = `f64`,
//!   `boolean` = `u8` 0/1, `bytes`/`crdt` = `u32` length + raw bytes.
//!
//! Decoding is strict: trailing bytes, truncated input, invalid UTF-8, a
//! `json` value that `JSON.parse` would refuse and a non-canonical BlobRef
//! are all [`DecodeError`]s. Text is decoded like a fatal WHATWG
//! `TextDecoder`, which drops one leading UTF-8 byte-order mark.
//!
//! The column-versions blob (`_sync_column_versions`, §6.3) is opaque to
//! storage and deliberately has no codec here.

mod blob_ref;
mod json;
mod row;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod value_tests;

pub use blob_ref::check_blob_ref;
pub use json::is_valid_json;
pub use row::{decode_row, encode_row, reencode_with_added_nulls};

/// Schema type of an app column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    String,
    Integer,
    Float,
    Boolean,
    Json,
    Bytes,
    BlobRef,
    Crdt,
}

impl ColumnType {
    /// Every column type, in tag order (tag = index + 1).
    pub const ALL: [ColumnType; 8] = [
        ColumnType::String,
        ColumnType::Integer,
        ColumnType::Float,
        ColumnType::Boolean,
        ColumnType::Json,
        ColumnType::Bytes,
        ColumnType::BlobRef,
        ColumnType::Crdt,
    ];

    /// Parses the schema spelling (`"string"`, `"integer"`, `"float"`,
    /// `"boolean"`, `"json"`, `"bytes"`, `"blob_ref"`, `"crdt"`).
    pub fn parse(s: &str) -> Option<ColumnType> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The schema spelling of this type.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Integer => "integer",
            ColumnType::Float => "float",
            ColumnType::Boolean => "boolean",
            ColumnType::Json => "json",
            ColumnType::Bytes => "bytes",
            ColumnType::BlobRef => "blob_ref",
            ColumnType::Crdt => "crdt",
        }
    }

    /// The SSG2 column-table tag (1..=8, §6.1 table). Never used inside row
    /// payloads.
    pub fn tag(self) -> u8 {
        match self {
            ColumnType::String => 1,
            ColumnType::Integer => 2,
            ColumnType::Float => 3,
            ColumnType::Boolean => 4,
            ColumnType::Json => 5,
            ColumnType::Bytes => 6,
            ColumnType::BlobRef => 7,
            ColumnType::Crdt => 8,
        }
    }

    /// Inverse of [`ColumnType::tag`].
    pub fn from_tag(tag: u8) -> Option<ColumnType> {
        Self::ALL.into_iter().find(|t| t.tag() == tag)
    }
}

/// What the codec needs to know about one column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnDef {
    pub ty: ColumnType,
    pub nullable: bool,
}

impl ColumnDef {
    pub const fn new(ty: ColumnType, nullable: bool) -> ColumnDef {
        ColumnDef { ty, nullable }
    }
}

/// One decoded column value, borrowing from the payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Null,
    /// `string`, `json`, `blob_ref`: UTF-8 with one leading BOM removed
    /// (the payload bytes keep it).
    Text(&'a str),
    /// `integer`, within ±(2^53 − 1).
    Integer(i64),
    /// `float`, any bit pattern.
    Float(f64),
    /// `boolean`.
    Boolean(bool),
    /// `bytes`, `crdt`.
    Bytes(&'a [u8]),
}

/// A payload that does not decode (or values that cannot be encoded).
/// Upstream this is a `DecodeError` with code `sync.invalid_request`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    pub message: String,
}

impl DecodeError {
    pub fn new(message: impl Into<String>) -> DecodeError {
        DecodeError {
            message: message.into(),
        }
    }
}

/// Largest integer magnitude the codec accepts (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;
