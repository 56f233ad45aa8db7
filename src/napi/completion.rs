//! One way back to the JS thread for answers that arrive later (the
//! PostgreSQL engine's futures).
//!
//! A call's future is first polled on the JS thread, inside the tokio
//! runtime's context (`later`). That poll sends the call's statement, or
//! finishes the call when it needs no round trip (an answer the lock batch
//! read, a deferred write); such a call is settled before it returns. A
//! pending call waits without a task: the runtime takes it over only when
//! its socket (or timer) wakes it, on the worker that saw the wake-up. So
//! no thread is woken just to start a call: a round trip wakes the server,
//! one worker and this thread, where spawning each call woke a worker to
//! send it as well (context switches per 1-op push: 42 to 13).
//!
//! napi-rs's `execute_tokio_future` makes a threadsafe function, a cleanup
//! hook and a shared handle for every call, and each finished call wakes
//! the JS thread on its own. Here each JS thread has one threadsafe
//! function for its lifetime. A finished call pushes its answer onto the
//! thread's queue, and only a push onto an empty queue calls the function,
//! so answers that finish together settle their promises in one wake-up.
//!
//! The function is referenced (keeps the event loop alive) only while
//! calls are pending, as a per-call one would. When the environment tears
//! down, the queue closes and the function is aborted; answers that finish
//! after that are dropped, as they are with napi-rs's own path.

use super::panicked;
use napi::sys;
use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{Context, Poll, Wake, Waker};

/// Turns an answer into its JS value, on the JS thread.
pub type Convert<T> = unsafe fn(sys::napi_env, T) -> napi::Result<sys::napi_value>;

/// A finished call: its promise, and how to settle it.
struct Finished {
    deferred: Deferred,
    settle: Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send>,
}

struct Deferred(sys::napi_deferred);
// SAFETY: a deferred is only used (resolved or rejected) on the JS thread
// that made it, in `drain`; other threads only move it.
unsafe impl Send for Deferred {}

struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function is made to be called from any thread;
// `Channel::send` calls it only while it is alive (see `teardown`).
unsafe impl Send for Tsfn {}
unsafe impl Sync for Tsfn {}

struct Queue {
    finished: Vec<Finished>,
    /// False once the environment tore down: the function is gone.
    open: bool,
}

pub struct Channel {
    tsfn: Tsfn,
    /// False once `teardown` aborted the function.
    alive: RwLock<bool>,
    queue: Mutex<Queue>,
    /// Calls made and not yet settled; read and written on the JS thread
    /// only (atomic so the channel can be shared with the runtime).
    pending: AtomicUsize,
}

thread_local! {
    /// This JS thread's channel, made by its first call that answers later.
    static CHANNEL: RefCell<Option<Arc<Channel>>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(
            napi::Status::GenericFailure,
            format!("{what} failed (napi status {status})"),
        ))
    }
}

impl Channel {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a finished call; wakes the JS thread when the queue was empty.
    fn send(&self, f: Finished) {
        let wake = {
            let mut q = self.lock();
            if !q.open {
                return;
            }
            let wake = q.finished.is_empty();
            q.finished.push(f);
            wake
        };
        // The wake-up comes after the queue's lock is released: the woken
        // JS thread often runs on this thread's core at once, and would
        // otherwise wait for the lock this thread still held (measured: an
        // extra switch on each side of a call). `alive` keeps `teardown`
        // from aborting the function in between; `drain` never takes it.
        if wake {
            let alive = self.alive.read().unwrap_or_else(|p| p.into_inner());
            if *alive {
                // SAFETY: the function is live while `alive` holds true.
                // Queued, never run here.
                unsafe {
                    sys::napi_call_threadsafe_function(
                        self.tsfn.0,
                        null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    );
                }
            }
        }
    }
}

