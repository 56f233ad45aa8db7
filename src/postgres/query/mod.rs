//! Registered authoritative queries (storage-layout §13) and index lookups
//! (§7.6) on PostgreSQL. The shared rewrite (`crate::core::query`) runs first,
//! for its upstream-compatible errors; its placeholders are renumbered
//! (`?` → `$n`, §13.5), then [`guard`] parses the text with PostgreSQL's
//! own parser, binds every table to the call's partition in the tree,
//! checks the tree against an allowlist and prints the SQL that runs.
//!
//! A table is read through the session's security-barrier view of it
//! (`pg_temp."_syncular_q_…"`, [`guard::view_ddl`]), which shows the rows
//! of the partition set in `syncular.partition`. Each call sets that
//! setting locally to its transaction or savepoint, in the message that
//! opens it; a connection that lacks the views (new, or its transaction
//! that created them rolled back) creates them when the query reports
//! them missing, and runs the query again.
//!
//! Execution confines what the query can touch even beyond the guard:
//! `search_path` is `pg_catalog, pg_temp` (unqualified names reach nothing
//! of the database's own), `statement_timeout` is `queryTimeoutMs`, and no
//! effect survives the call: the storage-level form runs in a READ ONLY
//! snapshot that is rolled back, the transaction-bound form inside a
//! savepoint that is rolled back (SET LOCAL reverts with either). Result
//! cells are decoded into the engine-neutral cell values the binding turns
//! into JS (int8 beyond 2^53 as `bigint`).

mod bounds;
mod cells;
mod cost;
mod guard;
#[cfg(test)]
mod guard_tests;
mod index;
mod one_message;
pub(in crate::postgres) mod run;

use crate::core::error::{Error, Result};
use crate::core::model::QueryOutput;
use crate::core::model::ServeGate;
use crate::core::query::{self, Prepared, Request, Value};
use crate::core::schema::quote_ident;
use crate::core::telemetry::{self, Site, Slow};
use crate::postgres::error::map_err;
use crate::postgres::handle::PgEngine;
use crate::postgres::meta;
use crate::postgres::quote::lit;
use crate::postgres::rows::Loaded;
use crate::postgres::run::with_tx;
use crate::postgres::stmt::exec;
use run::{
    confine, counter_of, max_commit_seq_then, missing_view, run, Left, Where, ABANDON_AFTER,
};
use sqlx::{AssertSqlSafe, Executor, PgConnection, Postgres};
use std::sync::Arc;

const SAVEPOINT: &str = "syncular_query";

impl PgEngine {
    /// The loaded schema; registered queries refuse to run before
    /// `ensureSchema`.
    fn registered_schema(&self) -> Result<Arc<Loaded>> {
        query::ensured(&self.loaded)
    }

    /// The storage's schema: the `schema` option, else the connection's
    /// `current_schema()` (read once).
    async fn query_where(&self, c: &mut PgConnection) -> Result<&Where> {
        self.query
            .schema
            .get_or_try_init(|| async {
                let schema = match &self.cfg.schema {
                    Some(s) => s.clone(),
                    // Simple protocol: one message, whatever session a
                    // transaction pooler gives it.
                    None => sqlx::Row::try_get::<Option<String>, _>(
                        &c.fetch_one("SELECT current_schema()")
                            .await
                            .map_err(map_err)?,
                        0,
                    )
                    .map_err(map_err)?
                    .ok_or_else(|| {
                            Error::plain(
                                "ERR_SYNCULAR_NO_SCHEMA",
                                "the connection has no current schema (search_path names none that exists)",
                            )
                        })?,
                };
                Ok::<_, Error>(Where {
                    quoted: quote_ident(&schema),
                    schema,
                })
            })
            .await
    }

