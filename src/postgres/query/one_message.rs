//! The storage-level registered query in one message, where it can be:
//! its transaction, the serve gate (when the host evaluates one), the
//! confined settings, `max_commit_seq`, the query and the `ROLLBACK`, sent
//! as one simple-protocol batch, so the caller waits for one round trip
//! instead of two (the opening, then the query; four with the gate).
//!
//! The query runs as `EXECUTE` of an SQL-level statement this storage
//! prepared on the session by name (`PREPARE`, in the same batch, after the
//! confined settings, the first time a session meets it; PostgreSQL keeps a
//! prepared statement when the transaction that made it rolls back), with
//! its values written as literals of the types the statement declares.
//! Nothing else changes:
//!
//! - the text prepared is the guard's, wrapped in the result bounds, as on
//!   the other path; the guard printed it from one parsed statement, so the
//!   batch holds exactly the statements written here. A simple-protocol
//!   message is tokenized whole before its `SET LOCAL`s run, so the text
//!   must read the same whatever the session's `standard_conforming_strings`:
//!   the guard's printer writes a string holding a backslash as `E'…'`, this
//!   module's literals are `E'…'` too, and every session of a storage that
//!   names statements sets the setting on when it connects
//!   (`conn::CONFORMING`) besides;
//! - it is prepared, and so parsed and analyzed, under the confined
//!   `search_path` (and a prepared statement keeps the path it was
//!   analyzed under);
//! - REPEATABLE READ READ ONLY; the gate, else `max_commit_seq`, read
//!   first, so it takes the snapshot the query reads;
//! - rows come as text; `cells::cell` reads every type it returns in either
//!   format.
//!
//! Not used behind a transaction pooler (no statement is prepared by name
//! there), for a value that cannot be written as a literal (a NUL in text, a subnormal
//! double), past `run::MAX_NAMED` distinct texts per storage, or while a
//! test has armed a fault for the rollback the other path runs after its
//! answer.

use super::guard::Guarded;
use super::run::{counter_of, run_err, statement, Left, Reader, Where};
#[cfg(test)]
use super::run::{Named, MAX_NAMED};
use crate::core::error::{Error, Result};
use crate::core::model::QueryOutput;
use crate::core::model::ServeGate;
use crate::core::query::{Bind, Value};
use crate::postgres::error::is_connection_lost;
use crate::postgres::handle::PgEngine;
use crate::postgres::meta::{serve_gate_of, serve_gate_sql};
use crate::postgres::quote::{bytea, lit};
use crate::postgres::tx::lock_reads::{self, GATE};
use sqlx::postgres::PgRow;
use sqlx::postgres::Postgres;
use sqlx::{AssertSqlSafe, Either};

/// A slot's declared type and its value as a literal of it (`None`: the
/// value cannot be one).
fn argument(v: &Value) -> Option<(&'static str, String)> {
    Some(match v {
        // Its type is inferred from where it is used, as an untyped
        // parameter's is.
        Value::Null | Value::Undefined => ("unknown", "NULL".to_owned()),
        Value::Integer(i) => ("pg_catalog.int8", format!("'{i}'")),
        Value::Real(f) => {
            let text = if f.is_nan() {
                "NaN".to_owned()
            } else if f.is_infinite() {
                if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
            } else if *f != 0.0 && f.abs() < f64::MIN_POSITIVE {
                // Some servers refuse subnormal input; bound, it passes.
                return None;
            } else {
                // Rust's shortest text that reads back as the same double.
                format!("{f:?}")
            };
            ("pg_catalog.float8", format!("'{text}'"))
        }
        Value::Text(s) => ("pg_catalog.text", lit(s)?),
        Value::Blob(b) => ("pg_catalog.bytea", bytea(Some(b))),
    })
}

/// What the batch needs beyond the opening: the statement's name, its
/// `PREPARE` and its `EXECUTE`.
struct Batch {
    name: String,
    prepare: String,
    execute: String,
}

fn batch(id: u32, sql: &str, values: &[Value]) -> Option<Batch> {
    let name = format!("syncular_rq_{id}");
    let mut types = Vec::with_capacity(values.len());
    let mut args = Vec::with_capacity(values.len());
    for v in values {
        let (ty, arg) = argument(v)?;
        types.push(ty);
        args.push(arg);
    }
    let (prepare, execute) = if values.is_empty() {
        (
            format!("PREPARE {name} AS {sql}"),
            format!("EXECUTE {name}"),
        )
    } else {
        (
            format!("PREPARE {name}({}) AS {sql}", types.join(", ")),
            format!("EXECUTE {name}({})", args.join(", ")),
        )
    };
    Some(Batch {
        name,
        prepare,
        execute,
    })
}

/// How a one-message attempt ended.
pub(super) enum Ended {
    /// Answered, or failed; the connection is in `Left`.
    Done(Result<QueryOutput>, Left),
    /// Not tried: take the two-message path.
    NotHere,
}