/// This thread's channel, made on first use.
fn channel(env: sys::napi_env) -> napi::Result<Arc<Channel>> {
    if let Some(ch) = CHANNEL.with(|c| c.borrow().clone()) {
        return Ok(ch);
    }
    let name = "syncular-native-storage completions";
    let mut resource_name = null_mut();
    // SAFETY: plain N-API calls on the JS thread with valid out-pointers.
    unsafe {
        check(
            sys::napi_create_string_utf8(
                env,
                name.as_ptr().cast(),
                name.len() as isize,
                &mut resource_name,
            ),
            "napi_create_string_utf8",
        )?;
    }
    let mut tsfn = null_mut();
    // The channel is made around the function, so the context pointer is
    // filled in after: `drain` reads it only once a call was queued.
    let slot: Arc<Mutex<Option<Arc<Channel>>>> = Arc::new(Mutex::new(None));
    let context = Arc::into_raw(slot.clone()) as *mut c_void;
    // SAFETY: as above; `context` is owned by the function and freed in
    // `finalize`.
    let made = unsafe {
        sys::napi_create_threadsafe_function(
            env,
            null_mut(),
            null_mut(),
            resource_name,
            0,
            1,
            context,
            Some(finalize),
            context,
            Some(drain),
            &mut tsfn,
        )
    };
    if let Err(e) = check(made, "napi_create_threadsafe_function") {
        // SAFETY: the function was not made, so nothing else owns it.
        drop(unsafe { Arc::from_raw(context as *const Mutex<Option<Arc<Channel>>>) });
        return Err(e);
    }
    let ch = Arc::new(Channel {
        tsfn: Tsfn(tsfn),
        alive: RwLock::new(true),
        queue: Mutex::new(Queue {
            finished: Vec::new(),
            open: true,
        }),
        pending: AtomicUsize::new(0),
    });
    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(ch.clone());
    // SAFETY: JS thread; the function holds the loop only while calls are
    // pending (`later` refs it). The hook's data is the context, alive
    // until `finalize`, which runs after the hook.
    unsafe {
        sys::napi_unref_threadsafe_function(env, tsfn);
        sys::napi_add_env_cleanup_hook(env, Some(teardown), context);
    }
    CHANNEL.with(|c| *c.borrow_mut() = Some(ch.clone()));
    Ok(ch)
}

fn from_context(context: *mut c_void) -> Option<Arc<Channel>> {
    // SAFETY: `context` is the slot `channel` leaked, freed only in
    // `finalize`, after every `drain` and the cleanup hook.
    let slot = unsafe { &*(context as *const Mutex<Option<Arc<Channel>>>) };
    slot.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Environment teardown: closes the queue and aborts the function.
unsafe extern "C" fn teardown(context: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        CHANNEL.with(|c| c.borrow_mut().take());
        if let Some(ch) = from_context(context) {
            let mut alive = ch.alive.write().unwrap_or_else(|p| p.into_inner());
            *alive = false;
            {
                let mut q = ch.lock();
                q.open = false;
                // Dropped here: the environment that would settle them is going.
                q.finished.clear();
            }
            // SAFETY: the function is live until this abort; `send` calls
            // it only while holding `alive` as true.
            unsafe {
                sys::napi_release_threadsafe_function(
                    ch.tsfn.0,
                    sys::ThreadsafeFunctionReleaseMode::abort,
                );
            }
        }
    }));
}

unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the context `channel` leaked; nothing reads it
        // after the function is finalized.
        drop(unsafe { Arc::from_raw(data as *const Mutex<Option<Arc<Channel>>>) });
    }));
}

/// On the JS thread: settles every queued call.
unsafe extern "C" fn drain(
    env: sys::napi_env, _js: sys::napi_value, context: *mut c_void, _data: *mut c_void,
) {
    if env.is_null() {
        // The function is being torn down.
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let Some(ch) = from_context(context) else {
            return;
        };
        let finished = std::mem::take(&mut ch.lock().finished);
        let n = finished.len();
        for f in finished {
            // SAFETY: JS thread, inside the function's callback scope.
            unsafe { settle(env, f) };
        }
        if n > 0 && ch.pending.fetch_sub(n, Ordering::Relaxed) == n {
            // SAFETY: JS thread; nothing pending keeps the loop alive.
            unsafe { sys::napi_unref_threadsafe_function(env, ch.tsfn.0) };
        }
    }));
}

/// Resolves or rejects one call's promise, in a handle scope of its own.
unsafe fn settle(env: sys::napi_env, f: Finished) {
    let Finished { deferred, settle } = f;
    let mut scope = null_mut();
    // SAFETY (whole body): N-API calls on the JS thread; `deferred` is
    // settled exactly once.
    unsafe {
        sys::napi_open_handle_scope(env, &mut scope);
        match catch_unwind(AssertUnwindSafe(|| settle(env))) {
            Ok(Ok(value)) => {
                sys::napi_resolve_deferred(env, deferred.0, value);
            }
            Ok(Err(e)) => reject(env, deferred, e),
            Err(p) => reject(env, deferred, super::to_napi(panicked(p))),
        }
        sys::napi_close_handle_scope(env, scope);
    }
}

/// Rejects with `e`, or with the exception a failed conversion left
/// pending.
unsafe fn reject(env: sys::napi_env, deferred: Deferred, e: napi::Error) {
    // SAFETY: JS thread.
    unsafe {
        let mut pending = false;
        sys::napi_is_exception_pending(env, &mut pending);
        let reason = if pending {
            let mut exception = null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut exception);
            exception
        } else {
            napi::JsError::from(e).into_value(env)
        };
        sys::napi_reject_deferred(env, deferred.0, reason);
    }
}

