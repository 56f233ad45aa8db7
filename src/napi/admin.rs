//! Admin console and blob reads `listClientRecords` is with the
//! other client members in `storage.rs`. Scopes cross as JSON text; the shim parses them.

use super::convert::int;
use super::records::RowScopes;
use super::reply::Reply;
use super::storage::NativeEngine;
use crate::core::model::admin::{CommitMetadata, ScopeActivity};
use napi_derive::napi;

#[napi]
impl NativeEngine {
    #[napi(ts_return_type = "JsCommitMetadata[] | Promise<JsCommitMetadata[]>")]
    pub fn list_commit_metadata(
        &self, partition: String, after_seq: f64, limit: f64, table: Option<String>,
    ) -> Reply<Vec<CommitMetadata>> {
        self.run("listCommitMetadata", |e| {
            let (after, limit) = (int(after_seq, "afterSeq")?, int(limit, "limit")?);
            Ok(e.list_commit_metadata(partition, after, limit, table))
        })
    }

    #[napi(ts_return_type = "JsScopeActivity[] | Promise<JsScopeActivity[]>")]
    pub fn scope_activity(
        &self, partition: String, variable: String, value: String, limit: f64,
    ) -> Reply<Vec<ScopeActivity>> {
        self.run("scopeActivity", |e| {
            let limit = int(limit, "limit")?;
            Ok(e.scope_activity(partition, variable, value, limit))
        })
    }

    #[napi(ts_return_type = "JsRowScopes | null | Promise<JsRowScopes | null>")]
    pub fn get_row_scopes(
        &self, partition: String, table: String, row_id: String,
    ) -> Reply<Option<RowScopes>> {
        self.run("getRowScopes", |e| {
            Ok(e.get_row_scopes(partition, table, row_id).map(|found| {
                found.map(|(server_version, scopes)| RowScopes {
                    server_version,
                    scopes,
                })
            }))
        })
    }
}