impl PgEngine {
    /// One storage-level attempt in one message (see the module's
    /// comment); `confined` is `run::confine`'s text and `statements` how
    /// many statements it holds. With `gate_running`, the serve gate is
    /// read right after `BEGIN` (the lock batch's prepared statement, or on
    /// a session without it the gate's reads written out, under the
    /// session's own `search_path`: they name the storage's tables
    /// unqualified), and takes the snapshot the counter and the query read.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn query_one_message(
        &self, conn: &mut sqlx::pool::PoolConnection<Postgres>, w: &Where, g: &Guarded,
        binds: &[Bind], params: &[Value], partition: &str, gate_running: Option<i64>,
        confined: &str, statements: usize,
    ) -> Ended {
        let limits = self.cfg.result_limits;
        let timeout = self.cfg.query_timeout;
        if self.pooled() || !crate::postgres::stmt::named() || self.trailing_fault_armed() {
            return Ended::NotHere;
        }
        let (sql, values) = match statement(g, binds, params, partition, limits) {
            Ok(s) => s,
            Err(e) => return Ended::Done(Err(e), Left::Clean),
        };
        let (Some(p), Some(id)) = (lit(partition), self.query.named.id(&sql)) else {
            return Ended::NotHere;
        };
        let Some(b) = batch(id, &sql, &values) else {
            return Ended::NotHere;
        };
        // BEGIN, the gate, the confined settings, the counter: then the
        // query's statements, then ROLLBACK. The gate is the lock batch's
        // statement, which every session prepares when it connects (planned
        // once); a session without it reads the gate written out.
        let gate_at = 1;
        let counter_at = 1 + usize::from(gate_running.is_some()) + statements;
        let mut gate_prepared = true;
        let mut prepared_here = false;
        let mut retried = false;
        loop {
            let gate_read = match gate_running {
                Some(_) if gate_prepared => format!("EXECUTE {GATE}({p}); "),
                Some(running) => format!("{}; ", serve_gate_sql(&p, running)),
                None => String::new(),
            };
            let opening = format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {gate_read}{confined}; {}",
                w.counter_sql(&p)
            );
            let read_gate = |rows: &[PgRow]| -> Result<ServeGate> {
                let running = gate_running.unwrap_or(0);
                if gate_prepared {
                    lock_reads::read(rows, Vec::new())
                        .and_then(|mut a| a.take_gate(running))
                        .ok_or_else(|| {
                            Error::plain(
                                "ERR_SYNCULAR_INTERNAL",
                                "registered query: the serve gate's rows could not be read",
                            )
                        })
                } else {
                    serve_gate_of(rows)
                }
            };
            let text = if prepared_here {
                format!("{opening}; {}; {}; ROLLBACK", b.prepare, b.execute)
            } else {
                format!("{opening}; {}; ROLLBACK", b.execute)
            };
            let execute_at = counter_at + 1 + usize::from(prepared_here);
            let mut at = 0usize;
            let mut counter = Ok(0);
            let mut gate_rows = Vec::new();
            let mut reader = Reader::new(timeout, limits);
            let mut abandoned = false;
            let failed = {
                let mut stream = sqlx::raw_sql(AssertSqlSafe(text)).fetch_many(&mut **conn);
                loop {
                    let next = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await;
                    match next {
                        None => break None,
                        Some(Ok(Either::Left(_))) => at += 1,
                        Some(Ok(Either::Right(row))) if gate_running.is_some() && at == gate_at => {
                            gate_rows.push(row);
                        }
                        Some(Ok(Either::Right(row))) if at == counter_at => {
                            counter = counter_of(std::slice::from_ref(&row));
                        }
                        Some(Ok(Either::Right(row))) if at == execute_at => {
                            if let Err(e) = reader.row(&row, &mut abandoned) {
                                break Some(e);
                            }
                        }
                        Some(Ok(Either::Right(_))) => {
                            break Some(Error::plain(
                                "ERR_SYNCULAR_INTERNAL",
                                format!("registered query: rows from statement {at} of its batch"),
                            ))
                        }
                        Some(Err(e)) => break Some(run_err(e, timeout, limits)),
                    }
                }
            };
            // A failure of the query's own statements, with the gate read:
            // the gate decides first (the transaction is aborted now).
            let gated = |e: Error| match gate_running {
                Some(_) if at > counter_at => match read_gate(&gate_rows) {
                    Ok(gate) => Ok(QueryOutput {
                        gate: Some(gate),
                        error: Some(e),
                        columns: Vec::new(),
                        rows: Vec::new(),
                        max_commit_seq: 0,
                    }),
                    Err(ge) => Err(ge),
                },
                _ => Err(e),
            };
            match failed {
                Some(e) if abandoned => return Ended::Done(gated(e), Left::Broken),
                // Nothing reached the server: a connection that died while
                // idle. Once more on a tested one.
                Some(e) if at == 0 && !retried && is_connection_lost(&e) => {
                    retried = true;
                    conn.close_on_drop();
                    *conn = match self.acquire_tested().await {
                        Ok(c) => c,
                        Err(e) => return Ended::Done(Err(e), Left::Broken),
                    };
                }
                Some(e) if is_connection_lost(&e) => return Ended::Done(Err(e), Left::Broken),
                Some(e) if gate_prepared && at == gate_at && unprepared(&e, GATE) => {
                    // A session made before the storage's tables: rolled
                    // back, then the gate written out.
                    if crate::postgres::stmt::exec(conn, "ROLLBACK").await.is_err() {
                        return Ended::Done(Err(e), Left::Broken);
                    }
                    gate_prepared = false;
                }
                Some(e) if !prepared_here && at == execute_at && unprepared(&e, &b.name) => {
                    // The session has not prepared it yet: its transaction is
                    // aborted; rolled back, then sent with the PREPARE.
                    if crate::postgres::stmt::exec(conn, "ROLLBACK").await.is_err() {
                        return Ended::Done(Err(e), Left::Broken);
                    }
                    prepared_here = true;
                }
                // Aborted inside the transaction: the caller rolls it back.
                Some(e) => return Ended::Done(gated(e), Left::Open),
                None => {
                    let (columns, rows) = reader.done();
                    let gate = match gate_running {
                        Some(_) => match read_gate(&gate_rows) {
                            Ok(gate) => Some(gate),
                            Err(e) => return Ended::Done(Err(e), Left::Clean),
                        },
                        None => None,
                    };
                    let out = counter.map(|max_commit_seq| QueryOutput {
                        gate,
                        error: None,
                        columns,
                        rows,
                        max_commit_seq,
                    });
                    // Every statement ran, ROLLBACK last.
                    let left = if at == execute_at + 2 {
                        Left::Clean
                    } else {
                        Left::Broken
                    };
                    return Ended::Done(out, left);
                }
            }
        }
    }
}

