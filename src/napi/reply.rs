//! A member's answer as JS sees it: a value when the engine answered at
//! once (thrown if it failed), a Promise when it answers later: blocking
//! work runs on libuv's thread pool (one hop there and one back, as any
//! Node addon's work), futures on the tokio runtime, answering through the
//! thread's one completion channel (`super::completion`). Panics are contained
//! on every path; none unwinds into Node.

use super::panicked;
use super::to_napi;
use crate::core::error::Error;
use crate::seam::{Call, Pending, Work};
use napi::bindgen_prelude::{AsyncTask, Env, Task, ToNapiValue, TypeName, ValueType};
use napi::sys;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

pub struct Reply<T> {
    call: Call<T>,
    member: &'static str,
    engine: &'static str,
    started: Option<Instant>,
}

impl<T> Reply<T> {
    pub fn new(
        call: Call<T>, member: &'static str, engine: &'static str, started: Option<Instant>,
    ) -> Self {
        Reply {
            call,
            member,
            engine,
            started,
        }
    }
}

/// Polls the engine's future with panics contained, and records the
/// call's duration when it settles.
struct Guarded<T> {
    inner: Pending<T>,
    member: &'static str,
    engine: &'static str,
    started: Option<Instant>,
}

impl<T> Future for Guarded<T> {
    type Output = napi::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let polled = catch_unwind(AssertUnwindSafe(|| self.inner.as_mut().poll(cx)));
        let out = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(r)) => r,
            Err(p) => Err(panicked(p)),
        };
        crate::core::telemetry::call_finished(self.started, self.member, self.engine);
        Poll::Ready(out.map_err(to_napi))
    }
}

/// Blocking work on libuv's pool; converted on the JS thread.
struct Blocking<T> {
    work: Option<Work<T>>,
    member: &'static str,
    engine: &'static str,
    started: Option<Instant>,
}

/// The converted answer, as napi's task machinery wants it.
struct Done<T>(T);

impl<T> TypeName for Done<T> {
    fn type_name() -> &'static str {
        "unknown"
    }

    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl<T: ToNapiValue> ToNapiValue for Done<T> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        unsafe { T::to_napi_value(env, val.0) }
    }
}

impl<T: ToNapiValue + Send + 'static> Task for Blocking<T> {
    type Output = T;
    type JsValue = Done<T>;

    fn compute(&mut self) -> napi::Result<T> {
        let Some(work) = self.work.take() else {
            return Err(to_napi(Error::plain(
                "ERR_SYNCULAR_INTERNAL",
                "task ran twice",
            )));
        };
        let out = match catch_unwind(AssertUnwindSafe(work)) {
            Ok(r) => r,
            Err(p) => Err(panicked(p)),
        };
        crate::core::telemetry::call_finished(self.started, self.member, self.engine);
        out.map_err(to_napi)
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<Done<T>> {
        Ok(Done(output))
    }
}

impl<T: TypeName> TypeName for Reply<T> {
    fn type_name() -> &'static str {
        T::type_name()
    }

    fn value_type() -> ValueType {
        T::value_type()
    }
}

impl<T: ToNapiValue + Send + 'static> ToNapiValue for Reply<T> {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        match val.call {
            Call::Now(r) => {
                crate::core::telemetry::call_finished(val.started, val.member, val.engine);
                unsafe { T::to_napi_value(env, r.map_err(to_napi)?) }
            }
            Call::Blocking(work) => {
                let task = Blocking {
                    work: Some(work),
                    member: val.member,
                    engine: val.engine,
                    started: val.started,
                };
                unsafe { AsyncTask::to_napi_value(env, AsyncTask::new(task)) }
            }
            Call::Later(inner) => {
                let fut = Guarded {
                    inner,
                    member: val.member,
                    engine: val.engine,
                    started: val.started,
                };
                super::completion::later(env, fut, T::to_napi_value)
            }
        }
    }
}