    /// The rewrite, then the guard (cached per SQL text).
    fn prepare_query(
        &self, req: &Request, params: &[Value], declared: &[String], w: &Where,
    ) -> Result<(Prepared, Arc<guard::Guarded>)> {
        let loaded = self.registered_schema()?;
        if req.text_len() > guard::MAX_QUERY_BYTES {
            // Before the rewrite and the guard: their work grows with it.
            return Err(Error::plain(
                query::REFUSED,
                format!(
                    "registered query refused: it is longer than {} bytes",
                    guard::MAX_QUERY_BYTES
                ),
            ));
        }
        let prepared = query::prepare(req, params, declared, &loaded.schema)?;
        if query::count_params(&prepared.sql) != prepared.binds.len() {
            return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
        }
        let sql = query::dollar_params(&prepared.sql);
        let scope = guard::Scope {
            schema: &w.schema,
            tables: &loaded.schema.tables,
        };
        let owner: Arc<dyn std::any::Any + Send + Sync> = loaded.clone();
        let g = guard::cached(&self.query.cache, owner, &sql, &prepared.binds, &scope)?;
        Ok((prepared, g))
    }

    /// Storage-level `queryAuthoritative`: one REPEATABLE READ READ ONLY
    /// snapshot holding the serve gate (when `gate_running` is given),
    /// `max_commit_seq` and the rows; always rolled back. Two round trips
    /// are waited for (the opening, which reads `max_commit_seq`, and the
    /// query); the `ROLLBACK` of an answered call runs after the answer
    /// ([`PgEngine::roll_back_after`]).
    pub async fn query_authoritative(
        self: &Arc<Self>, partition: &str, req: &Request, params: &[Value], declared: &[String],
        gate_running: Option<i64>,
    ) -> Result<QueryOutput> {
        let loaded = self.registered_schema()?;
        let mut conn = self.acquire().await?;
        let w = self.query_where(&mut conn).await?;
        off_the_calling_thread(req).await;
        let (prepared, g) = self.prepare_query(req, params, declared, w)?;
        let timeout = self.cfg.query_timeout;
        let confined = confine(timeout, partition)?;
        let mut created = false;
        // PostgreSQL checks statement_timeout between rows, not inside one
        // call of a function: a call still running ABANDON_AFTER past the
        // limit is given up, and its connection closed (the server stops
        // the statement at its next check, when it finds the client gone).
        let give_up = tokio::time::Instant::now() + timeout + ABANDON_AFTER;
        loop {
            let attempt = self.query_attempt(
                &mut conn,
                w,
                &g,
                &prepared,
                params,
                partition,
                gate_running,
                &confined,
            );
            let (out, left) = match tokio::time::timeout_at(give_up, attempt).await {
                Ok(done) => done,
                Err(_) => (Err(query::timed_out(timeout)), Left::Broken),
            };
            if let (Ok(QueryOutput { error: None, .. }), Left::Open) = (&out, left) {
                // Answered: the rollback does not hold the answer back.
                self.roll_back_after(conn, timeout);
                return out;
            }
            let healthy = match left {
                Left::Clean => true,
                Left::Broken => false,
                Left::Open => exec(&mut conn, "ROLLBACK").await.is_ok(),
            };
            let missing = match &out {
                Err(e) | Ok(QueryOutput { error: Some(e), .. }) => missing_view(e),
                Ok(_) => false,
            };
            if missing && healthy && !created && !self.pooled() {
                // Outside any transaction (the attempt rolled back): the
                // views outlive the call, for the connection's session.
                created = true;
                let ddl = guard::view_ddl(&w.schema, &loaded.schema.tables);
                if let Err(e) = conn.execute(AssertSqlSafe(ddl)).await {
                    let e = map_err(e);
                    let healthy = exec(&mut conn, "ROLLBACK").await.is_ok();
                    if !healthy {
                        conn.close_on_drop();
                    }
                    self.recycle(conn, healthy);
                    return Err(self.cancelled_by_close(e));
                }
                continue;
            }
            if !healthy {
                conn.close_on_drop();
            }
            self.recycle(conn, healthy);
            return out.map_err(|e| self.cancelled_by_close(e));
        }
    }

