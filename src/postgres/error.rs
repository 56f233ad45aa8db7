//! PostgreSQL's errors in the crate's vocabulary (`crate::core::error`): sqlx's
//! errors mapped to coded errors (SQLSTATE, pool and connection failures,
//! a pooler that moved the session), the row-write form a push rejects, and
//! the checks callers make on them (connection lost, constraint).

use crate::core::error::Error;

/// The code of a call on a transaction an earlier error aborted.
pub use crate::core::error::TX_ABORTED;

/// The code of an error that says a pooler broke an assumption of the
/// storage's `pooling` setting.
pub const POOLER: &str = "ERR_SYNCULAR_POOLER";

/// What [`POOLER`] errors say, naming the setting.
pub const MOVED: &str = "the connection's server session changed between transactions, as a \
connection pooler in transaction mode (PgBouncer pool_mode = transaction, Supavisor's port 6543, \
Neon's -pooler endpoint) does; open the storage with pooling: 'transaction' (or pgbouncer=true in the url)";

/// The code of an error that ended the connection (it is closed, never
/// pooled again).
pub const CONNECTION_LOST: &str = "PG_CONNECTION";

/// True for an error that says the connection is gone (it died while idle,
/// the server restarted or ended the session), not that the statement
/// failed: the call may run again on another connection.
pub fn is_connection_lost(e: &Error) -> bool {
    match e.primary() {
        Error::Engine { code, .. } => {
            code == CONNECTION_LOST
                || code.starts_with("08")
                || matches!(code.as_str(), "57P01" | "57P02" | "57P03")
        }
        _ => false,
    }
}

/// The SQLSTATE of a database error.
pub fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// Integrity constraint violations (class 23).
pub fn is_constraint(e: &sqlx::Error) -> bool {
    sqlstate(e).is_some_and(|c| c.starts_with("23"))
}

/// Raw engine errors keep PostgreSQL's message (the fence function's text
/// is the message) and carry the SQLSTATE as their code.
pub fn map_err(e: sqlx::Error) -> Error {
    match &e {
        // PostgreSQL text cannot hold U+0000 (22021) and refuses
        // characters its encoding lacks (22P05): the caller's value is the
        // problem, whichever statement met it.
        sqlx::Error::Database(d)
            if matches!(d.code().as_deref(), Some("22021" | "22P05")) =>
        {
            Error::invalid(format!(
                "a text value cannot be stored in PostgreSQL: {} (U+0000 is not allowed in PostgreSQL text)",
                d.message()
            ))
        }
        // A statement this connection prepared is missing (26000) or its
        // name is taken (42P05): the server session changed between
        // transactions, which only a pooler in transaction mode does.
        sqlx::Error::Database(d)
            if matches!(d.code().as_deref(), Some("26000" | "42P05"))
                && d.message().contains("sqlx_s_") =>
        {
            Error::plain(POOLER, format!("{}: {MOVED}", d.message()))
        }
        // A statement (COMMIT's probe among them) in a transaction an
        // earlier error aborted: nothing of it can be committed.
        sqlx::Error::Database(d) if d.code().as_deref() == Some("25P02") => Error::plain(
            TX_ABORTED,
            format!(
                "the transaction was aborted by an earlier error and is rolled back; nothing of it is committed ({})",
                d.message()
            ),
        ),
        // A connection exception sent as an error rather than by closing
        // the socket: a pooler whose server session ended (PgBouncer's
        // "server conn crashed?", 08P01) closes the client's too.
        sqlx::Error::Database(d) if d.code().is_some_and(|c| c.starts_with("08")) => {
            Error::Engine {
                code: CONNECTION_LOST.into(),
                message: format!(
                    "the connection to PostgreSQL failed: {} [SQLSTATE {}]",
                    d.message(),
                    d.code().unwrap_or_default()
                ),
            }
        }
        sqlx::Error::Database(d) => Error::Engine {
            code: d
                .code()
                .map(|c| c.into_owned())
                .unwrap_or_else(|| "PG_ERROR".into()),
            message: d.message().to_owned(),
        },
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => Error::plain(
            "ERR_SYNCULAR_CORRUPT_VALUE",
            format!("unexpected stored value: {e}"),
        ),
        sqlx::Error::PoolTimedOut => Error::Engine {
            code: "PG_POOL_TIMEOUT".into(),
            message: e.to_string(),
        },
        sqlx::Error::PoolClosed => Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed"),
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => Error::Engine {
            code: CONNECTION_LOST.into(),
            message: format!("the connection to PostgreSQL failed: {e}"),
        },
        _ => Error::Engine {
            code: "PG_ERROR".into(),
            message: e.to_string(),
        },
    }
}

/// A constraint error raised by a row write, for push rejection; a data
/// error (class 22: a value the column type cannot hold) is the payload's
/// fault, a `DecodeError` as the codec's own checks give on SQLite.
pub fn row_write_err(e: sqlx::Error, op_index: Option<u32>) -> Error {
    if let Some(code) = sqlstate(&e).filter(|c| c.starts_with("22")) {
        let message = match &e {
            sqlx::Error::Database(d) => d.message().to_owned(),
            _ => e.to_string(),
        };
        let at = op_index.map_or(String::new(), |i| format!(" (operation {i})"));
        return Error::Decode(format!(
            "row value cannot be stored in PostgreSQL{at}: {message} [SQLSTATE {code}]"
        ));
    }
    if is_constraint(&e) {
        let cause = match &e {
            sqlx::Error::Database(d) => d.message().to_owned(),
            _ => e.to_string(),
        };
        Error::Constraint { op_index, cause }
    } else {
        map_err(e)
    }
}

/// A failed connection attempt to `at`: refused (`PG_CONNECT_REFUSED`),
/// otherwise unreachable (`PG_CONNECT_FAILED`), or rejected by the server
/// (its SQLSTATE: `28P01` a wrong password, `28000` an unknown role,
/// `3D000` an unknown database), each with sqlx's cause in the message.
pub fn connect_error(e: sqlx::Error, at: &str) -> Error {
    match &e {
        sqlx::Error::Io(io) => Error::Engine {
            code: if io.kind() == std::io::ErrorKind::ConnectionRefused {
                "PG_CONNECT_REFUSED"
            } else {
                "PG_CONNECT_FAILED"
            }
            .into(),
            message: format!("cannot connect to PostgreSQL at {at}: {io}"),
        },
        sqlx::Error::Database(d) => Error::Engine {
            code: d
                .code()
                .map(|c| c.into_owned())
                .unwrap_or_else(|| "PG_ERROR".into()),
            message: if d.message().contains("unsupported startup parameter") {
                // PgBouncer's answer to a parameter it does not track. The
                // storage sends none of its own beyond application_name.
                format!(
                    "the server or pooler at {at} rejected the connection: {} (a pooler such as PgBouncer refuses startup parameters it does not track: remove it from the url, or list it in the pooler's ignore_startup_parameters)",
                    d.message()
                )
            } else {
                format!(
                    "PostgreSQL at {at} rejected the connection: {}",
                    d.message()
                )
            },
        },
        _ => Error::Engine {
            code: "PG_CONNECT_FAILED".into(),
            message: format!("cannot connect to PostgreSQL at {at}: {e}"),
        },
    }
}
