//! The `storage.db` members of the storage: each runs one `db` call on
//! the writer connection, under its mutex (the rules are `shared`'s).

use super::mutex::lock;
use super::shared::{self, Fetch, Output};
use super::storage::SqliteEngine;
use crate::core::error::Result;
use crate::core::query::Value;

impl SqliteEngine {
    /// `db.exec(sql)`.
    pub fn db_exec(&self, sql: &str) -> Result<()> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        shared::exec(&mut w, sql)
    }

    /// `db.query(sql)`: compiles it, so a bad statement fails there.
    pub fn db_prepare(&self, sql: &str) -> Result<()> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        shared::prepare(&mut w, sql)
    }

    /// `db.run(sql, params)`, and a statement's `run`, `get` and `all`.
    pub fn db_statement(&self, sql: &str, params: Vec<Value>, fetch: Fetch) -> Result<Output> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        shared::statement(&mut w, sql, params, fetch)
    }
}
