//! syncular-native-storage: the `@syncular/server` storage seam in Rust.
//!
//! Layers, inner to outer:
//! - `codec`: the row payload codec (pure);
//! - `schema`, `scope`, `model`: what the host's data means, engine-neutral;
//! - `window`, `scan`, `migrate`, `stored`: logic both engines share;
//! - `sqlite`: the embedded engine (SQL text in `sqlite::sql`, logic per area);
//! - `engine`: the seam, `trait Engine`, naming no engine;
//! - `postgres`: the PostgreSQL engine on sqlx (same areas, same shared logic);
//! - `open`: picks and opens the engine a url names (above the engines);
//! - `telemetry`: `tracing` events (calls, slow statements, waits) and their
//!   routing to stderr or a sink; knows nothing of JS;
//! - `napi`: the thin N-API binding; the only module that knows JS exists.

pub mod checkpoint;
pub mod codec;
pub mod engine;
pub mod error;
pub mod migrate;
pub mod model;
pub mod open;
pub mod postgres;
pub mod query;
pub mod scan;
pub mod schema;
pub mod scope;
pub mod sqlite;
pub mod stored;
pub mod telemetry;
pub mod window;

mod napi;

pub use error::{Error, Result};
