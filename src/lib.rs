//! syncular-native-storage: the `@syncular/server` storage seam in Rust.
//!
//! Layers, inner to outer (arrows point down; `scripts/layers.mjs --check`):
//! - `core`: engine-neutral meaning and shared rules (codec, schema, scope,
//!   model, windows, scans, the schema plan, registered-query rewrite,
//!   errors, telemetry);
//! - `seam`: `trait Engine`, in core types only, naming no engine;
//! - `sqlite`, `postgres`: the two engines, side by side, each behind the
//!   seam (SQL text in their `sql` modules, logic per area);
//! - `open`: picks and opens the engine a url names; `copy` moves a
//!   database from one engine to the other (above both, beside `open`);
//! - `napi`: the thin N-API binding; the only module that knows JS exists.

pub mod copy;
pub mod core;
pub mod open;
pub mod postgres;
pub mod seam;
pub mod sqlite;

mod napi;

pub use crate::core::error::{Error, Result};
