//! The N-API binding: argument checks, conversion to and from JS values,
//! panic containment, and off-thread tasks. No storage logic lives here.
//!
//! Errors cross as a JSON description inside the message (see
//! `Error::to_wire`); the JS shim turns it into the host's classes.

mod admin;
mod args;
mod bytes;
mod checkpoints;
mod convert;
mod handle;
mod packed;
mod pg;
mod pg_ext;
mod query;
mod reactions;
mod rowpack;
mod tasks;

use crate::error::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Marks a message as a serialized core error.
pub const WIRE_PREFIX: &str = "\u{1}syncular:";

pub fn to_napi(e: Error) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{WIRE_PREFIX}{}", e.to_wire()),
    )
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs one call; a panic becomes an error instead of unwinding into Node.
pub fn guard<T>(f: impl FnOnce() -> crate::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_napi(e)),
        Err(p) => Err(to_napi(Error::plain(
            "ERR_SYNCULAR_INTERNAL",
            format!("internal error (panic contained): {}", panic_message(p)),
        ))),
    }
}
