//! Hand-written N-API callbacks for the members a host calls on every
//! request.
//!
//! napi-derive's callback for a `&self` method records the receiver in
//! napi-rs's borrow bookkeeping: a scope allocated per call, registered in
//! a process-wide mutex and hash map, released after the answer is
//! converted. For a point read that is about 2,100 instructions of about
//! 17,000 (callgrind, `bench/instructions.sh`). The bookkeeping keeps a
//! borrowed receiver alive for async work that holds it; these members
//! never lend `&self` to anything that outlives the call (an answer that
//! comes later owns an `Arc` of the engine, see `Reply`), so it buys them
//! nothing.
//!
//! Each callback here does what the generated one does for a synchronous
//! method, minus that: it reads the arguments with the same `FromNapiValue`
//! conversions, checks that `this` is a `NativeEngine` (napi-rs's type
//! tag, so a foreign receiver is refused exactly as before), calls the
//! same `#[napi]` method, converts its answer with the same
//! `ToNapiValue`, and throws an error the same way. Panics are contained.
//! `installFastMembers(NativeEngine.prototype)` (called once by
//! `lib/native.js`) puts them in place of the generated members of the
//! same names, so JS calls them as before.

// Unit-test builds compile napi registration out, and with it the one
// caller of everything here.
#![cfg_attr(test, allow(dead_code))]

use super::args::{Buf, Str};
use super::panicked;
use super::storage::NativeEngine;
use super::to_napi;
use napi::bindgen_prelude::{
    validate_type_tag, FromNapiValue, JsError, Object, ToNapiValue, TypeTag,
};
use napi::{check_status, sys, Env, JsValue, Result};
use napi_derive::napi;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// The most arguments a member here takes.
const MAX_ARGS: usize = 8;

/// A member's arguments, read from `argv` (missing ones are `undefined`,
/// as napi-rs reads them).
trait Args: Sized {
    unsafe fn read(env: sys::napi_env, argv: &[sys::napi_value; MAX_ARGS]) -> Result<Self>;
}

macro_rules! args {
    ($($ty:ident $i:tt),*) => {
        impl<$($ty: FromNapiValue),*> Args for ($($ty,)*) {
            #[allow(unused_variables)]
            unsafe fn read(env: sys::napi_env, argv: &[sys::napi_value; MAX_ARGS]) -> Result<Self> {
                Ok(($(unsafe { $ty::from_napi_value(env, argv[$i])? },)*))
            }
        }
    };
}

args!();
args!(A 0);
args!(A 0, B 1);
args!(A 0, B 1, C 2);
args!(A 0, B 1, C 2, D 3);
args!(A 0, B 1, C 2, D 3, E 4);
args!(A 0, B 1, C 2, D 3, E 4, F 5);
args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// The body of every callback: arguments, receiver, call, answer.
unsafe fn member<A: Args, R: ToNapiValue>(
    env: sys::napi_env, info: sys::napi_callback_info, f: impl FnOnce(&NativeEngine, A) -> R,
) -> sys::napi_value {
    let out = catch_unwind(AssertUnwindSafe(|| -> Result<sys::napi_value> {
        let mut argv = [ptr::null_mut(); MAX_ARGS];
        let mut argc = MAX_ARGS;
        let mut this = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_get_cb_info(
                env,
                info,
                &mut argc,
                argv.as_mut_ptr(),
                &mut this,
                ptr::null_mut(),
            )
        })?;
        let engine = unsafe { receiver(env, this)? };
        let args = unsafe { A::read(env, &argv)? };
        unsafe { R::to_napi_value(env, f(engine, args)) }
    }));
    let err = match out {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(p) => to_napi(panicked(p)),
    };
    unsafe { JsError::from(err).throw_into(env) };
    ptr::null_mut()
}

/// `this` as the `NativeEngine` it wraps, refused unless napi-rs tagged it
/// as one (the check its generated `&self` methods make).
unsafe fn receiver<'a>(env: sys::napi_env, this: sys::napi_value) -> Result<&'a NativeEngine> {
    let mut wrapped = ptr::null_mut();
    check_status!(
        unsafe { sys::napi_unwrap(env, this, &mut wrapped) },
        "Failed to unwrap `NativeEngine` from `this`"
    )?;
    unsafe {
        validate_type_tag(
            env,
            this,
            &<NativeEngine as TypeTag>::type_tag(),
            "NativeEngine",
        )?;
    }
    // SAFETY: the tag says napi-rs wrapped a `NativeEngine` in this object,
    // and the object (`this` of the running call) outlives the call.
    Ok(unsafe { &*wrapped.cast::<NativeEngine>() })
}

