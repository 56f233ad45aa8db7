//! The transaction's pending batch goes out: before its next statement
//! (`TxState::ready`, which also sends the deferred `BEGIN`), or with
//! `COMMIT` when the transaction ends (`PgEngine::unlock`), the deferred
//! upserts, append and push result in the same round trip.

use super::put::{put_text, PendingPut};
use super::state::TxState;
use super::upsert;
use crate::core::error::{Error, Result};
use crate::core::telemetry::{self, Site, Slow};
use crate::postgres::error::{is_connection_lost, map_err};
use crate::postgres::handle::PgEngine;
use crate::postgres::run::finish;
use crate::postgres::stmt::exec_text;
use crate::postgres::{meta, sql};
use sqlx::{AssertSqlSafe, PgConnection};

/// The deferred writes (`TxState::take_batch`) and insert (either may be
/// absent) and `COMMIT` in one round trip. `Ok(false)`: the insert went out
/// alone (a value could not be a literal), after the writes; the caller
/// still has to commit.
pub async fn put_and_commit(
    c: &mut PgConnection, partition: &str, head: Option<&str>, put: Option<&PendingPut>,
    prepared: bool,
) -> Result<bool> {
    let mut text = head.map_or_else(String::new, |h| format!("{h}; "));
    match put.map(|p| (p, put_text(partition, p, prepared))) {
        None => text.push_str(sql::CHECKED_COMMIT),
        Some((_, Some(insert))) => {
            text.push_str(&insert);
            text.push_str("; COMMIT");
        }
        Some((put, None)) => {
            if let Some(h) = head {
                send(c, h).await?;
            }
            meta::put_push_result(c, partition, &put.client_id, &put.commit_id, &put.json).await?;
            return Ok(false);
        }
    }
    sqlx::raw_sql(AssertSqlSafe(text))
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(true)
}

/// Deferred writes, sent without `COMMIT`.
async fn send(c: &mut PgConnection, text: &str) -> Result<()> {
    sqlx::raw_sql(AssertSqlSafe(text.to_owned()))
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(())
}

impl TxState {
    /// Opens the transaction when nothing has been sent yet, and writes a
    /// deferred append and push result, so the next statement sees them.
    pub async fn ready(&mut self, engine: &PgEngine) -> Result<()> {
        self.after_lock = None;
        if !self.begun {
            self.begun = true;
            let begin = &engine.cfg.begin;
            if let Err(e) = exec_text(self.conn()?, begin).await {
                self.reconnect(engine, e).await?;
                exec_text(self.conn()?, begin).await?;
            }
        }
        let rows = !self.pending_rows.is_empty();
        if let Some(batch) = self.take_batch() {
            if let Err(e) = send(self.conn()?, &batch).await {
                if rows {
                    upsert::refused(&engine.loaded().sql, &e);
                }
                return Err(e);
            }
        }
        if let Some(put) = self.pending_put.take() {
            let partition = self.partition.clone();
            meta::put_push_result(
                self.conn()?,
                &partition,
                &put.client_id,
                &put.commit_id,
                &put.json,
            )
            .await?;
        }
        Ok(())
    }

    /// After the transaction's first statement failed with `e`: when the
    /// connection was gone (it died while idle; nothing of the transaction
    /// had reached the server), pins a tested one instead, so the caller
    /// sends again; any other error is returned.
    pub(super) async fn reconnect(&mut self, engine: &PgEngine, e: Error) -> Result<()> {
        if !is_connection_lost(&e) {
            return Err(e);
        }
        if let Some(mut dead) = self.conn.take() {
            dead.close_on_drop();
        }
        self.conn = Some(engine.acquire_tested().await?);
        Ok(())
    }
}

impl PgEngine {
    /// Ends transaction `id`. Rolling back one that is gone is a no-op;
    /// committing one is an error.
    pub async fn unlock(&self, id: u32, commit: bool) -> Result<()> {
        let slot = self.take_tx(id);
        let Some(slot) = slot else {
            return if commit {
                Err(Error::tx_finished())
            } else {
                Ok(())
            };
        };
        let mut st = slot.lock().await;
        let pending = st.pending_put.take();
        let rows = !st.pending_rows.is_empty();
        let head = st.take_batch();
        let begun = st.begun;
        let Some(mut conn) = st.conn.take() else {
            return if commit {
                Err(Error::tx_finished())
            } else {
                Ok(())
            };
        };
        if !begun {
            // Nothing was sent: the connection goes back as is.
            self.recycle(conn, true);
            return Ok(());
        }
        if commit {
            let _slow =
                Slow::start(telemetry::POSTGRES, "commit", Site::Text("commit")).sql("COMMIT");
            if head.is_some() || pending.is_some() {
                // The deferred upserts, append, push result and COMMIT in
                // one round trip.
                let out = put_and_commit(
                    &mut conn,
                    &st.partition,
                    head.as_deref(),
                    pending.as_ref(),
                    st.prepared,
                )
                .await;
                return match out {
                    Ok(true) => {
                        self.recycle(conn, true);
                        Ok(())
                    }
                    Ok(false) => finish(self, conn, Ok(())).await,
                    Err(e) => {
                        if rows {
                            upsert::refused(&self.loaded().sql, &e);
                        }
                        finish::<()>(self, conn, Err(e)).await
                    }
                };
            }
            finish(self, conn, Ok(())).await
        } else {
            finish::<()>(self, conn, Err(Error::tx_finished()))
                .await
                .or(Ok(()))
        }
    }
}
