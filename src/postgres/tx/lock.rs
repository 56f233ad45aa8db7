//! The partition lock (`lockPartitionForPush`): `BEGIN` when not yet sent,
//! the counter row's lock, the push savepoint and the reads the host asks
//! for next (`lock_reads`) in one round trip, prepared by name where the
//! connection keeps its statements.

use super::lock_reads;
use super::state::TxState;
use crate::core::error::{Error, Result};
use crate::postgres::error::{is_connection_lost, map_err};
use crate::postgres::handle::PgEngine;
use crate::postgres::quote::lit;
use crate::postgres::stmt::exec;
use crate::postgres::{log, sql};
use sqlx::{AssertSqlSafe, Column, Row};

impl TxState {
    /// The partition lock, counted in `stats()` (`lockWaits`).
    pub(super) async fn lock_partition(&mut self, engine: &PgEngine) -> Result<()> {
        let started = std::time::Instant::now();
        let out = self.take_partition_lock(engine).await;
        engine.lock_waits.record(started.elapsed());
        out
    }

    /// `BEGIN` (when not yet sent), the counter row lock and the savepoint
    /// in one round trip; only a missing counter row costs more.
    async fn take_partition_lock(&mut self, engine: &PgEngine) -> Result<()> {
        let partition = self.partition.clone();
        let first = !self.begun;
        let begin = if first {
            format!("{}; ", engine.cfg.begin)
        } else {
            String::new()
        };
        // Behind a transaction pooler no statement is prepared by name: the
        // next transaction may run on another server session.
        let may_prepare = first && !engine.pooled();
        match (lit(&partition), self.pending_put.is_none()) {
            (Some(p), true) => {
                self.begun = true;
                // The prepared reads only in a batch that begins the
                // transaction: on a connection without the statement, that
                // batch fails before anything of the transaction is done,
                // and is sent again whole after a rollback.
                let batch = |prepared: bool| {
                    let (tail, asked) =
                        lock_reads::batch_tail(&engine.push_keys, &partition, prepared)
                            .unwrap_or_default();
                    let lock = if prepared {
                        format!("EXECUTE {}({p})", lock_reads::LOCK)
                    } else {
                        lock_reads::select_lock(&p)
                    };
                    let text = format!("{begin}{lock}; {}; {tail}", sql::SAVEPOINT);
                    (text, asked)
                };
                let (mut text, mut asked) = batch(may_prepare);
                let mut prepared = may_prepare;
                let waited = crate::core::telemetry::lock_wait_started();
                let mut found = sqlx::raw_sql(AssertSqlSafe(text.clone()))
                    .fetch_all(self.conn()?)
                    .await
                    .map_err(map_err);
                if let (true, Err(e)) = (first, &found) {
                    if is_connection_lost(e) {
                        let e = found.err().unwrap_or_else(Error::tx_finished);
                        self.reconnect(engine, e).await?;
                        found = sqlx::raw_sql(AssertSqlSafe(text.clone()))
                            .fetch_all(self.conn()?)
                            .await
                            .map_err(map_err);
                    }
                }
                if let (true, Err(e)) = (may_prepare, &found) {
                    if matches!(e.primary(), Error::Engine { code, .. } if code == "26000") {
                        // No prepared statement on this connection (its
                        // tables came after it connected, or a proxy moved
                        // the session): prepare it for the next batch, and
                        // send this one whole.
                        let again = format!("ROLLBACK; {}", lock_reads::prepare());
                        sqlx::raw_sql(AssertSqlSafe(again))
                            .execute(self.conn()?)
                            .await
                            .map_err(map_err)?;
                        (text, asked) = batch(false);
                        prepared = false;
                        found = sqlx::raw_sql(AssertSqlSafe(text))
                            .fetch_all(self.conn()?)
                            .await
                            .map_err(map_err);
                    }
                }
                crate::core::telemetry::lock_waited(
                    waited,
                    crate::core::telemetry::POSTGRES,
                    Some(&partition),
                );
                let found = found?;
                self.prepared = prepared;
                if prepared {
                    self.upserts = lock_reads::prepared_upserts(&found);
                }
                let locked = found.iter().any(|r| {
                    r.columns()
                        .first()
                        .is_some_and(|c| c.name() == "max_commit_seq")
                });
                if locked {
                    self.locked = if prepared {
                        lock_reads::locked(&found)
                    } else {
                        None
                    };
                    self.after_lock = lock_reads::read(&found, asked);
                } else {
                    // The row did not exist: lock it outside the savepoint.
                    let c = self.conn()?;
                    exec(c, sql::RELEASE_SAVEPOINT).await?;
                    log::lock_partition(c, &partition).await?;
                    exec(c, sql::SAVEPOINT).await?;
                }
            }
            _ => {
                self.ready(engine).await?;
                let c = self.conn()?;
                log::lock_partition(c, &partition).await?;
                exec(c, sql::SAVEPOINT).await?;
            }
        }
        self.savepoint = true;
        Ok(())
    }
}
