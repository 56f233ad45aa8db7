//! The N-API binding: one class, `NativeEngine`, over whichever engine the
//! url names (`crate::seam`). It converts arguments, contains panics and
//! turns answers into JS values or Promises; no storage logic lives here.
//!
//! Errors cross as a JSON description inside the message (see
//! `Error::to_wire`); the JS layer turns it into the host's classes.

mod admin;
mod args;
mod bytes;
mod checkpoints;
mod compact;
mod completion;
mod convert;
mod copy;
mod db;
mod fast;
mod forward;
mod jsontext;
mod lifecycle;
mod logging;
mod ops;
mod packed;
mod query;
mod reactions;
mod records;
mod reply;
mod rowpack;
mod storage;

use crate::core::error::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Marks a message as a serialized core error.
pub const WIRE_PREFIX: &str = "\u{1}syncular:";

pub fn to_napi(e: Error) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!("{WIRE_PREFIX}{}", e.to_wire()),
    )
}

/// Runs a synchronous step; a panic becomes an error instead of unwinding
/// into Node.
pub fn guard<T>(f: impl FnOnce() -> crate::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(to_napi(e)),
        Err(p) => Err(to_napi(panicked(p))),
    }
}

/// A contained panic as the error a member answers with.
pub fn panicked(p: Box<dyn std::any::Any + Send>) -> Error {
    Error::plain(
        "ERR_SYNCULAR_INTERNAL",
        format!(
            "internal error (panic contained): {}",
            crate::core::error::panic_message(p)
        ),
    )
}
