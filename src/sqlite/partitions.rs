//! The `Log` area on SQLite: partitions (counters, registry, log epochs)
//! and the commit log's counters, horizon and pruning (SQL in `log.rs`
//! and `meta.rs`). Reads take a reader connection; writes the caller's
//! lease.

use super::storage::SqliteEngine;
use super::{log, meta};
use crate::core::model::{PruneResult, PruneTarget, RegistryEntry};
use crate::seam::{Call, Log};
use std::sync::Arc;

impl Log for Arc<SqliteEngine> {
    fn touch_partition(
        &self, id: u32, partition: String, at_ms: i64, epoch: String,
    ) -> Call<RegistryEntry> {
        self.with_lease_one_statement(id, |h| {
            meta::touch_partition(h.conn, &partition, at_ms, &epoch)
        })
        .into()
    }

    fn rotate_partition_log_epoch(
        &self, id: u32, partition: String, epoch: String, at_ms: i64,
    ) -> Call<RegistryEntry> {
        self.with_lease(id, |h| {
            meta::rotate_epoch(h.conn, &partition, &epoch, at_ms)
        })
        .into()
    }

    fn list_partition_registry(&self) -> Call<Vec<RegistryEntry>> {
        self.read(meta::list_registry).into()
    }

    fn get_partition_log_epoch(&self, partition: String) -> Call<Option<String>> {
        self.read(|c| meta::log_epoch(c, &partition)).into()
    }

    fn get_max_commit_seq(&self, partition: String) -> Call<i64> {
        self.read(|c| log::max_commit_seq(c, &partition)).into()
    }

    fn get_horizon_seq(&self, partition: String) -> Call<i64> {
        self.read(|c| log::horizon_seq(c, &partition)).into()
    }

    fn set_horizon_seq(&self, id: u32, partition: String, seq: i64) -> Call<()> {
        self.with_lease(id, |h| log::set_horizon_seq(h.conn, &partition, seq))
            .into()
    }

    fn prune_commits_through(
        &self, id: u32, partition: String, target: PruneTarget,
    ) -> Call<PruneResult> {
        self.with_lease(id, |h| log::prune(h.conn, &partition, target))
            .into()
    }

    fn get_commit_seq_before(&self, partition: String, before_ms: i64) -> Call<i64> {
        self.read(|c| log::commit_seq_before(c, &partition, before_ms))
            .into()
    }
}
