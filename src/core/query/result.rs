//! The size bounds of one registered query's result (`maxResultRows`,
//! `maxResultBytes`), counted while the rows are produced: a query that
//! would return more stops at the first row past a bound, before that row
//! is kept, with [`TOO_LARGE`].
//!
//! A result's size, as counted here: [`CELL`] bytes per cell, plus the
//! UTF-8 length of each text and the length of each BLOB: what the
//! engine-neutral rows hold in memory, and about what the JS objects made
//! from them take.

use crate::core::error::Error;
use crate::core::model::Cell;

/// Code of a result refused for its size.
pub const TOO_LARGE: &str = "ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE";

/// `maxResultRows` when the host gives none: a hundred times a large page
/// of any sync protocol, and what the JS thread turns into objects within
/// a few tens of milliseconds, spread over several event-loop turns.
pub const DEFAULT_MAX_ROWS: u64 = 100_000;
/// `maxResultBytes` when the host gives none (64 MiB): well above any
/// result a request should carry, and small enough that a few concurrent
/// refused requests cannot take the process's memory.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// The two bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub rows: u64,
    pub bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            rows: DEFAULT_MAX_ROWS,
            bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// The counted size of a cell without its text or bytes (one `Cell`).
pub const CELL: u64 = std::mem::size_of::<Cell>() as u64;

/// The counted size of one cell.
pub fn cell_bytes(c: &Cell) -> u64 {
    CELL + match c {
        Cell::Text(s) => s.len() as u64,
        Cell::Blob(b) => b.len() as u64,
        Cell::Null | Cell::Integer(_) | Cell::Real(_) => 0,
    }
}

/// The rows and bytes of a result so far, against its limits.
#[derive(Debug)]
pub struct Tally {
    limits: Limits,
    rows: u64,
    bytes: u64,
}

impl Tally {
    pub fn new(limits: Limits) -> Tally {
        Tally {
            limits,
            rows: 0,
            bytes: 0,
        }
    }

    /// Counts one more row, before it is kept; an error when it would take
    /// the result past a bound.
    pub fn row(&mut self) -> Result<(), Error> {
        self.rows += 1;
        if self.rows > self.limits.rows {
            return Err(too_many_rows(self.limits.rows));
        }
        Ok(())
    }

    /// Counts `n` more bytes of the current row, as its cells are read.
    pub fn bytes(&mut self, n: u64) -> Result<(), Error> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.limits.bytes {
            return Err(too_many_bytes(self.limits.bytes));
        }
        Ok(())
    }

    /// The bytes still allowed.
    pub fn bytes_left(&self) -> u64 {
        self.limits.bytes.saturating_sub(self.bytes)
    }
}

pub fn too_many_rows(limit: u64) -> Error {
    Error::plain(
        TOO_LARGE,
        format!("registered query result has more than {limit} rows (maxResultRows)"),
    )
}

pub fn too_many_bytes(limit: u64) -> Error {
    Error::plain(
        TOO_LARGE,
        format!("registered query result is larger than {limit} bytes (maxResultBytes)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_stops_at_the_first_row_or_byte_past_its_bounds() {
        assert_eq!(CELL, 32);
        let mut t = Tally::new(Limits {
            rows: 2,
            bytes: 100,
        });
        t.row().unwrap();
        t.bytes(cell_bytes(&Cell::Text("abcd".into()))).unwrap();
        t.row().unwrap();
        t.bytes(cell_bytes(&Cell::Integer(1))).unwrap();
        assert_eq!(t.bytes_left(), 100 - 36 - 32);
        let e = t.bytes(cell_bytes(&Cell::Blob(vec![0; 1]))).unwrap_err();
        assert!(matches!(e, Error::Plain { code, .. } if code == TOO_LARGE));
        let e = t.row().unwrap_err();
        assert!(format!("{e:?}").contains("maxResultRows"));
    }
}