/// A promise for `fut`, settled with `convert`: at once when it finishes
/// on its first poll, else through this thread's channel.
///
/// The future is polled once here, on the JS thread, inside the runtime's
/// context: a call that needs no round trip (an answer already at hand, a
/// write deferred to the next statement) settles at once, and one that
/// does has sent its statement before this returns. What is left of it is
/// handed to the runtime only when the socket (or a timer) wakes it, by
/// the worker that saw the wake-up: no thread is woken just to start a
/// call.
pub fn later<T, F>(env: sys::napi_env, fut: F, convert: Convert<T>) -> napi::Result<sys::napi_value>
where
    T: Send + 'static,
    F: Future<Output = napi::Result<T>> + Send + 'static,
{
    let ch = channel(env)?;
    let mut deferred = null_mut();
    let mut promise = null_mut();
    // SAFETY: JS thread, valid out-pointers.
    check(
        unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) },
        "napi_create_promise",
    )?;
    let deferred = Deferred(deferred);
    let mut fut = Box::pin(fut);
    let handoff = Arc::new(Handoff {
        state: Mutex::new(Parked::Polling { woken: false }),
    });
    let waker = Waker::from(handoff.clone());
    let first = catch_unwind(AssertUnwindSafe(|| {
        napi::bindgen_prelude::within_runtime_if_available(|| {
            fut.as_mut().poll(&mut Context::from_waker(&waker))
        })
    }));
    let out = match first {
        Ok(Poll::Ready(out)) => Some(out),
        Ok(Poll::Pending) => None,
        Err(p) => Some(Err(super::to_napi(panicked(p)))),
    };
    if let Some(out) = out {
        // Settled now, on this thread: no wake-up of its own. Its
        // reactions still run as microtasks, after this call returns.
        // SAFETY: JS thread, inside the call's scope; `convert` runs here.
        unsafe {
            settle(
                env,
                Finished {
                    deferred,
                    settle: Box::new(move |env| out.and_then(|v| convert(env, v))),
                },
            )
        };
        return Ok(promise);
    }
    if ch.pending.fetch_add(1, Ordering::Relaxed) == 0 {
        // SAFETY: JS thread; a pending call keeps the loop alive.
        unsafe { sys::napi_ref_threadsafe_function(env, ch.tsfn.0) };
    }
    let sender = ch.clone();
    let rest: Task = Box::pin(async move {
        let out = fut.await;
        sender.send(Finished {
            deferred,
            // SAFETY: `convert` runs on the JS thread, in `settle`.
            settle: Box::new(move |env| out.and_then(|v| unsafe { convert(env, v) })),
        });
    });
    let woken = {
        let mut state = lock(&handoff.state);
        match std::mem::replace(&mut *state, Parked::Gone) {
            Parked::Polling { woken: false } => {
                *state = Parked::Waiting(rest);
                None
            }
            _ => Some(rest),
        }
    };
    if let Some(rest) = woken {
        // Woken during the first poll: it can go on at once.
        if let Err(p) = start(rest) {
            if ch.pending.fetch_sub(1, Ordering::Relaxed) == 1 {
                // SAFETY: JS thread.
                unsafe { sys::napi_unref_threadsafe_function(env, ch.tsfn.0) };
            }
            return Err(super::to_napi(panicked(p)));
        }
    }
    Ok(promise)
}

type Task = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Hands a call's future to the runtime. A panic means there is no
/// runtime (the environment is tearing down): the call is dropped with it,
/// its promise left unsettled, as napi-rs leaves one whose runtime is gone.
fn start(task: Task) -> std::thread::Result<()> {
    catch_unwind(AssertUnwindSafe(move || {
        napi::bindgen_prelude::spawn(task);
    }))
}

/// Where a call polled once on the JS thread waits for its first wake-up.
enum Parked {
    /// The JS thread is polling it; `woken` if a wake-up came meanwhile.
    Polling { woken: bool },
    /// Pending, not yet woken.
    Waiting(Task),
    /// Handed to the runtime.
    Gone,
}

struct Handoff {
    state: Mutex<Parked>,
}

impl Wake for Handoff {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let task = {
            let mut state = lock(&self.state);
            match &mut *state {
                Parked::Polling { woken } => {
                    *woken = true;
                    None
                }
                Parked::Waiting(_) => match std::mem::replace(&mut *state, Parked::Gone) {
                    Parked::Waiting(task) => Some(task),
                    _ => None,
                },
                Parked::Gone => None,
            }
        };
        if let Some(task) = task {
            let _ = start(task);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
