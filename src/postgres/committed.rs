//! The `Reads` area on PostgreSQL: reads of committed state on a pool
//! connection (rows, push results, windows, scans, registered queries).

use super::handle::PgEngine;
use super::meta;
use super::rows;
use super::window;
use crate::core::error::Result;
use crate::core::model::*;
use crate::core::query::{Request, Value};
use crate::core::records::Records;
use crate::core::scope::ScopeFilter;
use crate::core::window::Window;
use crate::core::window::WindowQuery;
use crate::postgres::handle::pg;
use crate::postgres::run::read;
use crate::seam::{Call, Reads};
use std::sync::Arc;

impl Reads for Arc<PgEngine> {
    fn get_row(&self, partition: String, table: String, row_id: String) -> Call<Option<StoredRow>> {
        pg!(self, |this| {
            let (loaded, i) = this.table(&table)?;
            read!(this, |c| rows::get_row(
                c,
                &loaded.sql[i],
                &partition,
                &row_id
            )
            .await)
        })
    }

    fn get_push_result(
        &self, partition: String, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        pg!(self, |this| {
            let found = read!(this, |c| meta::get_push_result(
                c, &partition, &client_id, &commit_id
            )
            .await)?;
            if found.is_none() {
                this.push_keys.asked(&partition, &client_id, &commit_id);
            }
            Ok(found)
        })
    }

    fn read_commit_window(&self, p: String, window: Window) -> Call<Records> {
        pg!(self, |e| e.read_commit_window(&p, &window.query()).await)
    }

    fn latest_scoped_change_seq(
        &self, partition: String, table: String, filter: ScopeFilter,
    ) -> Call<i64> {
        pg!(self, |this| {
            read!(this, |c| window::latest_scoped_change_seq(
                c, &partition, &table, &filter
            )
            .await)
        })
    }

    fn scan_rows(
        &self, partition: String, table: String, filter: ScopeFilter, after_row_id: String,
        limit: i64,
    ) -> Call<Records> {
        pg!(self, |this| {
            let (loaded, i) = this.table(&table)?;
            let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
            read!(this, |c| rows::scan_rows(
                c,
                t,
                sql,
                &partition,
                &filter,
                &after_row_id,
                limit
            )
            .await)
        })
    }

    fn scan_rows_by_index(
        &self, p: String, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Records> {
        pg!(self, |e| {
            e.scan_rows_by_index(&p, &table, &index, values.as_deref(), &after_row_id, limit)
                .await
        })
    }

    fn query_authoritative(
        &self, p: String, request: Request, params: Vec<Value>, declared: Vec<String>,
        gate_running: Option<i64>,
    ) -> Call<QueryOutput> {
        // The engine itself, not a borrow: the query's rollback may run
        // after its answer, on a task that holds the engine.
        let engine = Arc::clone(self);
        crate::seam::later(async move {
            PgEngine::query_authoritative(&engine, &p, &request, &params, &declared, gate_running)
                .await
        })
    }
}

impl PgEngine {
    /// Each page is one statement, so one snapshot; a window that needs a
    /// second page reads it as the in-tree storage does, from the last
    /// candidate seq (everything at or below `throughSeq` is committed).
    pub async fn read_commit_window(
        &self, partition: &str, q: &WindowQuery<'_>,
    ) -> Result<Records> {
        if q.probe().is_none() {
            return Ok(Records::none());
        }
        read!(self, |c| window::read_commit_window(c, partition, q).await)
    }
}
