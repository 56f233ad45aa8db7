//! A transaction and its batch (storage-layout §8.1, §17; issue 27): round
//! trips are what a PostgreSQL push costs, so a transaction holds back
//! what it can and sends it with its next statement or with `COMMIT`.
//!
//! Batches go out as one simple-protocol query string, so the values in
//! them are literals (`crate::postgres::quote`); a value holding a NUL
//! (which PostgreSQL text cannot store anyway) takes the prepared path.
//!
//! - `state`: `TxState`, what one open transaction holds (keeping sends
//!   nothing);
//! - `batch`: the held-back batch sent before the next statement (`ready`,
//!   with the deferred `BEGIN`) or with `COMMIT` (`unlock`);
//! - `lock`: the partition lock batch; `lock_reads`: what that batch also
//!   reads for the host's next calls, and the statements each connection
//!   prepares for it;
//! - `append`, `upsert`, `put`: the commit append, row upserts and push
//!   result held back, and when each may be;
//! - `immediate`: members answered on the caller's thread, with no round
//!   trip; `members`: `prefetchRows` and the other members that work on
//!   the state itself.

pub(in crate::postgres) mod append;
mod batch;
pub(in crate::postgres) mod immediate;
mod lock;
pub(in crate::postgres) mod lock_reads;
mod members;
mod put;
pub(in crate::postgres) mod state;
pub(in crate::postgres) mod upsert;