/// The members, each `jsName => method(argument types)`.
macro_rules! fast {
    ($($js:literal => $method:ident($($arg:ident: $ty:ty),*);)*) => {
        mod callbacks {
            use super::*;
            $(
                #[allow(non_snake_case)]
                pub unsafe extern "C" fn $method(
                    env: sys::napi_env, info: sys::napi_callback_info,
                ) -> sys::napi_value {
                    unsafe {
                        member(env, info, |e: &NativeEngine, ($($arg,)*): ($($ty,)*)| {
                            e.$method($($arg),*)
                        })
                    }
                }
            )*
        }

        const MEMBERS: &[(&str, sys::napi_callback)] = &[
            $(($js, Some(callbacks::$method)),)*
        ];
    };
}

fast! {
    "begin" => begin(partition: Option<String>);
    "unlock" => unlock(lease: u32, commit: bool);
    "touchPartition" => touch_partition(lease: u32, partition: String, epoch: String, at_ms: f64, rotate: bool);
    "getMaxCommitSeq" => get_max_commit_seq(partition: Str);
    "getHorizonSeq" => get_horizon_seq(partition: String);
    "getClientRecord" => get_client_record(partition: Str, client_id: Str);
    "putClientRecord" => put_client_record(
        lease: u32, partition: String, client_id: String, actor_id: String, wire_version: f64,
        cursor: f64, updated_at_ms: f64, subscriptions_json: String);
    "advanceClientCursor" => advance_client_cursor(
        lease: u32, partition: String, client_id: String, actor_id: Option<String>,
        log_epoch: Option<String>, cursor: f64, updated_at_ms: f64);
    "getPushResult" => get_push_result(partition: String, client_id: Str, commit_id: Str);
    "getRow" => get_row(partition: String, table: Str, row_id: Str);
    "readCommitWindow" => read_commit_window(
        partition: String, table: String, filter_json: String, after_seq: f64, through_seq: f64,
        limit_changes: f64);
    "scanRows" => scan_rows(
        partition: String, table: String, filter_json: String, after_row_id: String, limit: f64);
    "txLockPartitionForPush" => tx_lock_partition_for_push(lease: u32);
    "txGetRow" => tx_get_row(lease: u32, table: Str, row_id: Str);
    "txGetPushResult" => tx_get_push_result(lease: u32, client_id: Str, commit_id: Str);
    "txPutPushResult" => tx_put_push_result(
        lease: u32, client_id: Str, commit_id: Str, result_json: String);
    "txUpsertRow" => tx_upsert_row(
        lease: u32, table: Str, row_id: Str, server_version: f64, scopes_json: Str, payload: Buf,
        column_versions: Option<Buf>, op_index: Option<f64>);
    "txAppendCommit" => tx_append_commit(
        lease: u32, client_id: Str, client_commit_id: Str, actor_id: Str, created_at_ms: f64,
        changes: String, payloads: Buf);
    "txGetTombstoneSeq" => tx_get_tombstone_seq(lease: u32, table: Str, row_id: Str);
    "txClearTombstone" => tx_clear_tombstone(lease: u32, table: Str, row_id: Str);
    "txDeleteRow" => tx_delete_row(lease: u32, table: Str, row_id: Str);
    "txPrefetchRows" => tx_prefetch_rows(lease: u32, table: String, row_ids: Vec<String>);
    "hold" => hold(lease: u32);
}

/// Puts the callbacks above on `prototype` (`NativeEngine.prototype`) in
/// place of the generated members; answers how many.
#[napi]
pub fn install_fast_members(env: Env, prototype: Object) -> Result<u32> {
    let env = env.raw();
    for (name, cb) in MEMBERS {
        let mut f = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_create_function(
                env,
                name.as_ptr().cast(),
                name.len() as isize,
                *cb,
                ptr::null_mut(),
                &mut f,
            )
        })?;
        check_status!(unsafe {
            sys::napi_set_named_property(
                env,
                prototype.raw(),
                format!("{name}\0").as_ptr().cast(),
                f,
            )
        })?;
    }
    Ok(MEMBERS.len() as u32)
}
