//! Work that runs on libuv's thread pool: large reads and waits for a write
//! lock held by another process. The JS thread only converts the result.

use super::guard;
use super::packed::{self, Packed};
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
    type Output = Packed;
    type JsValue = Packed;

    fn compute(&mut self) -> Result<Packed> {
        guard(|| {
            self.engine
                .read_commit_window(
                    &self.partition,
                    &WindowQuery {
                        table: &self.table,
                        filter: &self.filter,
                        after_seq: self.after_seq,
                        through_seq: self.through_seq,
                        limit_changes: self.limit_changes,
                    },
                )
                .map(packed::commits)
        })
    }

    fn resolve(&mut self, _env: Env, output: Packed) -> Result<Packed> {
        Ok(output)
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
    type Output = Packed;
    type JsValue = Packed;

    fn compute(&mut self) -> Result<Packed> {
        guard(|| {
            self.engine
                .scan_rows(
                    &self.partition,
                    &self.table,
                    &self.filter,
                    &self.after_row_id,
                    self.limit,
                )
                .map(packed::rows)
        })
    }

    fn resolve(&mut self, _env: Env, output: Packed) -> Result<Packed> {
        Ok(output)
    }
}
