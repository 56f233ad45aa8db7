//! RFC 0007 checkpoint lifecycle beyond declaration (storage-layout §14.3–
//! §14.5): claim, owner-epoch compare-and-set advance, source coverage,
//! the source-change check and activation. Declaration, the serve gate and
//! the fence reads live in `meta.rs`.

use super::conn::map_err;
use super::kept::Conn;
use super::log;
use super::meta;
use super::storage::SqliteEngine;
use crate::core::error::{Error, Result};
use crate::core::model::{Checkpoint, CheckpointProgress};
use crate::core::model::{CheckpointDeclaration, ServeGate};
use crate::seam::{Call, Checkpoints};
use rusqlite::{params, Connection, OptionalExtension};
use std::sync::Arc;

pub use crate::core::checkpoint::{Activation, SourceState};

const CLAIM: &str = "UPDATE sync_backfill_checkpoints
   SET owner_epoch = owner_epoch + 1,
       state = CASE WHEN state = 'declared' THEN 'backfilling' ELSE state END,
       schema_version = ?3,
       updated_at_ms = ?4
 WHERE partition = ?1 AND name = ?2 AND state <> 'activated'
 RETURNING partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms";

const ADVANCE: &str = "UPDATE sync_backfill_checkpoints
   SET watermark = ?4, observed_rows = ?5, updated_at_ms = ?6
 WHERE partition = ?1 AND name = ?2 AND owner_epoch = ?3";

const FENCE_AND_VERSION: &str = "SELECT
   (SELECT required_writer_version FROM sync_writer_fence WHERE partition = ?1),
   (SELECT schema_version FROM sync_backfill_checkpoints WHERE partition = ?1 AND name = ?2)";

const ACTIVATE: &str = "UPDATE sync_backfill_checkpoints
   SET state = 'activated', watermark = ?4, updated_at_ms = ?5
 WHERE partition = ?1 AND name = ?2 AND owner_epoch = ?3 AND state <> 'activated'";

/// Newest retained change of one table (backward scan of the
/// `(partition, commit_seq, tbl, idx)` index, stops at the first hit).
const TABLE_MAX_SEQ: &str = "SELECT commit_seq FROM sync_changes
 WHERE partition = ?1 AND tbl = ?2 ORDER BY commit_seq DESC LIMIT 1";

/// Any retained change of one table above a seq (range scan above it).
const TABLE_CHANGED_ABOVE: &str = "SELECT EXISTS (SELECT 1 FROM sync_changes
 WHERE partition = ?1 AND commit_seq > ?3 AND tbl = ?2)";

/// Owner-epoch increment, `declared` → `backfilling`; absent or activated
/// rows → `sync.storage.checkpoint_not_declared`.
pub fn claim(
    conn: &Connection, partition: &str, name: &str, schema_version: i64, now_ms: i64,
) -> Result<Checkpoint> {
    conn.prepare_cached(CLAIM)
        .and_then(|mut st| {
            st.query_row(
                params![partition, name, schema_version, now_ms],
                super::meta::checkpoint_from,
            )
            .optional()
        })
        .map_err(map_err)?
        .ok_or_else(|| Error::query("sync.storage.checkpoint_not_declared"))
}

/// Compare-and-set on the owner epoch; `true` iff exactly one row changed.
/// No state filter (storage-layout §14.4).
pub fn advance(
    conn: &Connection, partition: &str, name: &str, g: &CheckpointProgress,
) -> Result<bool> {
    let changed = conn
        .prepare_cached(ADVANCE)
        .and_then(|mut st| {
            st.execute(params![
                partition,
                name,
                g.owner_epoch,
                g.watermark,
                g.observed_rows,
                g.now_ms
            ])
        })
        .map_err(map_err)?;
    Ok(changed == 1)
}

/// Highest commitSeq of a retained change to one of `tables`; 0 when none.
pub fn source_coverage_seq(conn: &Connection, partition: &str, tables: &[String]) -> Result<i64> {
    let mut st = conn.prepare_cached(TABLE_MAX_SEQ).map_err(map_err)?;
    let mut max = 0;
    for t in tables {
        let seq: Option<i64> = st
            .query_row(params![partition, t], |r| r.get(0))
            .optional()
            .map_err(map_err)?;
        max = max.max(seq.unwrap_or(0));
    }
    Ok(max)
}

