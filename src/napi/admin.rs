//! Admin console and blob reads `listClientRecords` is with the
//! other client members in `storage.rs`. Scopes cross as JSON text; the shim parses them.

use super::convert::int;
use super::reply::Reply;
use super::storage::{list, NativeEngine};
use crate::model::admin::{BlobReferencingRow, CommitMetadata, ScopeActivity};
use napi_derive::napi;

#[napi(object, object_from_js = false)]
pub struct JsCommitMetadata {
    pub commit_seq: i64,
    pub client_id: String,
    pub client_commit_id: String,
    pub actor_id: String,
    pub created_at_ms: i64,
    pub change_count: i64,
    pub tables: Vec<String>,
}

impl From<CommitMetadata> for JsCommitMetadata {
    fn from(m: CommitMetadata) -> Self {
        JsCommitMetadata {
            commit_seq: m.commit_seq,
            client_id: m.client_id,
            client_commit_id: m.client_commit_id,
            actor_id: m.actor_id,
            created_at_ms: m.created_at_ms,
            change_count: m.change_count,
            tables: m.tables,
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct JsScopeActivity {
    pub commit_seq: i64,
    pub table: String,
    pub created_at_ms: i64,
    pub actor_id: String,
    pub change_count: i64,
}

impl From<ScopeActivity> for JsScopeActivity {
    fn from(a: ScopeActivity) -> Self {
        JsScopeActivity {
            commit_seq: a.commit_seq,
            table: a.table,
            created_at_ms: a.created_at_ms,
            actor_id: a.actor_id,
            change_count: a.change_count,
        }
    }
}

#[napi(object, object_from_js = false)]
pub struct JsRowScopes {
    pub server_version: i64,
    /// JSON text.
    pub scopes: String,
}

#[napi(object, object_from_js = false)]
pub struct JsBlobReferencingRow {
    pub table: String,
    pub row_id: String,
    /// JSON text.
    pub scopes: String,
}

impl From<BlobReferencingRow> for JsBlobReferencingRow {
    fn from(r: BlobReferencingRow) -> Self {
        JsBlobReferencingRow {
            table: r.table,
            row_id: r.row_id,
            scopes: r.scopes_json,
        }
    }
}

#[napi]
impl NativeEngine {
    #[napi(ts_return_type = "JsCommitMetadata[] | Promise<JsCommitMetadata[]>")]
    pub fn list_commit_metadata(
        &self,
        partition: String,
        after_seq: f64,
        limit: f64,
        table: Option<String>,
    ) -> Reply<Vec<JsCommitMetadata>> {
        self.run("listCommitMetadata", |e| {
            let (after, limit) = (int(after_seq, "afterSeq")?, int(limit, "limit")?);
            Ok(e.list_commit_metadata(partition, after, limit, table)
                .map(list))
        })
    }

    #[napi(ts_return_type = "JsScopeActivity[] | Promise<JsScopeActivity[]>")]
    pub fn scope_activity(
        &self,
        partition: String,
        variable: String,
        value: String,
        limit: f64,
    ) -> Reply<Vec<JsScopeActivity>> {
        self.run("scopeActivity", |e| {
            let limit = int(limit, "limit")?;
            Ok(e.scope_activity(partition, variable, value, limit)
                .map(list))
        })
    }

    #[napi(ts_return_type = "JsRowScopes | null | Promise<JsRowScopes | null>")]
    pub fn get_row_scopes(
        &self,
        partition: String,
        table: String,
        row_id: String,
    ) -> Reply<Option<JsRowScopes>> {
        self.run("getRowScopes", |e| {
            Ok(e.get_row_scopes(partition, table, row_id).map(|found| {
                found.map(|(server_version, scopes)| JsRowScopes {
                    server_version,
                    scopes,
                })
            }))
        })
    }

    #[napi(ts_return_type = "JsBlobReferencingRow[] | Promise<JsBlobReferencingRow[]>")]
    pub fn list_rows_referencing_blob(
        &self,
        partition: String,
        blob_id: String,
    ) -> Reply<Vec<JsBlobReferencingRow>> {
        self.run("listRowsReferencingBlob", |e| {
            Ok(e.list_rows_referencing_blob(partition, blob_id).map(list))
        })
    }

    #[napi(ts_return_type = "string[] | Promise<string[]>")]
    pub fn list_referenced_blob_ids(&self, partition: String) -> Reply<Vec<String>> {
        self.run("listReferencedBlobIds", |e| {
            Ok(e.list_referenced_blob_ids(partition))
        })
    }
}
