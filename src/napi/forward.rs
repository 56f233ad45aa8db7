//! Members whose arguments go to the engine as they come (strings,
//! lease numbers, string lists) and whose answers come back as they are.
//! One line each; members that check or convert anything are written out
//! in `storage.rs` and its siblings.

use super::args::Str;
use super::reply::Reply;
use super::storage::NativeEngine;
use crate::core::model::admin::BlobReferencingRow;
use crate::core::model::reactions::StoredReaction;
use crate::core::model::{Checkpoint, ClientCursor, ClientRecord, RegistryEntry};
use napi_derive::napi;

macro_rules! forward {
    ($($name:ident $js:literal ($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {
        #[napi]
        impl NativeEngine {
            $(
                #[napi]
                pub fn $name(&self, $($arg: $ty),*) -> Reply<$out> {
                    self.run($js, |e| Ok(e.$name($($arg.into()),*)))
                }
            )*
        }
    };
}

forward! {
    list_partition_registry "listPartitionRegistry" () -> Vec<RegistryEntry>;
    get_partition_log_epoch "getPartitionLogEpoch" (partition: String) -> Option<String>;
    get_max_commit_seq "getMaxCommitSeq" (partition: Str) -> i64;
    get_horizon_seq "getHorizonSeq" (partition: String) -> i64;
    get_client_record "getClientRecord" (partition: Str, client_id: Str) -> Option<ClientRecord>;
    list_client_records "listClientRecords" (partition: String) -> Vec<ClientRecord>;
    list_client_cursors "listClientCursors" (partition: String) -> Vec<ClientCursor>;
    read_checkpoints "readCheckpoints" (partition: String) -> Vec<Checkpoint>;
    source_coverage_seq "sourceCoverageSeq" (partition: String, tables: Vec<String>) -> i64;
    get_reaction "getReaction" (partition: String, key: String) -> Option<StoredReaction>;
    list_rows_referencing_blob "listRowsReferencingBlob" (partition: String, blob_id: String)
        -> Vec<BlobReferencingRow>;
    list_referenced_blob_ids "listReferencedBlobIds" (partition: String) -> Vec<String>;
    tx_get_tombstone_seq "tx.getTombstoneSeq" (lease: u32, table: Str, row_id: Str) -> Option<i64>;
    tx_clear_tombstone "tx.clearTombstone" (lease: u32, table: Str, row_id: Str) -> ();
    tx_delete_row "tx.deleteRow" (lease: u32, table: Str, row_id: Str) -> ();
    tx_lock_partition_for_push "tx.lockPartitionForPush" (lease: u32) -> ();
    tx_commit_rejected_push_result "tx.commitRejectedPushResult"
        (lease: u32, client_id: String, commit_id: String, result_json: String) -> ();
    tx_set_blob_refs "tx.setBlobRefs"
        (lease: u32, table: String, row_id: String, blob_ids: Vec<String>) -> ();
}
