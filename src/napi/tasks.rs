//! Work that runs on libuv's thread pool: large reads and waits for a write
//! lock held by another process. The JS thread only converts the result.

use super::convert::{JsCommit, JsRow};
use super::guard;
use crate::model::{StoredCommit, StoredRow};
use crate::scope::ScopeFilter;
use crate::sqlite::{SqliteEngine, WindowQuery};
use napi::bindgen_prelude::*;
use std::sync::Arc;

pub struct LockTask {
    pub engine: Arc<SqliteEngine>,
    pub partition: Option<String>,
}

impl Task for LockTask {
    type Output = u32;
    type JsValue = u32;

    fn compute(&mut self) -> Result<u32> {
        guard(|| self.engine.lock_blocking(self.partition.as_deref()))
    }

    fn resolve(&mut self, _env: Env, output: u32) -> Result<u32> {
        Ok(output)
    }
}

pub struct WindowTask {
    pub engine: Arc<SqliteEngine>,
    pub partition: String,
    pub table: String,
    pub filter: ScopeFilter,
    pub after_seq: i64,
    pub through_seq: i64,
    pub limit_changes: i64,
}

impl Task for WindowTask {
    type Output = Vec<StoredCommit>;
    type JsValue = Vec<JsCommit>;

    fn compute(&mut self) -> Result<Vec<StoredCommit>> {
        guard(|| {
            self.engine.read_commit_window(
                &self.partition,
                &WindowQuery {
                    table: &self.table,
                    filter: &self.filter,
                    after_seq: self.after_seq,
                    through_seq: self.through_seq,
                    limit_changes: self.limit_changes,
                },
            )
        })
    }

    fn resolve(&mut self, _env: Env, output: Vec<StoredCommit>) -> Result<Vec<JsCommit>> {
        Ok(output.into_iter().map(JsCommit::from).collect())
    }
}

pub struct ScanTask {
    pub engine: Arc<SqliteEngine>,
    pub partition: String,
    pub table: String,
    pub filter: ScopeFilter,
    pub after_row_id: String,
    pub limit: i64,
}

impl Task for ScanTask {
    type Output = Vec<StoredRow>;
    type JsValue = Vec<JsRow>;

    fn compute(&mut self) -> Result<Vec<StoredRow>> {
        guard(|| {
            self.engine.scan_rows(
                &self.partition,
                &self.table,
                &self.filter,
                &self.after_row_id,
                self.limit,
            )
        })
    }

    fn resolve(&mut self, _env: Env, output: Vec<StoredRow>) -> Result<Vec<JsRow>> {
        Ok(output.into_iter().map(JsRow::from).collect())
    }
}
