//! The PostgreSQL engine, on a sqlx pool created lazily on first use.
//!
//! Concurrency follows the in-tree storage (storage-layout §11.5): each
//! transaction pins one pool connection from `begin` to `commit`/`rollback`
//! and serializes on its partition's `sync_partitions` row lock
//! (`FOR UPDATE`); partitions never contend. Storage-level writes run in
//! their own short transaction on a pool connection. Nothing in the push
//! path takes a second connection while holding the partition lock, so a
//! full pool of pushing transactions still makes progress.
//!
//! Transactions are numbered like the SQLite engine's write leases: the
//! binding hands the id to JS and every transaction member takes it back.
//!
//! The layers, each importing only those below it: the seam's areas, each
//! implemented in one file (`lifecycle`, `partitions` (Log), `committed`
//! (Reads), `checkpoints`, `clients`, `reactions`, `admin`,
//! `tx::members` (Transaction)) with `query`; `run` (how a call gets its
//! connection) over `handle`
//! (`PgEngine`: pool, idle connections, open transactions); the statements
//! and text of each area (`rows`, `log`, `meta`, `window`, `schema_sync`,
//! `sql`, `quote`, `stmt`); and beneath them `conn`, `config`,
//! `meta_setup` and `error`.

mod admin;
mod checkpoints;
mod clients;
mod committed;
mod config;
mod conn;
mod error;
pub(crate) mod handle;
mod lifecycle;
mod log;
mod meta;
mod meta_setup;
mod partitions;
mod query;
mod quote;
mod reactions;
mod rows;
mod run;
mod schema_sync;
pub mod sql;
pub(crate) mod stmt;
mod tx;
mod window;

pub use config::{Config, Pooling};
pub use handle::PgEngine;