/// Reads the horizon first, then the changes: a window the horizon has
/// passed is never reported clean.
pub fn has_source_changes_above(
    conn: &Conn, partition: &str, tables: &[String], seq: i64,
) -> Result<SourceState> {
    let horizon = log::horizon_seq(conn, partition)?;
    if tables.is_empty() {
        return Ok(SourceState::Clean);
    }
    let mut st = conn.prepare_cached(TABLE_CHANGED_ABOVE).map_err(map_err)?;
    for t in tables {
        let changed: bool = st
            .query_row(params![partition, t, seq], |r| r.get(0))
            .map_err(map_err)?;
        if changed {
            return Ok(SourceState::Changed);
        }
    }
    Ok(SourceState::decide(false, horizon, seq))
}

/// Activation under the write lock the caller holds (storage-layout §14.5).
/// Nothing is written unless the result is `Activated`.
pub fn activate(
    conn: &Conn, partition: &str, name: &str, owner_epoch: i64, watermark: i64, sources: &[String],
    now_ms: i64,
) -> Result<Activation> {
    let (required, version): (Option<i64>, Option<i64>) = conn
        .prepare_cached(FENCE_AND_VERSION)
        .and_then(|mut st| st.query_row(params![partition, name], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(map_err)?;
    if !crate::core::checkpoint::fence_covers(required, version) {
        return Err(Error::query("sync.storage.checkpoint_fence_missing"));
    }
    let sources_state = has_source_changes_above(conn, partition, sources, watermark)?;
    if let Some(refused) = Activation::refused_by(sources_state) {
        return Ok(refused);
    }
    let changed = conn
        .prepare_cached(ACTIVATE)
        .and_then(|mut st| st.execute(params![partition, name, owner_epoch, watermark, now_ms]))
        .map_err(map_err)?;
    Ok(Activation::from_changed(changed as u64))
}

impl SqliteEngine {
    #[allow(clippy::too_many_arguments)]
    pub fn activate_checkpoint(
        &self, id: u32, partition: &str, name: &str, owner_epoch: i64, watermark: i64,
        sources: &[String], now_ms: i64,
    ) -> Result<Activation> {
        self.with_lease(id, |h| {
            activate(
                h.conn,
                partition,
                name,
                owner_epoch,
                watermark,
                sources,
                now_ms,
            )
        })
    }
}

impl Checkpoints for Arc<SqliteEngine> {
    fn read_serve_gate(&self, partition: String, running: i64) -> Call<ServeGate> {
        self.read(|c| meta::read_serve_gate(c, &partition, running))
            .into()
    }

    fn read_checkpoints(&self, partition: String) -> Call<Vec<Checkpoint>> {
        self.read(|c| meta::read_checkpoints(c, &partition)).into()
    }

    fn writer_fence_allows(&self, partition: String, version: i64) -> Call<bool> {
        self.read(|c| meta::writer_fence_allows(c, &partition, version))
            .into()
    }

    fn declare_checkpoint(
        &self, id: u32, d: CheckpointDeclaration, now_ms: i64,
    ) -> Call<Checkpoint> {
        self.with_lease(id, |h| meta::declare_checkpoint(h.conn, &d, now_ms))
            .into()
    }

    fn claim_checkpoint(
        &self, id: u32, partition: String, name: String, schema_version: i64, now_ms: i64,
    ) -> Call<Checkpoint> {
        self.with_lease(id, |h| {
            claim(h.conn, &partition, &name, schema_version, now_ms)
        })
        .into()
    }

    /// Storage-level form, under a storage-level write lease.
    fn advance_checkpoint(
        &self, id: u32, partition: String, name: String, g: CheckpointProgress,
    ) -> Call<bool> {
        self.with_lease(id, |h| advance(h.conn, &partition, &name, &g))
            .into()
    }

    fn source_coverage_seq(&self, partition: String, tables: Vec<String>) -> Call<i64> {
        self.read(|c| source_coverage_seq(c, &partition, &tables))
            .into()
    }

    fn has_source_changes_above(
        &self, partition: String, tables: Vec<String>, seq: i64,
    ) -> Call<SourceState> {
        self.read_snapshot(|c| has_source_changes_above(c, &partition, &tables, seq))
            .into()
    }

    fn activate_checkpoint(
        &self, lease: u32, p: String, name: String, owner_epoch: i64, watermark: i64,
        sources: Vec<String>, now_ms: i64,
    ) -> Call<Activation> {
        SqliteEngine::activate_checkpoint(
            self,
            lease,
            &p,
            &name,
            owner_epoch,
            watermark,
            &sources,
            now_ms,
        )
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::CheckpointDeclaration;
    use crate::sqlite::meta;

    fn db() -> Conn {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(crate::sqlite::sql::meta_ddl()).unwrap();
        c.execute_batch(crate::sqlite::sql::WRITER_FENCE_TRIGGER)
            .unwrap();
        Conn::new(c)
    }

    fn declare(c: &Conn, name: &str, v: i64) {
        meta::declare_checkpoint(
            c,
            &CheckpointDeclaration {
                partition: "p".into(),
                name: name.into(),
                schema_version: v,
            },
            1,
        )
        .unwrap();
    }

    fn change(c: &Connection, seq: i64, tbl: &str) {
        c.execute(
            "INSERT INTO sync_changes (partition, commit_seq, idx, tbl, row_id, op, scopes) VALUES ('p', ?1, 0, ?2, 'r', 1, '{}')",
            params![seq, tbl],
        )
        .unwrap();
    }

    #[test]
    fn claim_raises_epoch_and_refuses_absent_or_activated() {
        let c = db();
        assert_eq!(
            claim(&c, "p", "a", 2, 5).unwrap_err(),
            Error::query("sync.storage.checkpoint_not_declared")
        );
        declare(&c, "a", 2);
        let first = claim(&c, "p", "a", 2, 5).unwrap();
        assert_eq!(
            (first.owner_epoch, first.state.as_str()),
            (1, "backfilling")
        );
        let second = claim(&c, "p", "a", 2, 6).unwrap();
        assert_eq!(
            (second.owner_epoch, second.state.as_str()),
            (2, "backfilling")
        );
        let progress = |owner_epoch, observed_rows| CheckpointProgress {
            owner_epoch,
            watermark: 9,
            observed_rows,
            now_ms: 7,
        };
        assert!(!advance(&c, "p", "a", &progress(1, 9)).unwrap());
        assert!(advance(&c, "p", "a", &progress(2, 3)).unwrap());
        let t = vec!["t".to_string()];
        assert_eq!(
            activate(&c, "p", "a", 1, 9, &t, 8).unwrap(),
            Activation::Stale
        );
        assert_eq!(
            activate(&c, "p", "a", 2, 9, &t, 8).unwrap(),
            Activation::Activated
        );
        assert_eq!(
            activate(&c, "p", "a", 2, 9, &t, 8).unwrap(),
            Activation::Stale
        );
        assert_eq!(
            claim(&c, "p", "a", 2, 9).unwrap_err(),
            Error::query("sync.storage.checkpoint_not_declared")
        );
    }

    #[test]
    fn source_checks_respect_the_horizon() {
        let c = db();
        let t = vec!["t".to_string(), "u".to_string()];
        assert_eq!(source_coverage_seq(&c, "p", &t).unwrap(), 0);
        assert_eq!(
            has_source_changes_above(&c, "p", &t, 0).unwrap(),
            SourceState::Clean
        );
        change(&c, 3, "t");
        change(&c, 5, "x");
        assert_eq!(source_coverage_seq(&c, "p", &t).unwrap(), 3);
        assert_eq!(source_coverage_seq(&c, "p", &[]).unwrap(), 0);
        assert_eq!(
            has_source_changes_above(&c, "p", &t, 2).unwrap(),
            SourceState::Changed
        );
        assert_eq!(
            has_source_changes_above(&c, "p", &t, 3).unwrap(),
            SourceState::Clean
        );
        log::set_horizon_seq(&c, "p", 3).unwrap();
        assert_eq!(
            has_source_changes_above(&c, "p", &t, 3).unwrap(),
            SourceState::Clean
        );
        log::set_horizon_seq(&c, "p", 4).unwrap();
        assert_eq!(
            has_source_changes_above(&c, "p", &t, 3).unwrap(),
            SourceState::Unverifiable
        );
        assert_eq!(
            has_source_changes_above(&c, "p", &[], 3).unwrap(),
            SourceState::Clean
        );
    }

    #[test]
    fn activation_needs_the_fence() {
        let c = db();
        assert_eq!(
            activate(&c, "p", "a", 0, 0, &[], 1).unwrap_err(),
            Error::query("sync.storage.checkpoint_fence_missing")
        );
        declare(&c, "a", 1);
        claim(&c, "p", "a", 2, 2).unwrap();
        assert_eq!(
            activate(&c, "p", "a", 1, 0, &[], 3).unwrap_err(),
            Error::query("sync.storage.checkpoint_fence_missing")
        );
        declare(&c, "b", 2);
        assert_eq!(
            activate(&c, "p", "a", 1, 0, &[], 3).unwrap(),
            Activation::Activated
        );
    }
}
