//! A member's answer as JS sees it: a value when the engine answered at
//! once (thrown if it failed), a Promise when it answers later. Panics are
//! contained on both paths; none unwinds into Node.

use super::to_napi;
use crate::engine::{Call, Pending};
use crate::error::{panic_message, Error};
use napi::bindgen_prelude::{execute_tokio_future, ToNapiValue, TypeName, ValueType};
use napi::sys;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

pub fn panicked(p: Box<dyn std::any::Any + Send>) -> Error {
    Error::plain(
        "ERR_SYNCULAR_INTERNAL",
        format!("internal error (panic contained): {}", panic_message(p)),
    )
}

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
        crate::telemetry::call_finished(self.started, self.member, self.engine);
        Poll::Ready(out.map_err(to_napi))
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
                crate::telemetry::call_finished(val.started, val.member, val.engine);
                unsafe { T::to_napi_value(env, r.map_err(to_napi)?) }
            }
            Call::Later(inner) => {
                let fut = Guarded {
                    inner,
                    member: val.member,
                    engine: val.engine,
                    started: val.started,
                };
                execute_tokio_future(env, fut, |env, v| unsafe { T::to_napi_value(env, v) })
            }
        }
    }
}
