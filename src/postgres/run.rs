//! How a call runs on a connection: `read!` (committed state, retried once
//! on a connection that died while idle), `write_one!` (one idempotent
//! statement, autocommit), `write!` (its own transaction),
//! `snapshot!` (one read-only snapshot), `with_tx!` (transaction `id`'s
//! pinned connection), and `finish`, which commits or rolls back and
//! hands the connection back.

use super::handle::PgEngine;
use super::sql;
use super::stmt::exec;
use crate::core::error::Result;
use sqlx::pool::PoolConnection;
use sqlx::Postgres;

/// Runs `$body` with `$c: &mut PgConnection` on a pool connection
/// (committed state, autocommit). A body that failed because the
/// connection was gone (it died while idle) runs once more on a tested
/// one: reads are safe to repeat. Under transaction pooling the body runs
/// in a transaction of its own (`Config::begin`, then `COMMIT`): between
/// transactions the pooler may move the connection to another session.
macro_rules! read {
    ($self:expr, |$c:ident| $body:expr) => {
        $crate::postgres::run::autocommit!($self, "read", |$c| $body)
    };
}

/// Runs a body of ONE idempotent writing statement in autocommit, as
/// `read!` runs a read: a single statement is atomic on its own, so it
/// needs no `BEGIN` and `COMMIT` of its own (two round trips fewer than
/// `write!`; the in-tree storage sends these statements the same way).
/// Like a read it runs once more on a tested connection when the first was
/// found dead, so the statement must give the same state when repeated
/// (an upsert of given values, a `GREATEST` advance). Behind a transaction
/// pooler it runs in a transaction, as `read!` does.
macro_rules! write_one {
    ($self:expr, |$c:ident| $body:expr) => {
        $crate::postgres::run::autocommit!($self, "write", |$c| $body)
    };
}

/// The body of `read!` and `write_one!`.
macro_rules! autocommit {
    ($self:expr, $kind:expr, |$c:ident| $body:expr) => {{
        let __pooled = $self.pooled();
        $crate::postgres::run::on_live_connection!(
            $self,
            $kind,
            |__conn| {
                if __pooled {
                    $crate::postgres::stmt::exec_text(&mut **__conn, &$self.cfg.begin).await?;
                }
                let $c: &mut sqlx::PgConnection = &mut **__conn;
                $body
            },
            |__conn, __out| {
                if __pooled {
                    $crate::postgres::run::finish($self, __conn, __out).await
                } else {
                    $self.recycle(__conn, __out.is_ok());
                    __out
                }
            }
        )
    }};
}

/// Runs `$attempt` (an async body over `$conn`) on a pool connection and
/// hands connection and result to `$done`. An attempt that failed because
/// the connection had died while idle runs once more on a tested one:
/// nothing of it can have taken effect (no `COMMIT` was sent).
macro_rules! on_live_connection {
    ($self:expr, $kind:expr, |$conn:ident| $attempt:expr, |$dc:ident, $out:ident| $done:expr) => {{
        let mut __conn = $self.acquire().await?;
        let _slow = $crate::postgres::run::slow!($kind);
        let mut __retried = false;
        loop {
            let __out = {
                let $conn = &mut __conn;
                $crate::postgres::run::body(async { $attempt }).await
            };
            match __out {
                Err(ref e) if !__retried && $crate::postgres::error::is_connection_lost(e) => {
                    __retried = true;
                    __conn.close_on_drop();
                    drop(__conn);
                    __conn = $self.acquire_tested().await?;
                }
                $out => {
                    let $dc = __conn;
                    break $done;
                }
            }
        }
    }};
}

/// A `telemetry::Slow` guard naming the line that invoked the outermost
/// macro (slow work warns on `syncular::slow`; a cached check otherwise).
macro_rules! slow {
    ($kind:expr) => {
        $crate::core::telemetry::Slow::start(
            $crate::core::telemetry::POSTGRES,
            $kind,
            $crate::core::telemetry::Site::Text(concat!(file!(), ":", line!())),
        )
    };
}

