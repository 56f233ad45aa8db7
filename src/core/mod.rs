//! The engine-neutral core: what the host's data means and the logic both
//! engines share. Nothing here knows SQL connections, N-API or an engine;
//! the seam (`crate::seam`) and the engines sit above it.
//!
//! - `error`: the crate's coded error;
//! - `telemetry`: `tracing` events and their routing (no JS);
//! - `codec`: the row payload codec (pure);
//! - `schema`, `scope`, `model`: the host's schema, scope filters, and the
//!   values the seam carries;
//! - `window`, `scan`, `migrate`, `stored`, `checkpoint`: rules both engines
//!   execute in their own SQL (commit windows, row scans, the schema plan,
//!   legacy stored forms, RFC 0007 checkpoint transitions);
//! - `query`: registered queries: lexing, the dialect rewrite, result shapes;
//! - `records`: the packed form of row lists and commit windows, written
//!   once for both engines and the binding;
//! - `meta_layout`: the meta tables described once, which each engine
//!   renders as DDL in its dialect.

pub mod checkpoint;
pub mod codec;
pub mod error;
pub mod meta_layout;
pub mod migrate;
pub mod model;
pub mod query;
pub mod records;
pub mod scan;
pub mod schema;
pub mod scope;
pub mod stored;
pub mod telemetry;
pub mod window;
