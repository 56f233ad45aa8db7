//! Model records as plain JS objects, built straight from the model types
//! (no mirror structs): each `js_object!` lists a record's fields with
//! their JS names. A `None` field is left out, as the host's own objects
//! leave out absent properties.

use super::args::js_type;
use crate::core::model::admin::{BlobReferencingRow, CommitMetadata, ScopeActivity};
use crate::core::model::reactions::{PrunedCounts, StoredReaction};
use crate::core::model::*;
use napi::bindgen_prelude::{check_status, ToNapiValue};
use napi::sys;
use std::ffi::CStr;
use std::ptr;

/// A value that may be an object's property.
pub trait Field {
    /// `None`: leave the property out.
    unsafe fn js(self, env: sys::napi_env) -> napi::Result<Option<sys::napi_value>>;
}

macro_rules! plain_field {
    ($($ty:ty),*) => {$(
        impl Field for $ty {
            unsafe fn js(self, env: sys::napi_env) -> napi::Result<Option<sys::napi_value>> {
                unsafe { <$ty as ToNapiValue>::to_napi_value(env, self) }.map(Some)
            }
        }
    )*};
}

plain_field!(String, i64, f64, bool, Vec<String>, Vec<Pending>);

/// A JS value built elsewhere.
pub struct Raw(pub sys::napi_value);

impl Field for Raw {
    unsafe fn js(self, _env: sys::napi_env) -> napi::Result<Option<sys::napi_value>> {
        Ok(Some(self.0))
    }
}

impl<T: Field> Field for Option<T> {
    unsafe fn js(self, env: sys::napi_env) -> napi::Result<Option<sys::napi_value>> {
        match self {
            Some(v) => unsafe { v.js(env) },
            None => Ok(None),
        }
    }
}

pub unsafe fn object(env: sys::napi_env) -> napi::Result<sys::napi_value> {
    let mut obj = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_object(env, &mut obj) })?;
    Ok(obj)
}

pub unsafe fn set(
    env: sys::napi_env, obj: sys::napi_value, key: &CStr, v: impl Field,
) -> napi::Result<()> {
    if let Some(value) = unsafe { v.js(env) }? {
        check_status!(unsafe { sys::napi_set_named_property(env, obj, key.as_ptr(), value) })?;
    }
    Ok(())
}

macro_rules! js_object {
    ($ty:ty { $($field:ident: $js:literal),* $(,)? }) => {
        js_type!($ty, stringify!($ty), Object);

        impl Field for $ty {
            unsafe fn js(self, env: sys::napi_env) -> napi::Result<Option<sys::napi_value>> {
                unsafe { <$ty as ToNapiValue>::to_napi_value(env, self) }.map(Some)
            }
        }

        impl ToNapiValue for $ty {
            unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
                unsafe {
                    let obj = object(env)?;
                    $(set(env, obj, CStr::from_bytes_with_nul(concat!($js, "\0").as_bytes()).unwrap(), val.$field)?;)*
                    Ok(obj)
                }
            }
        }
    };
}

/// A checkpoint the serve gate waits for.
pub struct Pending {
    pub partition: String,
    pub name: String,
}

/// `getRowScopes`' answer.
pub struct RowScopes {
    pub server_version: i64,
    /// JSON text; the JS layer parses it.
    pub scopes: String,
}

/// The serve gate with its pending checkpoints as objects.
pub struct Gate {
    pub stored_schema_version: i64,
    pub log_epoch: Option<String>,
    pub pending: Vec<Pending>,
}

impl From<ServeGate> for Gate {
    fn from(g: ServeGate) -> Self {
        Gate {
            stored_schema_version: g.stored_schema_version,
            log_epoch: g.log_epoch,
            pending: g
                .pending
                .into_iter()
                .map(|(partition, name)| Pending { partition, name })
                .collect(),
        }
    }
}

js_object!(Pending {
    partition: "partition",
    name: "name"
});
js_object!(Gate {
    stored_schema_version: "storedSchemaVersion",
    log_epoch: "logEpoch",
    pending: "pending",
});
js_object!(RowScopes {
    server_version: "serverVersion",
    scopes: "scopes"
});
js_object!(ClientCursor {
    client_id: "clientId",
    cursor: "cursor",
    updated_at_ms: "updatedAtMs"
});
js_object!(PruneResult {
    previous_horizon_seq: "previousHorizonSeq",
    horizon_seq: "horizonSeq",
    removed_commits: "removedCommits",
});
js_object!(Checkpoint {
    partition: "partition",
    name: "name",
    schema_version: "schemaVersion",
    state: "state",
    watermark: "watermark",
    owner_epoch: "ownerEpoch",
    observed_rows: "observedRows",
    updated_at_ms: "updatedAtMs",
});
js_object!(CommitMetadata {
    commit_seq: "commitSeq",
    client_id: "clientId",
    client_commit_id: "clientCommitId",
    actor_id: "actorId",
    created_at_ms: "createdAtMs",
    change_count: "changeCount",
    tables: "tables",
});
js_object!(ScopeActivity {
    commit_seq: "commitSeq",
    table: "table",
    created_at_ms: "createdAtMs",
    actor_id: "actorId",
    change_count: "changeCount",
});
js_object!(BlobReferencingRow {
    table: "table",
    row_id: "rowId",
    scopes_json: "scopes"
});
js_object!(PrunedCounts {
    completed: "completed",
    dead_letter: "deadLetter"
});
// JSON columns (payload, lastFailure) cross as text; the JS layer parses them.
js_object!(StoredReaction {
    idempotency_key: "idempotencyKey",
    kind: "type",
    version: "version",
    payload_json: "payload",
    source_client_id: "sourceClientId",
    source_client_commit_id: "sourceClientCommitId",
    source_commit_seq: "sourceCommitSeq",
    created_at_ms: "createdAtMs",
    max_attempts: "maxAttempts",
    status: "status",
    attempts: "attempts",
    available_at_ms: "availableAtMs",
    lease_owner: "leaseOwner",
    lease_expires_at_ms: "leaseExpiresAtMs",
    completed_at_ms: "completedAtMs",
    last_failure_json: "lastFailure",
});
