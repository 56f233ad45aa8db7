//! syncular-native-storage: the `@syncular/server` storage seam in Rust.
//!
//! Layers, inner to outer:
//! - `codec`: the row payload codec (pure);
//! - `schema`, `scope`, `model`: what the host's data means, engine-neutral;
//! - `sqlite`: the embedded engine (SQL text in `sqlite::sql`, logic per area);
//! - `napi`: the thin N-API binding; the only module that knows JS exists.

pub mod bench;
pub mod codec;
pub mod error;
pub mod model;
pub mod query;
pub mod schema;
pub mod scope;
pub mod sqlite;

mod napi;

pub use error::{Error, Result};
