//! The commit append, answered without a round trip and sent with the
//! transaction's next statement (storage-layout §8; issue 27).
//!
//! Under the partition lock the next commitSeq is known: the lock batch
//! read the counter row `FOR UPDATE`, and only this transaction can change
//! it before it ends. So `appendCommit` answers `max_commit_seq + 1` at
//! once and keeps the append (`lock_reads::APPEND`, executed with literal
//! arguments) for the next batch: with the push result and `COMMIT` on a
//! host's push (one round trip for all three), or before whatever the
//! transaction sends next (`TxState::ready`).
//!
//! It is deferred only where it cannot fail at the server for a reason the
//! host must see at `appendCommit`:
//! - the lock batch ran the prepared statements (so this connection has
//!   the append prepared too) and read the counter row and the writer fence;
//! - the fence admits this writer (a fenced writer appends at once and gets
//!   `sync.storage.writer_fence_rejected` from `appendCommit`, as before);
//! - it is the transaction's first append, with no push result pending;
//! - every value can be a literal (no NUL), and no change's scopes hold a
//!   `\u0000` escape (which `jsonb` refuses);
//! - the commit is small ([`MAX_TEXT`]): the server parses literal arrays
//!   (payloads in hex) more slowly than bound ones, which at 100 changes
//!   cost more than the round trip saved (Bun and Node 24 both measured
//!   push 100 ops 4-5% slower deferred, 10 ops no worse).
//!
//! What remains: a fence raised by another process after the lock batch
//! and before the batch that carries the append fails that batch with the
//! fence error (at `commit`, or at the next member), and the transaction
//! rolls back, as a push that appended a moment later would have. The
//! statement itself refuses to record any commitSeq but the one answered
//! (`log::APPEND_COMMIT`, `$19`).

use super::lock_reads::{Locked, APPEND};
use crate::core::model::NewCommit;
use crate::postgres::log::AppendArrays;
use crate::postgres::quote::{array, bytea, lit, texts};

/// The largest commit deferred, by the approximate length of its literal
/// arguments.
pub const MAX_TEXT: usize = 16 * 1024;

/// An append answered but not sent: its `EXECUTE` text.
pub struct PendingAppend {
    pub text: String,
}

/// The `EXECUTE` of the prepared append for `commit`, recording it as
/// `expect`; `None` where it cannot be deferred (see the module comment).
pub fn defer(
    locked: Option<Locked>, partition: &str, commit: &NewCommit, writer_version: i64,
) -> Option<(i64, PendingAppend)> {
    let locked = locked?;
    if locked
        .fence
        .is_some_and(|required| writer_version < required)
    {
        return None;
    }
    if commit
        .changes
        .iter()
        .any(|ch| ch.scopes_json.contains("\\u0000"))
    {
        return None;
    }
    let approx: usize = commit
        .changes
        .iter()
        .map(|ch| {
            ch.payload.as_ref().map_or(0, |p| p.len() * 2)
                + ch.scopes_json.len() * 2
                + ch.row_id.len()
                + ch.table.len()
                + 48
        })
        .sum();
    if approx > MAX_TEXT {
        return None;
    }
    let expect = locked.max_commit_seq.checked_add(1)?;
    let a = AppendArrays::of(commit).ok()?;
    let args = [
        lit(partition)?,
        lit(&commit.client_id)?,
        lit(&commit.client_commit_id)?,
        lit(&commit.actor_id)?,
        commit.created_at_ms.to_string(),
        writer_version.to_string(),
        array("int4", a.idx.iter().map(|v| Some(v.to_string())))?,
        texts(&a.tbl)?,
        texts(&a.row_id)?,
        array("int2", a.op.iter().map(|v| Some(v.to_string())))?,
        array("int8", a.row_version.iter().map(|v| Some(int_or_null(*v))))?,
        texts(&a.scopes)?,
        array("bytea", a.payload.iter().map(|p| Some(bytea(*p))))?,
        texts(&a.s_tbl)?,
        texts(&a.s_var)?,
        texts(&a.s_val)?,
        texts(&a.t_tbl)?,
        texts(&a.t_row)?,
        expect.to_string(),
    ];
    Some((
        expect,
        PendingAppend {
            text: format!("EXECUTE {APPEND}({})", args.join(", ")),
        },
    ))
}

fn int_or_null(v: Option<i64>) -> String {
    v.map_or_else(|| "NULL".to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{Change, ChangeOp};

    fn commit(scopes: &str) -> NewCommit {
        NewCommit {
            client_id: "c'1".into(),
            client_commit_id: "k\\1".into(),
            actor_id: "a".into(),
            created_at_ms: 7,
            changes: vec![Change {
                table: "tasks".into(),
                row_id: "r1".into(),
                op: ChangeOp::Upsert,
                payload: Some(vec![0, 255, 10]),
                row_version: Some(3),
                scopes_json: scopes.into(),
            }],
        }
    }

    const AT: Option<Locked> = Some(Locked {
        max_commit_seq: 41,
        fence: None,
    });

    #[test]
    fn writes_every_argument_as_a_literal() {
        let (seq, p) = defer(AT, "p", &commit(r#"{"project_id":"x"}"#), 1).unwrap();
        assert_eq!(seq, 42);
        assert!(p.text.starts_with("EXECUTE syncular_append_commit_v1(E'p', E'c''1', E'k\\\\1', E'a', 7, 1, ARRAY[0]::pg_catalog.int4[]"), "{}", p.text);
        assert!(
            p.text.contains("ARRAY[E'\\\\x00ff0a']::pg_catalog.bytea[]"),
            "{}",
            p.text
        );
        assert!(p.text.contains("ARRAY[E'project_id']::pg_catalog.text[], ARRAY[E'x']::pg_catalog.text[], '{}'::pg_catalog.text[], '{}'::pg_catalog.text[], 42)"), "{}", p.text);
    }

    #[test]
    fn does_not_defer_what_could_fail_later() {
        let c = commit(r#"{"project_id":"x"}"#);
        assert!(
            defer(None, "p", &c, 1).is_none(),
            "nothing read under the lock"
        );
        let fenced = Some(Locked {
            max_commit_seq: 1,
            fence: Some(2),
        });
        assert!(defer(fenced, "p", &c, 1).is_none(), "below the fence");
        assert!(defer(fenced, "p", &c, 2).is_some(), "at the fence");
        assert!(defer(AT, "p\0", &c, 1).is_none(), "a NUL");
        assert!(
            defer(AT, "p", &commit(r#"{"project_id":"\u0000"}"#), 1).is_none(),
            "a \\u0000 escape"
        );
        let top = Some(Locked {
            max_commit_seq: i64::MAX,
            fence: None,
        });
        assert!(defer(top, "p", &c, 1).is_none(), "no next commitSeq");
        let mut big = commit(r#"{"project_id":"x"}"#);
        big.changes[0].payload = Some(vec![7; MAX_TEXT / 2]);
        assert!(defer(AT, "p", &big, 1).is_none(), "a large commit");
    }
}
