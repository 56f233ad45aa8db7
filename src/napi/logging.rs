//! `setLogSink`: hands the native diagnostics (`crate::core::telemetry`) to a JS
//! callback, and starts stderr logging at module registration.
//!
//! The callback is a weak threadsafe function: events from any thread are
//! queued without blocking (a full queue drops the event), delivered on
//! the JS thread that registered it, and the callback never keeps the
//! process alive. One sink per process (the addon's Rust state is shared
//! by every storage and worker): a later call replaces it.

use super::to_napi;
use crate::core::telemetry::{self, LogRecord};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi_derive::napi;

/// Events waiting for the JS thread beyond this many are dropped.
const QUEUE: usize = 4096;

/// One record, as `{ level, target, message, fields }`.
pub struct JsLogRecord(LogRecord);

impl ToNapiValue for JsLogRecord {
    unsafe fn to_napi_value(raw: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        use serde_json::Value as J;
        let env = Env::from_raw(raw);
        let r = val.0;
        let mut fields = Object::new(&env)?;
        for (k, v) in r.fields {
            match v {
                J::Null => fields.set(k, Null)?,
                J::Bool(b) => fields.set(k, b)?,
                J::Number(n) => fields.set(k, n.as_f64().unwrap_or(f64::NAN))?,
                J::String(s) => fields.set(k, s)?,
                // Events carry scalars only; anything else travels as JSON.
                other => fields.set(k, other.to_string())?,
            }
        }
        let mut obj = Object::new(&env)?;
        obj.set("level", r.level)?;
        obj.set("target", r.target)?;
        obj.set("message", r.message)?;
        obj.set("fields", fields)?;
        Ok(obj.raw())
    }
}

type Callback =
    ThreadsafeFunction<JsLogRecord, UnknownReturnValue, JsLogRecord, Status, false, true, QUEUE>;

/// Routes native events to `callback` (`null`: back to stderr when
/// `SYNCULAR_NATIVE_LOG` is set, else off). `filter`: env-filter
/// directives; default `SYNCULAR_NATIVE_LOG`, else `warn`. An invalid
/// filter throws `ERR_SYNCULAR_INVALID_ARGUMENT` and changes nothing.
// Test builds leave out napi's registration, which is its only caller.
#[cfg_attr(test, allow(dead_code))]
#[napi(
    js_name = "setLogSink",
    ts_args_type = "callback: ((record: { level: string, target: string, message: string, fields: Record<string, string | number | boolean | null> }) => void) | null | undefined, filter?: string | null | undefined"
)]
pub fn set_log_sink(callback: Option<Callback>, filter: Option<String>) -> Result<()> {
    let sink = callback.map(|tsfn| -> telemetry::SinkFn {
        Box::new(move |record| {
            // Non-blocking: a full queue or a closing env drops the event.
            let _ = tsfn.call(JsLogRecord(record), ThreadsafeFunctionCallMode::NonBlocking);
        })
    });
    telemetry::set_sink(sink, filter.as_deref()).map_err(to_napi)
}

/// A transaction open too long (lib/transaction.js watches the ages), on
/// `syncular::tx` at warn, through the same sink and filters as every
/// native event.
#[cfg_attr(test, allow(dead_code))]
#[napi(js_name = "logTransactionOpen")]
pub fn log_transaction_open(
    postgres: bool, partition: String, age_ms: f64, last_member: String, rolled_back: bool,
) {
    let engine = if postgres {
        telemetry::POSTGRES
    } else {
        telemetry::SQLITE
    };
    let age = if age_ms.is_finite() && age_ms > 0.0 {
        age_ms as u64
    } else {
        0
    };
    telemetry::transaction_open(engine, &partition, age, &last_member, rolled_back);
}

/// Reads `SYNCULAR_NATIVE_LOG` when the addon registers (once per process).
#[cfg_attr(test, allow(dead_code))]
#[napi(module_exports)]
pub fn init_telemetry(_exports: Object) -> Result<()> {
    telemetry::init();
    Ok(())
}
