//! The error vocabulary of the core. Each variant maps to one family of
//! host-visible errors; the JS shim rebuilds the host's own classes from
//! `kind`, `code`, `op_index` and `details`, so Rust never constructs JS
//! error objects.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `StorageQueryError` with a `sync.storage.*` code.
    Query {
        code: &'static str,
        details: Vec<(String, String)>,
    },
    /// `StorageConstraintError`: a relational constraint failed while
    /// writing a row projection.
    Constraint {
        op_index: Option<u32>,
        cause: String,
    },
    /// `DecodeError` (`sync.invalid_request`): a payload that does not
    /// decode under the schema.
    Decode(String),
    /// A plain `Error` whose message is its identity (upstream parity),
    /// tagged with a stable `ERR_SYNCULAR_*` code.
    Plain { code: &'static str, message: String },
    /// Bad argument shape or value; surfaces as a `TypeError`/`RangeError`.
    InvalidArgument(String),
    /// A raw engine error passed through, with the engine's code name.
    Engine { code: String, message: String },
    /// The database writer lock is held by another connection; the caller
    /// retries off the JS thread.
    Busy,
    /// `error`, after which the ROLLBACK meant to clean up failed too
    /// (0.30.7): the host sees `error`, with `rollback` attached as its
    /// non-enumerable `rollbackError`. Never the other way round.
    RollbackFailed {
        error: Box<Error>,
        rollback: Box<Error>,
    },
}

/// The code of a call in, or the commit of, a transaction the database
/// already rolled back.
pub const TX_ABORTED: &str = "ERR_SYNCULAR_TX_ABORTED";

impl Error {
    pub fn query(code: &'static str) -> Self {
        Error::Query {
            code,
            details: Vec::new(),
        }
    }

    pub fn query_with(code: &'static str, details: &[(&str, &str)]) -> Self {
        Error::Query {
            code,
            details: details
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub fn plain(code: &'static str, message: impl Into<String>) -> Self {
        Error::Plain {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    pub fn unknown_table(table: &str) -> Self {
        Error::plain(
            "ERR_SYNCULAR_UNKNOWN_TABLE",
            format!(
                "unknown table \"{table}\": ensureSchema(schema) must run first with a schema that declares it"
            ),
        )
    }

    /// `self`, with the failure of the ROLLBACK that followed it attached.
    pub fn with_rollback_failure(self, rollback: Error) -> Self {
        match self {
            // The first failure stays the error; a later rollback's is not kept.
            Error::RollbackFailed { .. } => self,
            error => Error::RollbackFailed {
                error: Box::new(error),
                rollback: Box::new(rollback),
            },
        }
    }

    /// The error itself, without an attached rollback failure.
    pub fn primary(&self) -> &Error {
        match self {
            Error::RollbackFailed { error, .. } => error,
            e => e,
        }
    }

    /// Another connection holds the lock this call needed (SQLite's
    /// `SQLITE_BUSY` and `SQLITE_LOCKED`, with their extended forms).
    pub fn is_busy(&self) -> bool {
        match self {
            Error::Busy => true,
            Error::Engine { code, .. } => {
                code.starts_with("SQLITE_BUSY") || code.starts_with("SQLITE_LOCKED")
            }
            _ => false,
        }
    }

    pub fn tx_finished() -> Self {
        Error::plain("ERR_SYNCULAR_TX_FINISHED", "transaction already finished")
    }

    /// The engine rolled the transaction back under a call: nothing of it
    /// is stored, and its commit is refused.
    pub fn tx_aborted() -> Self {
        Error::plain(
            TX_ABORTED,
            "the transaction was rolled back by the database after an error; nothing of it was stored",
        )
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Error::Query { .. } => "query",
            Error::Constraint { .. } => "constraint",
            Error::Decode(_) => "decode",
            Error::Plain { .. } => "plain",
            Error::InvalidArgument(_) => "argument",
            Error::Engine { .. } => "engine",
            Error::Busy => "busy",
            Error::RollbackFailed { error, .. } => error.kind(),
        }
    }

    /// Serialized form carried across N-API inside the error message; the
    /// shim parses it back. JSON keeps it unambiguous for any message text.
    pub fn to_wire(&self) -> String {
        serde_json::Value::Object(self.wire_object()).to_string()
    }

    fn wire_object(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut o = serde_json::Map::new();
        o.insert("kind".into(), self.kind().into());
        match self {
            Error::Query { code, details } => {
                o.insert("code".into(), (*code).into());
                if !details.is_empty() {
                    let d: serde_json::Map<String, serde_json::Value> = details
                        .iter()
                        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                        .collect();
                    o.insert("details".into(), d.into());
                }
            }
            Error::Constraint { op_index, cause } => {
                if let Some(i) = op_index {
                    o.insert("opIndex".into(), (*i).into());
                }
                o.insert("message".into(), cause.clone().into());
            }
            Error::Decode(m) => {
                o.insert("code".into(), "sync.invalid_request".into());
                o.insert("message".into(), m.clone().into());
            }
            Error::Plain { code, message } => {
                o.insert("code".into(), (*code).into());
                o.insert("message".into(), message.clone().into());
            }
            Error::InvalidArgument(m) => {
                o.insert("code".into(), "ERR_SYNCULAR_INVALID_ARGUMENT".into());
                o.insert("message".into(), m.clone().into());
            }
            Error::Engine { code, message } => {
                o.insert("code".into(), code.clone().into());
                o.insert("message".into(), message.clone().into());
            }
            Error::Busy => {
                o.insert("code".into(), "SQLITE_BUSY".into());
                o.insert("message".into(), "database is locked".into());
            }
            Error::RollbackFailed { error, rollback } => {
                o = error.wire_object();
                o.insert("rollbackError".into(), rollback.wire_object().into());
                return o;
            }
        }
        o
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Query { code, .. } => write!(f, "{code}"),
            Error::Constraint { cause, .. } => write!(f, "constraint violation: {cause}"),
            Error::Decode(m) | Error::InvalidArgument(m) => f.write_str(m),
            Error::Plain { message, .. } | Error::Engine { message, .. } => f.write_str(message),
            Error::Busy => f.write_str("database is locked"),
            Error::RollbackFailed { error, .. } => error.fmt(f),
        }
    }
}

impl std::error::Error for Error {}

impl From<crate::core::codec::DecodeError> for Error {
    fn from(e: crate::core::codec::DecodeError) -> Self {
        Error::Decode(e.message)
    }
}

/// The text of a caught panic's payload.
pub fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
