//! The `Clients` area on PostgreSQL: client records and cursors (SQL in
//! `meta.rs`); writes in their own transaction.

use super::handle::PgEngine;
use super::meta;
use crate::core::error::Result;
use crate::core::model::*;
use crate::postgres::handle::pg;
use crate::postgres::run::{read, write_one};
use crate::seam::{Call, Clients};
use std::sync::Arc;

impl Clients for Arc<PgEngine> {
    fn get_client_record(
        &self, partition: String, client_id: String,
    ) -> Call<Option<ClientRecord>> {
        pg!(self, |this| {
            read!(this, |c| meta::get_client(c, &partition, &client_id).await)
        })
    }

    fn list_client_records(&self, partition: String) -> Call<Vec<ClientRecord>> {
        pg!(self, |this| {
            read!(this, |c| meta::list_clients(c, &partition).await)
        })
    }

    fn put_client_record(&self, _lease: u32, partition: String, record: ClientRecord) -> Call<()> {
        pg!(self, |this| {
            write_one!(this, |c| meta::put_client(c, &partition, &record).await)
        })
    }

    fn list_client_cursors(&self, partition: String) -> Call<Vec<ClientCursor>> {
        pg!(self, |this| {
            read!(this, |c| meta::list_cursors(c, &partition).await)
        })
    }

    fn advance_client_cursor(&self, _lease: u32, p: String, a: CursorAdvance) -> Call<()> {
        pg!(self, |e| {
            let guard = a
                .guard
                .as_ref()
                .map(|(actor, epoch)| (actor.as_str(), epoch.as_str()));
            e.advance_client_cursor(&p, &a.client_id, guard, a.cursor, a.at_ms)
                .await
        })
    }

    fn get_active_client_cursor_floor(
        &self, partition: String, cutoff_ms: i64,
    ) -> Call<Option<i64>> {
        pg!(self, |this| {
            read!(this, |c| meta::active_cursor_floor(
                c, &partition, cutoff_ms
            )
            .await)
        })
    }
}

impl PgEngine {
    pub async fn advance_client_cursor(
        &self, partition: &str, client_id: &str, guard: Option<(&str, &str)>, cursor: i64,
        at_ms: i64,
    ) -> Result<()> {
        write_one!(self, |c| meta::advance_cursor(
            c, partition, client_id, guard, cursor, at_ms
        )
        .await)
    }
}
