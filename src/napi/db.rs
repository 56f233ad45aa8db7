//! `NativeDb`: `storage.db` as the JS layer sees it (`lib/db.js` shapes it
//! into upstream's `SqliteDatabase`). Every member is synchronous, as that
//! surface is: it runs on the calling thread (`crate::sqlite::shared`).
//! Values in as registered queries take them; rows out as upstream's
//! drivers give them (integers beyond 2^53 as `bigint`, BLOBs as
//! `Uint8Array`).

use super::query::{cell, values, QueryValue};
use super::records::object;
use super::storage::NativeEngine;
use crate::core::error::Error;
use crate::core::model::MAX_SAFE_INTEGER;
use crate::sqlite::shared::{Fetch, Output};
use crate::sqlite::SqliteEngine;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::sync::Arc;

#[napi]
pub struct NativeDb {
    engine: Arc<SqliteEngine>,
}

/// A statement's answer: `{ changes, lastInsertRowid }`, one row object or
/// `null`, or an array of row objects.
pub struct Answer(Output, Fetch);

super::args::js_type!(Answer, "unknown", Unknown);

fn integer(env: sys::napi_env, i: i64) -> Result<sys::napi_value> {
    unsafe {
        if i.abs() <= MAX_SAFE_INTEGER {
            f64::to_napi_value(env, i as f64)
        } else {
            BigInt::to_napi_value(env, BigInt::from(i))
        }
    }
}

impl ToNapiValue for Answer {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        unsafe {
            match val {
                Answer(
                    Output::Ran {
                        changes,
                        last_insert_rowid,
                    },
                    _,
                ) => {
                    let obj = object(env)?;
                    let c = integer(env, changes)?;
                    let r = integer(env, last_insert_rowid)?;
                    check_status!(sys::napi_set_named_property(
                        env,
                        obj,
                        c"changes".as_ptr(),
                        c
                    ))?;
                    check_status!(sys::napi_set_named_property(
                        env,
                        obj,
                        c"lastInsertRowid".as_ptr(),
                        r
                    ))?;
                    Ok(obj)
                }
                Answer(Output::Rows { columns, rows }, fetch) => {
                    let keys = columns
                        .into_iter()
                        .map(|c| String::to_napi_value(env, c))
                        .collect::<Result<Vec<_>>>()?;
                    let mut objects = Vec::with_capacity(rows.len());
                    for row in rows {
                        let obj = object(env)?;
                        for (key, v) in keys.iter().zip(row) {
                            check_status!(sys::napi_set_property(env, obj, *key, cell(env, v)?))?;
                        }
                        objects.push(obj);
                    }
                    if fetch == Fetch::Get {
                        return match objects.pop() {
                            Some(o) => Ok(o),
                            None => Null::to_napi_value(env, Null),
                        };
                    }
                    let mut array = std::ptr::null_mut();
                    check_status!(sys::napi_create_array_with_length(
                        env,
                        objects.len(),
                        &mut array
                    ))?;
                    for (i, o) in objects.into_iter().enumerate() {
                        check_status!(sys::napi_set_element(env, array, i as u32, o))?;
                    }
                    Ok(array)
                }
            }
        }
    }
}

#[napi]
impl NativeEngine {
    /// The storage's `db` (SQLite engines only).
    #[napi]
    pub fn shared_db(&self) -> Result<NativeDb> {
        super::guard(|| {
            let engine = self.sqlite_engine().ok_or_else(|| {
                Error::plain(
                    "ERR_SYNCULAR_DB_UNSUPPORTED",
                    "storage.db is the SQLite engine's connection; a PostgreSQL storage has none. \
                     Keep the segment and blob stores on S3 (S3SegmentStore, S3BlobStore) or on a \
                     SQLite file of their own, and the lease store in memory or on such a file",
                )
            })?;
            Ok(NativeDb { engine })
        })
    }
}

impl NativeDb {
    fn statement(&self, sql: String, params: Vec<QueryValue>, fetch: Fetch) -> Result<Answer> {
        super::guard(|| {
            self.engine
                .db_statement(&sql, values(params), fetch)
                .map(|out| Answer(out, fetch))
        })
    }
}

#[napi]
impl NativeDb {
    #[napi]
    pub fn exec(&self, sql: String) -> Result<()> {
        super::guard(|| self.engine.db_exec(&sql))
    }

    /// Compiles `sql` (one statement), so `query(sql)` fails at once on a
    /// bad one.
    #[napi]
    pub fn prepare(&self, sql: String) -> Result<()> {
        super::guard(|| self.engine.db_prepare(&sql))
    }

    #[napi(ts_return_type = "{ changes: number | bigint, lastInsertRowid: number | bigint }")]
    pub fn run(&self, sql: String, params: Vec<QueryValue>) -> Result<Answer> {
        self.statement(sql, params, Fetch::Run)
    }

    #[napi(ts_return_type = "Record<string, unknown> | null")]
    pub fn get(&self, sql: String, params: Vec<QueryValue>) -> Result<Answer> {
        self.statement(sql, params, Fetch::Get)
    }

    #[napi(ts_return_type = "Record<string, unknown>[]")]
    pub fn all(&self, sql: String, params: Vec<QueryValue>) -> Result<Answer> {
        self.statement(sql, params, Fetch::All)
    }
}
