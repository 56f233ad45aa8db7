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
}

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

    pub fn tx_finished() -> Self {
        Error::plain("ERR_SYNCULAR_TX_FINISHED", "transaction already finished")
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
        }
    }

    /// Serialized form carried across N-API inside the error message; the
    /// shim parses it back. JSON keeps it unambiguous for any message text.
    pub fn to_wire(&self) -> String {
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
        }
        serde_json::Value::Object(o).to_string()
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
        }
    }
}

impl std::error::Error for Error {}

impl From<crate::codec::DecodeError> for Error {
    fn from(e: crate::codec::DecodeError) -> Self {
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
