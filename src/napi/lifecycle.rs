//! What happens around a storage's life that JS cannot see: the env's
//! teardown (process or worker exit) and collection by GC.

use crate::seam::Engine;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// Set by this env's cleanup hook: napi shuts its tokio runtime down in
    /// an earlier-registered hook (hooks run last-in first-out, so ours runs
    /// first), and finalizers run after both.
    static TEARDOWN: Cell<bool> = const { Cell::new(false) };
    static HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// Once per env (per JS thread): at its teardown, mark the runtime as
/// going, and remove the scratch directories of the memory databases this
/// env made (only those: other workers' storages live on).
pub fn hook_env(env: &Env) -> Result<()> {
    if !HOOKED.with(Cell::get) {
        env.add_env_cleanup_hook((), |()| TEARDOWN.with(|t| t.set(true)))?;
        let owner = crate::sqlite::scratch::this_thread();
        env.add_env_cleanup_hook(owner, crate::sqlite::scratch::remove_owned_by)?;
        HOOKED.with(|h| h.set(true));
    }
    Ok(())
}

/// Removes the memory databases' scratch directories made on this thread.
/// The JS layer calls it from `process.on('exit')`: `process.exit()` skips
/// env cleanup hooks.
// Test builds leave out napi's registration, which is its only caller.
#[cfg_attr(test, allow(dead_code))]
#[napi(js_name = "releaseScratch")]
pub fn release_scratch() {
    crate::sqlite::scratch::remove_owned_by(crate::sqlite::scratch::this_thread());
}

/// A storage collected by GC. Every engine is dropped inside the runtime,
/// where an async driver (sqlx) can spawn its return-to-pool or close
/// task; outside it, sqlx's drop panics, and a panic in a finalizer aborts
/// the process. Open transactions are rolled back first. At env teardown
/// the runtime is gone or going: the engine is leaked and the OS closes
/// its files and sockets (a server treats that as a rollback).
pub fn dispose(engine: Box<dyn Engine>) {
    if TEARDOWN.with(Cell::get) {
        std::mem::forget(engine);
        return;
    }
    let owned = InRuntime(Some(engine));
    // Outside a live runtime `spawn` panics and drops the future, whose
    // `InRuntime` then leaks the engine instead of dropping it.
    let _ = catch_unwind(AssertUnwindSafe(move || {
        napi::bindgen_prelude::spawn(async move {
            let mut owned = owned;
            if let Some(engine) = owned.0.take() {
                engine.abandon_all();
                drop(engine);
            }
        });
    }));
}

/// An engine that may only be dropped inside a tokio runtime; anywhere
/// else it is leaked.
struct InRuntime(Option<Box<dyn Engine>>);

impl Drop for InRuntime {
    fn drop(&mut self) {
        if let Some(engine) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_err() {
                std::mem::forget(engine);
            }
        }
    }
}
