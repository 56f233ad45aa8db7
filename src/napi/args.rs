//! Argument types for the synchronous hot path. napi-rs turns a `String`
//! argument into two N-API calls (length, then copy) and a heap allocation;
//! table names, row ids and client ids are short, so `Str` reads them in
//! one call into an inline buffer and only falls back to the heap for long
//! strings. `Buf` borrows a `Uint8Array`'s memory for the duration of the
//! call instead of taking a GC reference to it, which napi-rs's owned
//! `Uint8Array` does on every call.

use napi::bindgen_prelude::{FromNapiValue, ValidateNapiValue};
use napi::{sys, Error, Result, Status};
use std::ops::Deref;
use std::ptr;

/// `impl TypeName` for a hand-converted type: its TypeScript spelling and
/// the JS value type napi checks.
macro_rules! js_type {
    ($ty:ty, $ts:expr, $kind:ident) => {
        impl napi::bindgen_prelude::TypeName for $ty {
            fn type_name() -> &'static str {
                $ts
            }

            fn value_type() -> napi::bindgen_prelude::ValueType {
                napi::bindgen_prelude::ValueType::$kind
            }
        }
    };
}
pub(crate) use js_type;

const INLINE: usize = 120;

pub struct Str {
    len: usize,
    inline: [u8; INLINE],
    heap: Option<String>,
}

impl Deref for Str {
    type Target = str;

    fn deref(&self) -> &str {
        match &self.heap {
            Some(s) => s,
            // SAFETY: napi_get_value_string_utf8 writes valid UTF-8 (invalid
            // sequences are replaced) and never splits a character.
            None => unsafe { std::str::from_utf8_unchecked(&self.inline[..self.len]) },
        }
    }
}

impl Str {
    pub fn into_string(self) -> String {
        match self.heap {
            Some(s) => s,
            None => (*self).to_owned(),
        }
    }
}

impl From<Str> for String {
    fn from(s: Str) -> String {
        s.into_string()
    }
}

js_type!(Str, "string", String);

impl ValidateNapiValue for Str {}

impl FromNapiValue for Str {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut out = Str {
            len: 0,
            inline: [0; INLINE],
            heap: None,
        };
        let status = unsafe {
            sys::napi_get_value_string_utf8(
                env,
                value,
                out.inline.as_mut_ptr().cast(),
                INLINE,
                &mut out.len,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(Error::new(
                Status::from(status),
                "expected a string argument".to_owned(),
            ));
        }
        // The copy stops before a character that does not fit, so a string
        // that left fewer than 4 bytes (one UTF-8 character) of the buffer
        // unused may have been cut: read it the long way.
        if out.len + 4 >= INLINE {
            out.heap = Some(unsafe { String::from_napi_value(env, value)? });
        }
        Ok(out)
    }
}

/// A borrowed `Uint8Array` (any view offset); valid for the call only.
pub struct Buf {
    data: *const u8,
    len: usize,
}

impl Deref for Buf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the typed array is an argument of the running call, so
        // its memory stays alive and unmoved until the call returns, and
        // `Buf` never outlives the call (it is neither Send nor stored).
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

js_type!(Buf, "Uint8Array", Object);

impl ValidateNapiValue for Buf {}

impl FromNapiValue for Buf {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut kind = 0;
        let mut len = 0;
        let mut data = ptr::null_mut();
        let mut buffer = ptr::null_mut();
        let mut offset = 0;
        let status = unsafe {
            sys::napi_get_typedarray_info(
                env,
                value,
                &mut kind,
                &mut len,
                &mut data,
                &mut buffer,
                &mut offset,
            )
        };
        if status != sys::Status::napi_ok || kind != sys::TypedarrayType::uint8_array {
            return Err(Error::new(
                Status::InvalidArg,
                "expected a Uint8Array argument".to_owned(),
            ));
        }
        Ok(Buf {
            data: data.cast_const().cast(),
            len,
        })
    }
}

/// Where a read runs: a partition name (committed state) or a lease
/// number (inside that transaction, seeing its own writes). Members with a
/// storage-level and a transaction form have one N-API method per form
/// (`getRow(partition, …)`, `txGetRow(lease, …)`) that names its `At`: what
/// a call means is never inferred from an argument's JS type, so a number
/// passed as a partition is refused, never taken for a lease.
pub enum At {
    Committed(String),
    Tx(u32),
}
