//! The `Clients` area on SQLite: client records and cursors (SQL in
//! `meta.rs`). Reads take a reader connection; writes the caller's lease.

use super::meta;
use super::storage::SqliteEngine;
use crate::core::error::Result;
use crate::core::model::*;
use crate::seam::{Call, Clients};
use std::sync::Arc;

impl Clients for Arc<SqliteEngine> {
    fn get_client_record(
        &self, partition: String, client_id: String,
    ) -> Call<Option<ClientRecord>> {
        self.read(|c| meta::get_client(c, &partition, &client_id))
            .into()
    }

    fn list_client_records(&self, partition: String) -> Call<Vec<ClientRecord>> {
        self.read(|c| meta::list_clients(c, &partition)).into()
    }

    fn put_client_record(&self, id: u32, partition: String, record: ClientRecord) -> Call<()> {
        self.with_lease_one_statement(id, |h| meta::put_client(h.conn, &partition, &record))
            .into()
    }

    fn list_client_cursors(&self, partition: String) -> Call<Vec<ClientCursor>> {
        self.read(|c| meta::list_cursors(c, &partition)).into()
    }

    fn advance_client_cursor(&self, lease: u32, p: String, a: CursorAdvance) -> Call<()> {
        let guard = a
            .guard
            .as_ref()
            .map(|(actor, epoch)| (actor.as_str(), epoch.as_str()));
        SqliteEngine::advance_client_cursor(self, lease, &p, &a.client_id, guard, a.cursor, a.at_ms)
            .into()
    }

    fn get_active_client_cursor_floor(
        &self, partition: String, cutoff_ms: i64,
    ) -> Call<Option<i64>> {
        self.read(|c| meta::active_cursor_floor(c, &partition, cutoff_ms))
            .into()
    }
}

impl SqliteEngine {
    pub fn advance_client_cursor(
        &self, id: u32, partition: &str, client_id: &str, guard: Option<(&str, &str)>, cursor: i64,
        at_ms: i64,
    ) -> Result<()> {
        self.with_lease_one_statement(id, |h| {
            meta::advance_cursor(h.conn, partition, client_id, guard, cursor, at_ms)
        })
    }
}