    /// The opening of a storage-level query: its transaction, the gate
    /// (when asked for), the confined settings and `max_commit_seq`. With
    /// no gate to read, all of it is one message; with one, the gate is
    /// read between `BEGIN` and the rest, under the session's own
    /// `search_path` (its statements name the storage's tables unqualified).
    #[allow(clippy::too_many_arguments)]
    async fn open_query(
        &self, conn: &mut sqlx::pool::PoolConnection<Postgres>, w: &Where, g: &guard::Guarded,
        partition: &str, gate_running: Option<i64>, confined: &str,
    ) -> (Result<(Option<ServeGate>, i64)>, Left) {
        // Behind a transaction pooler nothing of the session is kept: the
        // views and the bound functions are made inside the transaction
        // (rolled back with it, so no other client's session keeps them),
        // which then turns read-only, and the storage's schema is set for it.
        let pooled_begin;
        let begin = if self.pooled() {
            let loaded = match self.registered_schema() {
                Ok(l) => l,
                Err(e) => return (Err(e), Left::Clean),
            };
            let ddl = guard::view_ddl_for(&w.schema, &loaded.schema.tables, &g.sql);
            pooled_begin = format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; {}{ddl} SET TRANSACTION READ ONLY",
                self.cfg.local_schema
            );
            pooled_begin.as_str()
        } else {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        };
        // The partition counter, read in the snapshot the query reads: the
        // transaction's first statement that needs a snapshot takes it (SET
        // takes none), and every later one reuses it (REPEATABLE READ).
        let Some(p) = lit(partition) else {
            // `confine` refused such a partition already.
            return (
                Err(Error::invalid(
                    "a partition cannot contain U+0000 on PostgreSQL",
                )),
                Left::Clean,
            );
        };
        let counter = format!("{confined}; {}", w.counter_sql(&p));
        let opening = match gate_running {
            None => format!("{begin}; {counter}"),
            Some(_) => begin.to_owned(),
        };
        let opened = match conn.fetch_all(AssertSqlSafe(opening.clone())).await {
            Ok(rows) => rows,
            Err(e) => {
                // A connection that died while idle: once more on a tested one.
                let e = map_err(e);
                // Either way this connection is not used again (a failed
                // opening may have left its transaction open).
                conn.close_on_drop();
                if !crate::postgres::error::is_connection_lost(&e) {
                    return (Err(e), Left::Broken);
                }
                *conn = match self.acquire_tested().await {
                    Ok(c) => c,
                    Err(e) => return (Err(e), Left::Broken),
                };
                match conn.fetch_all(AssertSqlSafe(opening)).await {
                    Ok(rows) => rows,
                    Err(e) => return (Err(map_err(e)), Left::Broken),
                }
            }
        };
        let read = async {
            let c: &mut PgConnection = &mut *conn;
            let (gate, rows) = match gate_running {
                Some(running) => {
                    let gate = meta::read_serve_gate(c, partition, running).await?;
                    let rows = c.fetch_all(AssertSqlSafe(counter)).await.map_err(map_err)?;
                    (Some(gate), rows)
                }
                None => (None, opened),
            };
            Ok((gate, counter_of(&rows)?))
        };
        (read.await, Left::Open)
    }

    /// One run of a storage-level query, and what it left its connection
    /// in ([`Left`]).
    #[allow(clippy::too_many_arguments)]
    async fn query_attempt(
        &self, conn: &mut sqlx::pool::PoolConnection<Postgres>, w: &Where, g: &guard::Guarded,
        prepared: &Prepared, params: &[Value], partition: &str, gate_running: Option<i64>,
        confined: &str,
    ) -> (Result<QueryOutput>, Left) {
        let timeout = self.cfg.query_timeout;
        {
            let slow = Slow::start(
                telemetry::POSTGRES,
                "query",
                Site::Text("queryAuthoritative"),
            )
            .sql(&g.sql);
            let ended = self
                .query_one_message(
                    conn,
                    w,
                    g,
                    &prepared.binds,
                    params,
                    partition,
                    gate_running,
                    confined,
                    run::CONFINED,
                )
                .await;
            drop(slow);
            if let one_message::Ended::Done(out, left) = ended {
                return (out, left);
            }
        }
        let (gate, max_commit_seq) = match self
            .open_query(conn, w, g, partition, gate_running, confined)
            .await
        {
            (Ok(opened), _) => opened,
            (Err(e), left) => return (Err(e), left),
        };
        // Nothing is ever committed: ROLLBACK also undoes any setting the
        // query might have changed.
        let mut abandoned = false;
        let c: &mut PgConnection = &mut *conn;
        let slow = Slow::start(
            telemetry::POSTGRES,
            "query",
            Site::Text("queryAuthoritative"),
        )
        .sql(&g.sql);
        let ran = run(
            c,
            g,
            &prepared.binds,
            params,
            partition,
            timeout,
            self.cfg.result_limits,
            &mut abandoned,
        )
        .await;
        drop(slow);
        // A result abandoned past its bounds is not waited for: closing the
        // connection stops the server at its next row.
        let left = if abandoned { Left::Broken } else { Left::Open };
        let out = match ran {
            Ok((columns, rows)) => Ok(QueryOutput {
                gate,
                error: None,
                columns,
                rows,
                max_commit_seq,
            }),
            // The transaction is aborted now; the gate decides first.
            Err(e) if gate.is_some() => Ok(QueryOutput {
                gate,
                error: Some(e),
                columns: Vec::new(),
                rows: Vec::new(),
                max_commit_seq: 0,
            }),
            Err(e) => Err(e),
        };
        (out, left)
    }

    /// A query cancelled because the storage closed reports the close, not
    /// its time limit.
    fn cancelled_by_close(&self, e: Error) -> Error {
        match &e {
            Error::Plain { code, .. } if *code == query::TIMEOUT && self.is_closed() => {
                Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed")
            }
            _ => e,
        }
    }

    /// `tx.queryAuthoritative`: on the transaction's connection, staged
    /// writes visible, no gate; inside a savepoint that is rolled back, so
    /// the query leaves neither writes nor settings behind, and a failing
    /// query does not abort the transaction.
    ///
    /// A statement that ignores the cancellation (one call that never checks
    /// for it, see `cost`) is given up [`ABANDON_AFTER`] past the limit, as
    /// on the storage-level form, and the transaction with it: its
    /// connection is closed (the server rolls the transaction back once the
    /// call ends and it finds the client gone), so the call answers
    /// `ERR_SYNCULAR_QUERY_TIMEOUT` and the transaction's later calls
    /// `ERR_SYNCULAR_TX_FINISHED`; rolling it back succeeds.
    pub async fn tx_query_authoritative(
        &self, id: u32, req: &Request, params: &[Value], declared: &[String],
    ) -> Result<QueryOutput> {
        let loaded = self.registered_schema()?;
        let timeout = self.cfg.query_timeout;
        with_tx!(self, id, untimed, |_st, c, p| {
            let w = self.query_where(c).await?;
            off_the_calling_thread(req).await;
            let (prepared, g) = self.prepare_query(req, params, declared, w)?;
            // Behind a transaction pooler the views and bound functions are
            // made inside the query's savepoint and go with its rollback:
            // the transaction's commit would leave them on a server session
            // that other clients get next.
            let views = if self.pooled() {
                guard::view_ddl_for(&w.schema, &loaded.schema.tables, &g.sql)
            } else {
                String::new()
            };
            let open = format!("SAVEPOINT {SAVEPOINT}; {views}{}", confine(timeout, &p)?);
            let undo = format!("ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}");
            let give_up = tokio::time::Instant::now() + timeout + ABANDON_AFTER;
            let mut created = false;
            loop {
                c.execute(AssertSqlSafe(open.clone()))
                    .await
                    .map_err(map_err)?;
                let slow = Slow::start(
                    telemetry::POSTGRES,
                    "query",
                    Site::Text("tx.queryAuthoritative"),
                )
                .sql(&g.sql);
                // A result abandoned past its bounds is read to its end by
                // the savepoint's rollback (at most `maxResultRows + 1`
                // rows, within the time limit): the transaction stays usable.
                let mut abandoned = false;
                let running = run(
                    c,
                    &g,
                    &prepared.binds,
                    params,
                    &p,
                    timeout,
                    self.cfg.result_limits,
                    &mut abandoned,
                );
                let out = tokio::time::timeout_at(give_up, running).await;
                drop(slow);
                let Ok(out) = out else {
                    // Still inside one call past the limit: the connection
                    // is given up, and the transaction with it.
                    if let Some(mut gone) = _st.conn.take() {
                        gone.close_on_drop();
                    }
                    break Err(Error::plain(
                        query::TIMEOUT,
                        format!(
                            "registered query exceeded its time limit of {} ms (queryTimeoutMs) inside one call that PostgreSQL does not interrupt; the transaction was rolled back",
                            timeout.as_millis()
                        ),
                    ));
                };
                match out {
                    Ok((columns, rows)) => {
                        // The savepoint ends with the max_commit_seq read.
                        let max_commit_seq = max_commit_seq_then(c, w, &p, &undo).await;
                        if max_commit_seq.is_err() {
                            c.execute(AssertSqlSafe(undo)).await.map_err(map_err)?;
                        }
                        break Ok(QueryOutput {
                            gate: None,
                            error: None,
                            columns,
                            rows,
                            max_commit_seq: max_commit_seq?,
                        });
                    }
                    Err(e) if missing_view(&e) && !created => {
                        // The views belong to the transaction from here:
                        // created after the query's savepoint ends, in one
                        // of their own, so a failure leaves the
                        // transaction as it was.
                        created = true;
                        c.execute(AssertSqlSafe(undo.clone()))
                            .await
                            .map_err(map_err)?;
                        let ddl = guard::view_ddl(&w.schema, &loaded.schema.tables);
                        let made = c
                            .execute(AssertSqlSafe(format!(
                                "SAVEPOINT syncular_views; {ddl} RELEASE SAVEPOINT syncular_views"
                            )))
                            .await;
                        if let Err(e) = made {
                            c.execute(
                                "ROLLBACK TO SAVEPOINT syncular_views; RELEASE SAVEPOINT syncular_views",
                            )
                            .await
                            .map_err(map_err)?;
                            break Err(map_err(e));
                        }
                    }
                    Err(e) => {
                        // A result abandoned past its bounds is read to its
                        // end first, and an error the server sent meanwhile
                        // (its time limit) is reported to this command, not
                        // run: then the rollback is sent once more.
                        let undone = c.execute(AssertSqlSafe(undo.clone())).await;
                        if undone.is_err() && abandoned {
                            c.execute(AssertSqlSafe(undo)).await.map_err(map_err)?;
                        } else {
                            undone.map_err(map_err)?;
                        }
                        break Err(e);
                    }
                }
            }
        })
        .map_err(|e| self.cancelled_by_close(e))
    }
}

/// Text past which the rewrite and the guard run on a runtime worker.
const LONG_QUERY_BYTES: usize = 2048;

/// A call's future is first polled on the JS thread (`napi::completion`),
/// and the rewrite and the guard (parse, checks, print) are plain CPU work
/// that grows with the query's text: a long query's took over 50 ms there
/// (the stress program's generated attacks). Yielding once hands the rest
/// of the call to a runtime worker; a short query stays on the calling
/// thread, where it answers without a hop.
async fn off_the_calling_thread(req: &Request) {
    if req.text_len() > LONG_QUERY_BYTES {
        tokio::task::yield_now().await;
    }
}
