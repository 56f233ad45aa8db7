//! The push result a transaction keeps for its next batch
//! (`putPushResult` returns nothing, so its insert travels with the next
//! statement's round trip or with `COMMIT`), and its text there.

use super::lock_reads::{PUT, PUT_INTO};
use crate::postgres::quote::lit;

/// A push result whose insert has not been sent yet.
pub struct PendingPut {
    pub(super) client_id: String,
    pub(super) commit_id: String,
    pub(super) json: String,
}

impl PendingPut {
    pub fn new(client_id: &str, commit_id: &str, json: &str) -> PendingPut {
        PendingPut {
            client_id: client_id.to_owned(),
            commit_id: commit_id.to_owned(),
            json: json.to_owned(),
        }
    }
}

/// The insert as text: the prepared statement where this transaction's
/// lock batch executed the prepared ones (so the connection has it).
pub(super) fn put_text(partition: &str, put: &PendingPut, prepared: bool) -> Option<String> {
    let (p, c, k, json) = (
        lit(partition)?,
        lit(&put.client_id)?,
        lit(&put.commit_id)?,
        lit(&put.json)?,
    );
    Some(if prepared {
        format!("EXECUTE {}({p}, {c}, {k}, {json})", PUT)
    } else {
        let into = PUT_INTO;
        format!("{into} ({p}, {c}, {k}, {json}::pg_catalog.jsonb) ON CONFLICT DO NOTHING")
    })
}
