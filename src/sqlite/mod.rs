//! The embedded SQLite engine.
//!
//! One writer connection per storage, used on the calling thread: SQLite
//! point work costs a few microseconds, less than any thread hop. The write
//! lock (`BEGIN IMMEDIATE`) is held as a numbered lease: a transaction owns
//! it from `begin` to `commit`/`rollback`, a storage-level write for one
//! call. The caller (the JS shim) queues leases in submission order.
//! Reads run on a pool of WAL reader connections, on or off the calling
//! thread, and see committed state only. `sqlite::memory:` is a private
//! WAL database in a temporary directory (see [`scratch`]), so it keeps
//! the same isolation: one shared connection would let a read see another
//! call's staged rows.
//!
//! The files, lowest first (a file uses files of its own group and the
//! groups before it, never of one after):
//! - helpers: `sql` (text), `kept` (statements kept per connection), `conn`, `mutex`, `budget`, `bind`; the files
//!   under the connections (`scratch`, `standin`, `foreign`,
//!   `checkpointer`, `vfs_file`, `temp_vfs`, `wal_gather`, `temp_budget`); the storage's SQL
//!   functions (`meter`, `linear_fns`, `pattern`, `checked_fns`);
//! - `writer`, the state of an open storage, then `shared` (`storage.db`
//!   statements on the writer);
//! - the areas' SQL on a connection: `rows`, `log`, `window`, `meta`,
//!   `schema_sync`; the registered-query boundary: `authorizer`,
//!   `isolation`, `shape`, `rewrites`;
//! - `storage`: `SqliteEngine`, opening and closing its connections;
//! - the engine's own machinery, `impl SqliteEngine`: `lease`, `read`,
//!   `db_calls`, `query`, `backup`;
//! - the seam's areas, each implemented in one file: `lifecycle`,
//!   `partitions` (Log), `committed` (Reads), `checkpoints`, `clients`,
//!   `reactions`, `admin`, `tx` (Transaction).

pub mod admin;
mod authorizer;
mod backup;
mod bind;
mod budget;
mod checked_fns;
mod checkpointer;
mod checkpoints;
mod clients;
mod committed;
pub(crate) mod conn;
mod db_calls;
mod foreign;
mod isolation;
pub(crate) mod kept;
mod lease;
mod lifecycle;
mod linear_fns;
mod log;
mod meta;
mod meter;
pub mod moved;
mod mutex;
mod partitions;
mod pattern;
mod query;
pub mod reactions;
mod read;
mod rewrites;
mod rows;
mod schema_sync;
pub mod scratch;
mod shape;
pub mod shared;
pub mod sql;
mod standin;
mod storage;
mod temp_budget;
mod temp_vfs;
mod tx;
mod vfs_file;
mod wal_gather;
mod window;
mod writer;

pub use conn::{Config, Location, Synchronous};
pub use lease::OWN_TRANSACTION;
pub use rows::Loaded;
pub use schema_sync::ROW_TABLE_TYPES;
pub use storage::SqliteEngine;
pub use window::WindowQuery;
pub use writer::Held;

#[cfg(test)]
mod fn_tests;
#[cfg(test)]
mod group_tests;