/// Whether `e` says the session has no statement named `name`.
fn unprepared(e: &Error, name: &str) -> bool {
    matches!(e.primary(), Error::Engine { code, message } if code == "26000" && message.contains(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_read_back_as_the_values_bound() {
        assert_eq!(
            argument(&Value::Integer(-9_223_372_036_854_775_808))
                .unwrap()
                .1,
            "'-9223372036854775808'"
        );
        assert_eq!(argument(&Value::Real(0.1)).unwrap().1, "'0.1'");
        assert_eq!(argument(&Value::Real(1e300)).unwrap().1, "'1e300'");
        assert_eq!(argument(&Value::Real(-0.0)).unwrap().1, "'-0.0'");
        assert_eq!(
            argument(&Value::Real(f64::NEG_INFINITY)).unwrap().1,
            "'-Infinity'"
        );
        assert_eq!(argument(&Value::Real(f64::NAN)).unwrap().1, "'NaN'");
        assert!(argument(&Value::Real(5e-324)).is_none());
        assert_eq!(
            argument(&Value::Text("it's \\".into())).unwrap().1,
            "E'it''s \\\\'"
        );
        assert!(argument(&Value::Text("a\0b".into())).is_none());
        assert_eq!(
            argument(&Value::Blob(vec![0, 255])).unwrap().1,
            "E'\\\\x00ff'"
        );
        assert_eq!(
            argument(&Value::Null).unwrap(),
            ("unknown", "NULL".to_owned())
        );
    }

    #[test]
    fn names_are_per_text_and_bounded() {
        let named = Named::default();
        assert_eq!(named.id("a"), Some(0));
        assert_eq!(named.id("b"), Some(1));
        assert_eq!(named.id("a"), Some(0));
        for i in 2..MAX_NAMED {
            assert!(named.id(&i.to_string()).is_some());
        }
        assert_eq!(named.id("one more"), None);
        assert_eq!(named.id("b"), Some(1));
    }

    #[test]
    fn the_gate_written_out_names_the_partition_and_version_once() {
        let sql = serve_gate_sql("E'p$2'", 7);
        assert!(sql.contains("WHERE partition = E'p$2')"), "{sql}");
        assert!(sql.contains("WHERE schema_version = 7 AND"), "{sql}");
        assert!(!sql.contains("$1"), "{sql}");
        assert_eq!(
            serve_gate_sql("E'p'", i64::MAX)
                .matches("2147483647")
                .count(),
            1
        );
    }

    #[test]
    fn a_statement_without_values_has_no_lists() {
        let b = batch(3, "SELECT 1", &[]).unwrap();
        assert_eq!(b.prepare, "PREPARE syncular_rq_3 AS SELECT 1");
        assert_eq!(b.execute, "EXECUTE syncular_rq_3");
        let b = batch(4, "SELECT $1, $2", &[Value::Integer(1), Value::Null]).unwrap();
        assert_eq!(
            b.prepare,
            "PREPARE syncular_rq_4(pg_catalog.int8, unknown) AS SELECT $1, $2"
        );
        assert_eq!(b.execute, "EXECUTE syncular_rq_4('1', NULL)");
    }
}
