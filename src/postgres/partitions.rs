//! The `Log` area on PostgreSQL: partitions (counters, registry, log
//! epochs) and the commit log's counters, horizon and pruning, each a
//! future on a pool connection (SQL in `log.rs` and `meta.rs`).

use super::handle::{pg, PgEngine};
use super::{log, meta};
use crate::core::model::{PruneResult, PruneTarget, RegistryEntry};
use crate::postgres::run::{read, write, write_one};
use crate::seam::{Call, Log};
use std::sync::Arc;

impl Log for Arc<PgEngine> {
    fn touch_partition(
        &self, _lease: u32, partition: String, at_ms: i64, epoch: String,
    ) -> Call<RegistryEntry> {
        pg!(self, |this| {
            write_one!(this, |c| meta::touch_partition(
                c, &partition, at_ms, &epoch
            )
            .await)
        })
    }

    fn rotate_partition_log_epoch(
        &self, _lease: u32, partition: String, epoch: String, at_ms: i64,
    ) -> Call<RegistryEntry> {
        pg!(self, |this| {
            write!(this, |c| meta::rotate_epoch(c, &partition, &epoch, at_ms)
                .await)
        })
    }

    fn list_partition_registry(&self) -> Call<Vec<RegistryEntry>> {
        pg!(self, |this| {
            read!(this, |c| meta::list_registry(c).await)
        })
    }

    fn get_partition_log_epoch(&self, partition: String) -> Call<Option<String>> {
        pg!(self, |this| {
            read!(this, |c| meta::log_epoch(c, &partition).await)
        })
    }

    fn get_max_commit_seq(&self, partition: String) -> Call<i64> {
        pg!(self, |this| {
            read!(this, |c| log::max_commit_seq(c, &partition).await)
        })
    }

    fn get_horizon_seq(&self, partition: String) -> Call<i64> {
        pg!(self, |this| {
            read!(this, |c| log::horizon_seq(c, &partition).await)
        })
    }

    fn set_horizon_seq(&self, _lease: u32, partition: String, seq: i64) -> Call<()> {
        pg!(self, |this| {
            write!(this, |c| log::set_horizon_seq(c, &partition, seq).await)
        })
    }

    fn prune_commits_through(
        &self, _lease: u32, partition: String, target: PruneTarget,
    ) -> Call<PruneResult> {
        pg!(self, |this| {
            write!(this, |c| log::prune(c, &partition, target.clone()).await)
        })
    }

    fn get_commit_seq_before(&self, partition: String, before_ms: i64) -> Call<i64> {
        pg!(self, |this| {
            read!(this, |c| log::commit_seq_before(c, &partition, before_ms)
                .await)
        })
    }
}