/// Runs `$body` in its own transaction on a pool connection: committed on
/// `Ok`, rolled back on `Err`. The body runs in an async block, so a `?`
/// inside it ends the body, not the caller: the transaction is always
/// finished before the connection goes back to the pool (it used to return
/// to the pool still inside the failed transaction). A body that failed
/// because the connection was gone runs once more on a tested connection
/// (nothing of it was committed: `COMMIT` had not been sent).
macro_rules! write {
    ($self:expr, |$c:ident| $body:expr) => {{
        $crate::postgres::run::on_live_connection!(
            $self,
            "write",
            |__conn| {
                $crate::postgres::stmt::exec_text(&mut **__conn, &$self.cfg.begin).await?;
                let $c: &mut sqlx::PgConnection = &mut **__conn;
                $body
            },
            |__conn, __out| $crate::postgres::run::finish($self, __conn, __out).await
        )
    }};
}

/// Runs `$body` in one read-only snapshot (REPEATABLE READ READ ONLY) on a
/// pool connection: every statement of the body sees the same committed
/// state.
macro_rules! snapshot {
    ($self:expr, |$c:ident| $body:expr) => {{
        $crate::postgres::run::write!($self, |$c| {
            $crate::postgres::stmt::exec(
                $c,
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY",
            )
            .await?;
            $body
        })
    }};
}

/// Runs `$body` on transaction `$id`'s pinned connection, with `$p` its
/// partition and `$st` the whole state. The transaction is open (`BEGIN`
/// sent) and a deferred push result written before the body runs.
macro_rules! with_tx {
    (@locked $self:expr, $guard:ident, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let $st: &mut $crate::postgres::tx::state::TxState = &mut *$guard;
        $st.ready($self).await?;
        let $p: String = $st.partition.clone();
        let Some(__conn) = $st.conn.as_mut() else {
            return Err($crate::core::error::Error::tx_finished());
        };
        let $c: &mut sqlx::PgConnection = &mut *__conn;
        $body
    }};
    // The body times itself (a registered query names its text).
    ($self:expr, $id:expr, untimed, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let __slot = $self.tx_slot($id)?;
        let mut __guard = __slot.lock().await;
        $crate::postgres::run::with_tx!(@locked $self, __guard, |$st, $c, $p| $body)
    }};
    ($self:expr, $id:expr, |$st:ident, $c:ident, $p:ident| $body:expr) => {{
        let __slot = $self.tx_slot($id)?;
        let mut __guard = __slot.lock().await;
        let _slow = $crate::postgres::run::slow!("tx");
        $crate::postgres::run::with_tx!(@locked $self, __guard, |$st, $c, $p| $body)
    }};
}

pub(crate) use {autocommit, on_live_connection, read, slow, snapshot, with_tx, write, write_one};

/// Awaits a `write!` body; fixes its error type so `?` works inside it.
pub(crate) async fn body<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    f.await
}

/// Commits on `Ok` (a failed COMMIT rolls back and reports), rolls back on
/// `Err`; a connection whose ROLLBACK fails is closed, never pooled, and
/// the ROLLBACK's error rides on the first one as its `rollbackError`
/// (0.30.7). A connection that finished cleanly goes back to the engine's
/// idle list.
pub(crate) async fn finish<T>(
    engine: &PgEngine, mut conn: PoolConnection<Postgres>, out: Result<T>,
) -> Result<T> {
    let failed = match out {
        Ok(v) => match exec(&mut conn, sql::CHECKED_COMMIT).await {
            Ok(()) => {
                engine.recycle(conn, true);
                return Ok(v);
            }
            Err(e) => e,
        },
        Err(e) => e,
    };
    let (out, healthy) = match exec(&mut conn, "ROLLBACK").await {
        Ok(()) => (Err(failed), true),
        Err(rb) => (Err(failed.with_rollback_failure(rb)), false),
    };
    if !healthy {
        conn.close_on_drop();
    }
    engine.recycle(conn, healthy);
    out
}
