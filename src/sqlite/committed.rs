//! The `Reads` area on SQLite: reads of committed state on a reader
//! connection. Point work answers at once on the calling thread (a
//! statement costs microseconds, less than a thread hop), and so do
//! windows, scans and registered queries judged small before they run
//! (`NOW_CANDIDATES`, `NOW_STEPS`); larger ones run on the host's worker
//! pool.

use super::meta;
use super::rows;
use super::storage::SqliteEngine;
use super::window;
use crate::core::error::Result;
use crate::core::model::*;
use crate::core::query::{Request, Value};
use crate::core::records::Records;
use crate::core::scope::ScopeFilter;
use crate::core::window::Window;
use crate::seam::{blocking, Call, Reads};
use std::sync::Arc;

/// A window or scan on one scope value runs on the calling thread
/// (`Call::Now`) when its limit, or a bound on its candidates, is at most
/// this: a pull's 100-change window, a bootstrap's 1000-row page. A
/// window's bound is its seq range (commit seqs are dense); a scan's, an
/// index-only count of at most this many + 1 entries. Measured on such
/// reads, bun and Node 24 on a quiet machine: a 100-change window costs
/// about 135 µs of work here against 290 µs to settle off-thread, and a
/// 1000-row page 650-790 µs against 935-1140 µs: the hop to a worker, its
/// wake-up and its cold caches cost more than they free the loop for.
/// Larger reads run off-thread.
pub(super) const NOW_CANDIDATES: i64 = 1024;
/// The most rows such a read steps on the calling thread before it is run
/// again off-thread (a candidate commit with many changes, a filter that
/// passes few candidates): at about 14k instructions a window row and 10k
/// a scan row, at most about 2 ms.
pub(super) const NOW_ROWS: usize = 1536;
/// The most payload bytes such a read copies on the calling thread before
/// it is run again off-thread (large rows): a few milliseconds of copying
/// and crossing at most.
pub(super) const NOW_BYTES: usize = 4 << 20;

/// Thousands of VM steps a registered query may take on the calling
/// thread before it is stopped and run off-thread instead (an indexed
/// point query takes well under one; a 10k-row scan about 50). Time bounds
/// it too: `isolation::NOW_STALL`, about as long as the largest window or
/// page read there.
pub(super) const NOW_STEPS: u32 = 128;

impl Reads for Arc<SqliteEngine> {
    fn get_row(&self, partition: String, table: String, row_id: String) -> Call<Option<StoredRow>> {
        self.table_sql(&table, |_, sql| {
            self.read(|c| rows::get_row(c, sql, &partition, &row_id))
        })
        .into()
    }

    fn get_push_result(
        &self, partition: String, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        self.read(|c| meta::get_push_result(c, &partition, &client_id, &commit_id))
            .into()
    }

    fn read_commit_window(&self, p: String, window: Window) -> Call<Records> {
        // One scope value (read in index order, no sort), and at most
        // NOW_CANDIDATES candidate commits: commit seqs are dense, so a
        // window's candidates lie among its `throughSeq - afterSeq` seqs,
        // a bound known without reading anything (a live pull that is
        // little behind).
        let few = window.limit_changes <= NOW_CANDIDATES
            || window.through_seq.saturating_sub(window.after_seq) <= NOW_CANDIDATES;
        if few && window.filter.probe().is_some_and(|(_, v)| v.len() == 1) {
            let q = crate::core::window::WindowQuery {
                page: Some(window.limit_changes.min(NOW_CANDIDATES)),
                ..window.query()
            };
            let r = self.read_snapshot(|c| {
                super::window::read_commit_window_within(
                    c,
                    &p,
                    &q,
                    super::budget::Budget::within(NOW_ROWS, NOW_BYTES),
                )
            });
            match r {
                Err(e) if super::budget::is_over_budget(&e) => {}
                r => return Call::Now(r),
            }
        }
        let e = self.clone();
        blocking(move || SqliteEngine::read_commit_window(&e, &p, &window.query()))
    }

    fn latest_scoped_change_seq(
        &self, partition: String, table: String, filter: ScopeFilter,
    ) -> Call<i64> {
        self.read(|c| window::latest_scoped_change_seq(c, &partition, &table, &filter))
            .into()
    }

    fn scan_rows(
        &self, p: String, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Records> {
        // An unknown table fails before any work is queued.
        if let Err(err) = self.loaded().schema.table(&table) {
            return Call::Now(Err(err));
        }
        // As windows: a small page on one scope value runs here.
        if filter.probe().is_some_and(|(_, v)| v.len() == 1) {
            let small = limit <= NOW_CANDIDATES;
            let r = self.table_sql(&table, |t, sql| {
                self.read_snapshot(|c| {
                    if !small
                        && !super::rows::few_candidates(
                            c,
                            &t.name,
                            &p,
                            &filter,
                            &after_row_id,
                            NOW_CANDIDATES,
                        )?
                    {
                        return Ok(None);
                    }
                    super::rows::scan_rows_within(
                        c,
                        t,
                        sql,
                        &p,
                        &filter,
                        &after_row_id,
                        limit,
                        super::budget::Budget::within(NOW_ROWS, NOW_BYTES),
                    )
                    .map(Some)
                })
            });
            match r {
                Ok(None) => {}
                Err(e) if super::budget::is_over_budget(&e) => {}
                r => return Call::Now(r.map(Option::unwrap_or_default)),
            }
        }
        let e = self.clone();
        blocking(move || SqliteEngine::scan_rows(&e, &p, &table, &filter, &after_row_id, limit))
    }

    fn scan_rows_by_index(
        &self, p: String, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Records> {
        SqliteEngine::scan_rows_by_index(
            self,
            &p,
            &table,
            &index,
            values.as_deref(),
            &after_row_id,
            limit,
        )
        .into()
    }

    fn query_authoritative(
        &self, p: String, request: Request, params: Vec<Value>, declared: Vec<String>,
        gate_running: Option<i64>,
    ) -> Call<QueryOutput> {
        // Tried here unless recent runs of its text outgrew the budget
        // (`super::query::Placement`); a run past NOW_STEPS goes off-thread.
        if let Some(r) = self.try_query_authoritative_now(
            &p,
            &request,
            &params,
            &declared,
            gate_running,
            NOW_STEPS,
        ) {
            return Call::Now(r);
        }
        let e = self.clone();
        blocking(move || {
            SqliteEngine::query_authoritative(&e, &p, &request, &params, &declared, gate_running)
        })
    }
}

impl SqliteEngine {
    pub fn read_commit_window(
        &self, partition: &str, q: &window::WindowQuery<'_>,
    ) -> Result<Records> {
        self.read_snapshot(|c| window::read_commit_window(c, partition, q))
    }

    pub fn scan_rows(
        &self, partition: &str, table: &str, filter: &ScopeFilter, after_row_id: &str, limit: i64,
    ) -> Result<Records> {
        self.table_sql(table, |t, sql| {
            self.read_snapshot(|c| {
                rows::scan_rows(c, t, sql, partition, filter, after_row_id, limit)
            })
        })
    }
}
