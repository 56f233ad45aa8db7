//! Admin console and blob reads on `SqliteHandle`. `listClientRecords` is
//! in `handle.rs`. Scopes cross as JSON text; the shim parses them.

use super::convert::int;
use super::guard;
use super::handle::SqliteHandle;
use crate::model::admin::{BlobReferencingRow, CommitMetadata, ScopeActivity};
use napi::bindgen_prelude::*;
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
impl SqliteHandle {
    #[napi]
    pub fn list_commit_metadata(
        &self, partition: String, after_seq: f64, limit: f64, table: Option<String>,
    ) -> Result<Vec<JsCommitMetadata>> {
        guard(|| {
            let after = int(after_seq, "afterSeq")?;
            let limit = int(limit, "limit")?;
            Ok(self
                .engine
                .list_commit_metadata(&partition, after, limit, table.as_deref())?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    #[napi]
    pub fn scope_activity(
        &self, partition: String, variable: String, value: String, limit: f64,
    ) -> Result<Vec<JsScopeActivity>> {
        guard(|| {
            let limit = int(limit, "limit")?;
            Ok(self
                .engine
                .scope_activity(&partition, &variable, &value, limit)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    #[napi]
    pub fn get_row_scopes(
        &self, partition: String, table: String, row_id: String,
    ) -> Result<Option<JsRowScopes>> {
        guard(|| {
            Ok(self
                .engine
                .get_row_scopes(&partition, &table, &row_id)?
                .map(|(server_version, scopes)| JsRowScopes {
                    server_version,
                    scopes,
                }))
        })
    }

    #[napi]
    pub fn list_rows_referencing_blob(
        &self, partition: String, blob_id: String,
    ) -> Result<Vec<JsBlobReferencingRow>> {
        guard(|| {
            Ok(self
                .engine
                .list_rows_referencing_blob(&partition, &blob_id)?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    #[napi]
    pub fn list_referenced_blob_ids(&self, partition: String) -> Result<Vec<String>> {
        guard(|| self.engine.list_referenced_blob_ids(&partition))
    }
}
