//! Moving a storage's database to another engine (issue 51,
//! docs/copy.md): a snapshot copy of a SQLite database into a PostgreSQL
//! schema, and `verify`, which compares the two per table and partition;
//! and back, a snapshot of a PostgreSQL schema into a new SQLite file.
//!
//! This module sits above both engines, at the layer of `crate::open`: it
//! reads the source through the SQLite engine's own connections and makes
//! the target's meta layout through the PostgreSQL engine, then loads
//! everything with `COPY` on a connection of its own. The engines never
//! use it. Everything here blocks its thread: the binding runs it on a
//! thread of its own.
//!
//! - `tables`: the meta tables and the PostgreSQL type of each column;
//! - `catalog`: what the source holds (meta tables, row tables, indexes);
//! - `value`: values in `COPY`'s binary format and in canonical form;
//! - `target`: the target's connection, its refusal when it holds sync
//!   data, and its meta layout;
//! - `stream`: one binary `COPY` into a target table;
//! - `load`: the snapshot copy; `catchup`: the passes after it and the
//!   final one under the write lease (the host's, or the command's own
//!   lock on the file); `move_out`: the command's whole move; `verify`:
//!   the comparison;
//! - from PostgreSQL: `pg_source` (the snapshot transaction and the
//!   source's catalog), `binary` (`COPY`'s binary rows back into SQLite
//!   values), `sqlite_target` (the file, its meta layout, the load's
//!   transaction), `reverse` (the copy and its verify).

mod binary;
mod catalog;
mod catchup;
mod load;
mod move_out;
mod pg_source;
mod reverse;
mod sqlite_target;
mod stream;
mod tables;
mod target;
mod value;
mod verify;

pub use catchup::{catch_up, finish, TargetSnapshot};
pub use load::copy;
pub use move_out::move_out;
pub use reverse::{check_sqlite_target, from_postgres, postgres_source};
pub use verify::verify;

use crate::core::error::{Error, Result};
use std::sync::Arc;

pub(crate) use crate::sqlite::conn::map_err as sq;
use crate::sqlite::conn::table_exists;

/// What the caller asks.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `postgres://…`: the target.
    pub target: String,
    /// The target's schema (PostgreSQL), as the storage's `schema` option.
    pub schema: Option<String>,
    /// Verify after copying.
    pub verify: bool,
    /// Continue from the positions the target recorded (an interrupted
    /// copy); a target without any starts afresh.
    pub resume: bool,
    /// The caller means to end with a final pass (`copyTo`'s `finalPass`):
    /// refused when copying from PostgreSQL, which has none.
    pub final_pass: bool,
}

/// Where a copy or a verify stands, reported to the caller's callback.
#[derive(Debug, Clone)]
pub struct Progress {
    /// `copy` or `verify`.
    pub phase: &'static str,
    pub table: String,
    pub rows: u64,
    pub rows_total: u64,
    pub bytes: u64,
    pub started: std::time::Instant,
}

impl Progress {
    pub fn to_json(&self) -> serde_json::Value {
        let secs = self.started.elapsed().as_secs_f64().max(1e-6);
        let rate = self.rows as f64 / secs;
        let left = self.rows_total.saturating_sub(self.rows) as f64;
        serde_json::json!({
            "phase": self.phase,
            "table": self.table,
            "rows": self.rows,
            "rowsTotal": self.rows_total,
            "bytes": self.bytes,
            "elapsedMs": (secs * 1000.0).round(),
            "rowsPerSec": rate.round(),
            "mbPerSec": (self.bytes as f64 / 1e6 / secs * 100.0).round() / 100.0,
            "etaMs": if rate > 0.0 { (left / rate * 1000.0).round() } else { 0.0 },
        })
    }

    /// A finished copy's report: its tables, the totals and rates since
    /// `started`, the indexes it skipped; each direction adds its own keys.
    pub fn report(&self, tables: serde_json::Value, skipped: Vec<String>) -> serde_json::Value {
        let secs = self.started.elapsed().as_secs_f64().max(1e-6);
        serde_json::json!({
            "tables": tables,
            "rows": self.rows,
            "bytes": self.bytes,
            "elapsedMs": (secs * 1000.0).round(),
            "rowsPerSec": (self.rows as f64 / secs).round(),
            "mbPerSec": (self.bytes as f64 / 1e6 / secs * 100.0).round() / 100.0,
            "skippedIndexes": skipped,
        })
    }
}

/// The SQLite source a url names, opened through `crate::open` as a
/// host's storage would be.
pub fn open_source(url: &str) -> Result<Arc<crate::sqlite::SqliteEngine>> {
    if crate::open::is_postgres_url(url) {
        return Err(unsupported(
            "a PostgreSQL source is copied by copy::from_postgres: this entry opens SQLite sources",
        ));
    }
    crate::open::open(crate::open::Options {
        url: Some(url.to_owned()),
        ..Default::default()
    })?
    .sqlite
    .ok_or_else(|| unsupported("the source must be a SQLite database"))
}

pub(crate) fn unsupported(message: &str) -> Error {
    Error::plain("ERR_SYNCULAR_COPY_UNSUPPORTED", message)
}

/// A current-thread runtime for the target's futures, on the copy's thread.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::plain("ERR_SYNCULAR_COPY_TARGET", e.to_string()))
}

/// Runs `f` in one read transaction of `source`, as blocking work: the
/// copy then holds a pooled WAL reader, never the writer, and writes go on
/// meanwhile.
fn on_snapshot<T>(
    source: &crate::sqlite::SqliteEngine, f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
) -> Result<T> {
    crate::seam::as_blocking_work(|| source.read_snapshot(|c| f(c)))
}
