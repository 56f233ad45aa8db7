//! N-API members for registered queries and index lookups: JS values in
//! (`AuthoritativeQueryValue`), driver-shaped rows out (integers beyond
//! 2^53 as `bigint`).

use super::args::js_type;
use super::args::At;
use super::bytes::Bytes;
use super::convert::int;
use super::packed::Records;
use super::records::{object, set, Gate, Raw};
use super::reply::Reply;
use super::storage::NativeEngine;
use crate::core::error::Error;
use crate::core::model::MAX_SAFE_INTEGER;
use crate::core::model::{Cell as SqlValue, QueryOutput};
use crate::core::query::{Relation, Request, Value};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

/// One `AuthoritativeQueryValue` (or `RowValue`) from JS.
pub struct QueryValue(pub Value);

js_type!(QueryValue, "AuthoritativeQueryValue", Unknown);

impl ValidateNapiValue for QueryValue {}

impl FromNapiValue for QueryValue {
    unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
        let mut ty = 0;
        check_status!(unsafe { sys::napi_typeof(env, v, &mut ty) })?;
        let value = match ty {
            sys::ValueType::napi_undefined => Value::Undefined,
            sys::ValueType::napi_null => Value::Null,
            sys::ValueType::napi_string => Value::Text(unsafe { String::from_napi_value(env, v) }?),
            sys::ValueType::napi_number => {
                Value::from_f64(unsafe { f64::from_napi_value(env, v) }?)
            }
            sys::ValueType::napi_boolean => {
                Value::Integer(i64::from(unsafe { bool::from_napi_value(env, v) }?))
            }
            sys::ValueType::napi_bigint => {
                let (i, lossless) = unsafe { BigInt::from_napi_value(env, v) }?.get_i64();
                if !lossless {
                    return Err(super::to_napi(Error::invalid(
                        "a bigint query value must fit in a signed 64-bit integer",
                    )));
                }
                Value::Integer(i)
            }
            sys::ValueType::napi_object => {
                let mut is_typed = false;
                check_status!(unsafe { sys::napi_is_typedarray(env, v, &mut is_typed) })?;
                if !is_typed {
                    return Err(super::to_napi(Error::invalid(
                        "a query value must be a string, number, bigint, boolean, Uint8Array or null",
                    )));
                }
                Value::Blob(unsafe { Uint8Array::from_napi_value(env, v) }?.to_vec())
            }
            _ => {
                return Err(super::to_napi(Error::invalid(
                    "a query value must be a string, number, bigint, boolean, Uint8Array or null",
                )))
            }
        };
        Ok(QueryValue(value))
    }
}

pub(super) fn values(list: Vec<QueryValue>) -> Vec<Value> {
    list.into_iter().map(|v| v.0).collect()
}

#[napi(object)]
pub struct JsRelation {
    pub table: String,
    pub start: f64,
    pub end: f64,
    pub alias: Option<String>,
}

/// The request as the shim normalizes it: `plan` when the host sent one
/// (`plan_malformed` when it is not shaped like one), else `sql`.
#[napi(object)]
pub struct JsQueryRequest {
    pub sql: Option<String>,
    pub plan_sql: Option<String>,
    pub relations: Option<Vec<JsRelation>>,
    pub plan_malformed: Option<bool>,
    pub tables: Vec<String>,
}

impl JsQueryRequest {
    pub(super) fn into_parts(self) -> (Request, Vec<String>) {
        let req = if self.plan_malformed == Some(true) {
            Request::Malformed
        } else if let (Some(sql), Some(relations)) = (self.plan_sql, self.relations) {
            Request::Plan {
                sql,
                relations: relations
                    .into_iter()
                    .map(|r| Relation {
                        table: r.table,
                        start: r.start,
                        end: r.end,
                        alias: r.alias,
                    })
                    .collect(),
            }
        } else if let Some(sql) = self.sql {
            Request::Legacy { sql }
        } else {
            Request::Malformed
        };
        (req, self.tables)
    }
}

/// `{ rows, maxCommitSeq, gate?, error?, more? }` built straight into JS
/// objects. Rows are made for at most [`PAGE`] in one event-loop turn:
/// when some are left, `more` holds them ([`QueryRows`]), and the JS layer
/// fills `rows` from it over later turns (`lib/query.js`).
pub struct JsQueryResult(pub QueryOutput);

js_type!(JsQueryResult, "AuthoritativeQueryResult", Object);

/// The longest the JS thread spends making one result's rows in one turn.
const PAGE: std::time::Duration = std::time::Duration::from_millis(2);

pub(super) unsafe fn cell(env: sys::napi_env, v: SqlValue) -> Result<sys::napi_value> {
    unsafe {
        match v {
            SqlValue::Null => Null::to_napi_value(env, Null),
            SqlValue::Integer(i) if i.abs() <= MAX_SAFE_INTEGER => {
                f64::to_napi_value(env, i as f64)
            }
            SqlValue::Integer(i) => BigInt::to_napi_value(env, BigInt::from(i)),
            SqlValue::Real(f) => f64::to_napi_value(env, f),
            SqlValue::Text(s) => String::to_napi_value(env, s),
            SqlValue::Blob(b) => Bytes::to_napi_value(env, Bytes(b)),
        }
    }
}

/// The rows of a result not yet made into JS objects.
#[napi]
pub struct QueryRows {
    columns: Vec<String>,
    rows: std::vec::IntoIter<Vec<SqlValue>>,
    /// The index in `rows` (the JS array) of the next row.
    next: u32,
}

