//! The storage's PostgreSQL options: the url (and the storage's own
//! parameters in it, `pgbouncer`/`pooling`, read here and never sent), the
//! pool size, the schema, the time and size bounds, and what opening a
//! transaction sends under each pooling mode.

use crate::core::error::{Error, Result};
use crate::core::schema::quote_ident;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    pub url: String,
    pub max_connections: u32,
    /// Confines the storage to this schema (created when missing).
    pub schema: Option<String>,
    /// How long one registered query may run (`queryTimeoutMs`).
    pub query_timeout: Duration,
    /// The size bounds of one registered query's result.
    pub result_limits: crate::core::query::result::Limits,
    /// How long a call may wait for a connection (`connectTimeoutMs`):
    /// while the server is unreachable, each call fails with
    /// `PG_POOL_TIMEOUT` after this long, and connection attempts back off
    /// to at most a fifth of it, so the storage serves again within that
    /// of the server answering.
    pub connect_timeout: Duration,
    /// What sits between the storage and the server (`pooling`).
    pub pooling: Pooling,
    /// The text that opens a transaction: `BEGIN`, and under transaction
    /// pooling with a `schema` the `search_path` for that transaction
    /// (a session `SET` would stay with a server session another client
    /// gets next).
    pub begin: String,
    /// `SET LOCAL search_path TO <schema>; ` under transaction pooling with
    /// a `schema`, else empty: what [`Config::begin`] adds to `BEGIN`, for
    /// transactions that open themselves (registered queries).
    pub local_schema: String,
}

/// How the storage's connections reach PostgreSQL (`pooling`; docs/poolers.md).
///
/// A connection pooler in transaction mode (PgBouncer's `pool_mode =
/// transaction`, Supavisor on port 6543, Neon's `-pooler` endpoint) hands
/// each transaction whichever server session is free, so nothing of a
/// session outlives a transaction there. It cannot be detected from the
/// client (the pooler answers as the server would), so it is declared:
/// `pooling: 'transaction'`, or `pgbouncer=true` in the url as Prisma spells
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// A direct connection, or a pooler in session mode: each client
    /// connection keeps one server session, so prepared statements and
    /// session settings are kept between transactions.
    Session,
    /// Every statement runs inside an explicit transaction that sets what
    /// it needs (`SET LOCAL`), with unnamed statements only.
    Transaction,
}

impl Pooling {
    pub fn parse(s: &str) -> Result<Pooling> {
        match s {
            "none" | "session" => Ok(Pooling::Session),
            "transaction" => Ok(Pooling::Transaction),
            other => Err(Error::invalid(format!(
                "pooling must be 'none', 'session' or 'transaction', not {other:?}"
            ))),
        }
    }
}

/// The url without the storage's own query parameters (`pgbouncer`,
/// `pooling`), and the pooling they name. sqlx would ignore them with a
/// warning; they are read here and never sent to the server.
fn split_pooling(url: &str) -> Result<(String, Option<Pooling>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None));
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let mut kept = Vec::new();
    let mut pooling = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let named = match key {
            "pgbouncer" => match value {
                "true" | "1" => Some(Pooling::Transaction),
                "false" | "0" => Some(Pooling::Session),
                _ => {
                    return Err(Error::invalid(format!(
                        "the url's pgbouncer parameter must be true or false, not {value:?}"
                    )))
                }
            },
            "pooling" => Some(Pooling::parse(value)?),
            _ => {
                kept.push(pair);
                None
            }
        };
        if let Some(p) = named {
            if pooling.is_some_and(|q| q != p) {
                return Err(Error::invalid(
                    "the url names two different poolings (pgbouncer and pooling)",
                ));
            }
            pooling = Some(p);
        }
    }
    let mut out = base.to_owned();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    Ok((out, pooling))
}

/// `connectTimeoutMs` when not given: 5 s (so retries back off to 1 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Config {
    pub fn parse(
        url: &str, max_connections: Option<u32>, schema: Option<String>, pooling: Option<Pooling>,
    ) -> Result<Config> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::invalid(format!(
                "invalid PostgreSQL url {url:?}: expected postgres://…"
            )));
        }
        let (url, in_url) = split_pooling(url)?;
        let pooling = match (pooling, in_url) {
            (Some(a), Some(b)) if a != b => {
                return Err(Error::invalid(format!(
                    "the pooling option ({a:?}) and the url ({b:?}) disagree"
                )))
            }
            (a, b) => a.or(b).unwrap_or(Pooling::Session),
        };
        let max_connections = max_connections.unwrap_or(10);
        if max_connections == 0 {
            return Err(Error::invalid("maxConnections must be at least 1"));
        }
        if let Some(s) = &schema {
            if s.is_empty() || s.len() > 63 {
                return Err(Error::invalid("schema must be 1..63 bytes"));
            }
        }
        let local_schema = match (&schema, pooling) {
            (Some(s), Pooling::Transaction) => {
                format!("SET LOCAL search_path TO {}; ", quote_ident(s))
            }
            _ => String::new(),
        };
        let begin = format!("BEGIN; {local_schema}")
            .trim_end_matches("; ")
            .to_owned();
        Ok(Config {
            url,
            pooling,
            local_schema,
            begin,
            max_connections,
            schema,
            query_timeout: crate::core::query::DEFAULT_TIMEOUT,
            result_limits: Default::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str, option: Option<&str>) -> Result<Config> {
        Config::parse(url, None, None, option.map(Pooling::parse).transpose()?)
    }

    #[test]
    fn pooling_from_the_option_or_the_url() {
        let base = "postgres://u@h:6543/db";
        assert_eq!(parse(base, None).unwrap().pooling, Pooling::Session);
        assert_eq!(
            parse(base, Some("transaction")).unwrap().pooling,
            Pooling::Transaction
        );
        assert_eq!(
            parse(base, Some("session")).unwrap().pooling,
            Pooling::Session
        );
        assert_eq!(parse(base, Some("none")).unwrap().pooling, Pooling::Session);
        let cfg = parse(
            "postgres://u@h:6543/db?sslmode=disable&pgbouncer=true",
            None,
        )
        .unwrap();
        assert_eq!(cfg.pooling, Pooling::Transaction);
        // The storage's own parameters never reach the server.
        assert_eq!(cfg.url, "postgres://u@h:6543/db?sslmode=disable");
        let cfg = parse("postgres://u@h/db?pooling=transaction", Some("transaction")).unwrap();
        assert_eq!(
            (cfg.pooling, cfg.url.as_str()),
            (Pooling::Transaction, "postgres://u@h/db")
        );
        assert!(parse(base, Some("statement")).is_err());
        assert!(parse("postgres://u@h/db?pgbouncer=yes", None).is_err());
        assert!(parse("postgres://u@h/db?pgbouncer=true", Some("session")).is_err());
        assert!(parse("postgres://u@h/db?pgbouncer=true&pooling=session", None).is_err());
    }

    #[test]
    fn transaction_pooling_sets_the_schema_per_transaction() {
        let cfg = Config::parse(
            "postgres://h/db",
            None,
            Some("s x".into()),
            Some(Pooling::Transaction),
        )
        .unwrap();
        assert_eq!(cfg.begin, "BEGIN; SET LOCAL search_path TO \"s x\"");
        let cfg = Config::parse("postgres://h/db", None, Some("s".into()), None).unwrap();
        assert_eq!(cfg.begin, "BEGIN");
    }
}