impl QueryRows {
    /// Makes rows into `target` (an array of the result's length) until
    /// none is left (true) or [`PAGE`] has passed (false).
    unsafe fn page(&mut self, env: sys::napi_env, target: sys::napi_value) -> Result<bool> {
        let started = std::time::Instant::now();
        unsafe {
            let keys = self
                .columns
                .iter()
                .map(|c| String::to_napi_value(env, c.clone()))
                .collect::<Result<Vec<_>>>()?;
            let mut made = 0usize;
            for row in self.rows.by_ref() {
                let obj = object(env)?;
                made += row.len() + 1;
                for (key, v) in keys.iter().zip(row) {
                    check_status!(sys::napi_set_property(env, obj, *key, cell(env, v)?))?;
                }
                check_status!(sys::napi_set_element(env, target, self.next, obj))?;
                self.next += 1;
                // A clock read per few hundred values.
                if made >= 256 {
                    made = 0;
                    if started.elapsed() >= PAGE {
                        return Ok(self.rows.len() == 0);
                    }
                }
            }
        }
        Ok(true)
    }
}

#[napi]
impl QueryRows {
    /// Makes the next page of rows into `rows`; true once all are made.
    #[napi]
    pub fn fill(&mut self, env: Env, rows: Array) -> Result<bool> {
        unsafe { self.page(env.raw(), rows.raw()) }
    }
}

impl ToNapiValue for JsQueryResult {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let out = val.0;
        unsafe {
            let mut rows = std::ptr::null_mut();
            check_status!(sys::napi_create_array_with_length(
                env,
                out.rows.len(),
                &mut rows
            ))?;
            let mut rest = QueryRows {
                columns: out.columns,
                rows: out.rows.into_iter(),
                next: 0,
            };
            let done = rest.page(env, rows)?;
            let result = object(env)?;
            set(env, result, c"rows", Raw(rows))?;
            set(env, result, c"maxCommitSeq", out.max_commit_seq as f64)?;
            set(env, result, c"gate", out.gate.map(Gate::from))?;
            set(env, result, c"error", out.error.map(|e| e.to_wire()))?;
            if !done {
                set(
                    env,
                    result,
                    c"more",
                    Raw(QueryRows::to_napi_value(env, rest)?),
                )?;
            }
            Ok(result)
        }
    }
}

#[napi]
impl NativeEngine {
    /// `queryAuthoritative` on committed state. With `gate_running`, the
    /// serve gate at that version is read in the query's snapshot and
    /// returned as `gate`.
    #[napi(ts_return_type = "QueryResult | Promise<QueryResult>")]
    pub fn query_authoritative(
        &self, partition: String, request: JsQueryRequest, params: Vec<QueryValue>,
        gate_running: Option<f64>,
    ) -> Reply<JsQueryResult> {
        self.query_at(At::Committed(partition), request, params, gate_running)
    }

    /// `tx.queryAuthoritative`: inside the lease's transaction (its
    /// connection, its staged writes).
    #[napi(ts_return_type = "QueryResult | Promise<QueryResult>")]
    pub fn tx_query_authoritative(
        &self, lease: u32, request: JsQueryRequest, params: Vec<QueryValue>,
    ) -> Reply<JsQueryResult> {
        self.query_at(At::Tx(lease), request, params, None)
    }

    /// `values_in` absent: the caller's `values` was not an array.
    #[napi(ts_return_type = "Records | Promise<Records>")]
    pub fn scan_rows_by_index(
        &self, partition: String, table: String, index: String, values_in: Option<Vec<QueryValue>>,
        after_row_id: String, limit: f64,
    ) -> Reply<Records> {
        self.index_at(
            At::Committed(partition),
            table,
            index,
            values_in,
            after_row_id,
            limit,
        )
    }

    #[napi(ts_return_type = "Records | Promise<Records>")]
    pub fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values_in: Option<Vec<QueryValue>>,
        after_row_id: String, limit: f64,
    ) -> Reply<Records> {
        self.index_at(At::Tx(lease), table, index, values_in, after_row_id, limit)
    }
}

impl NativeEngine {
    fn query_at(
        &self, at: At, request: JsQueryRequest, params: Vec<QueryValue>, gate_running: Option<f64>,
    ) -> Reply<JsQueryResult> {
        self.run("queryAuthoritative", |e| {
            let (request, tables) = request.into_parts();
            let params = values(params);
            let out = match at {
                At::Committed(p) => {
                    let running = gate_running
                        .map(|v| int(v, "runningSchemaVersion"))
                        .transpose()?;
                    e.query_authoritative(p, request, params, tables, running)
                }
                At::Tx(lease) => e.tx_query_authoritative(lease, request, params, tables),
            };
            Ok(out.map(JsQueryResult))
        })
    }

    fn index_at(
        &self, at: At, table: String, index: String, values_in: Option<Vec<QueryValue>>,
        after_row_id: String, limit: f64,
    ) -> Reply<Records> {
        self.run("scanRowsByIndex", |e| {
            let vals = values_in.map(values);
            Ok(match at {
                At::Committed(p) => {
                    e.scan_rows_by_index(p, table, index, vals, after_row_id, limit)
                }
                At::Tx(lease) => {
                    e.tx_scan_rows_by_index(lease, table, index, vals, after_row_id, limit)
                }
            })
        })
    }
}
