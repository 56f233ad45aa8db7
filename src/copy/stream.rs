//! One binary `COPY … FROM STDIN` into a target table: SQLite rows in,
//! sent to the server a megabyte at a time, progress reported as it goes.
//! The snapshot copy and the catch-up passes both load through it.

use super::catalog::Table;
use super::target::pg;
use super::value::{encode, tuple, COPY_HEADER, COPY_TRAILER};
use super::{sq, Progress};
use crate::core::error::{Error, Result};
use sqlx::postgres::PgCopyIn;
use sqlx::PgConnection;
use std::time::{Duration, Instant};

/// Bytes of `COPY` data sent to the server at a time.
const CHUNK: usize = 1 << 20;
/// How often progress is reported while a table loads.
const TICK: Duration = Duration::from_millis(250);

pub struct Stream<'a> {
    rt: &'a tokio::runtime::Runtime,
    copy: PgCopyIn<&'a mut PgConnection>,
    buf: Vec<u8>,
    pub rows: u64,
    pub bytes: u64,
    last: Instant,
}

impl<'a> Stream<'a> {
    /// Starts `COPY` into `into` (a table, or a temporary one shaped like
    /// `t`) over `t`'s columns.
    pub fn open(
        rt: &'a tokio::runtime::Runtime, conn: &'a mut PgConnection, t: &Table, into: &str,
    ) -> Result<Stream<'a>> {
        let sql = format!(
            "COPY {into} ({}) FROM STDIN (FORMAT binary)",
            t.column_list()
        );
        let copy = rt.block_on(conn.copy_in_raw(&sql)).map_err(pg)?;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        buf.extend_from_slice(COPY_HEADER);
        Ok(Stream {
            rt,
            copy,
            buf,
            rows: 0,
            bytes: 0,
            last: Instant::now(),
        })
    }

    /// Every row `rows` yields (a query over `t.column_list()`).
    pub fn rows(
        &mut self, t: &Table, rows: &mut rusqlite::Rows<'_>, p: &mut Progress,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<()> {
        while let Some(r) = rows.next().map_err(sq)? {
            tuple(&mut self.buf, t.columns.len());
            for (i, col) in t.columns.iter().enumerate() {
                let v = r.get_ref(i).map_err(sq)?;
                encode(&mut self.buf, col.kind, v)
                    .map_err(|why| value_error(t, &col.name, r, &why))?;
            }
            self.rows += 1;
            p.rows += 1;
            if self.buf.len() >= CHUNK {
                self.send(p)?;
                if self.last.elapsed() >= TICK {
                    self.last = Instant::now();
                    progress(p);
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, p: &mut Progress) -> Result<()> {
        self.bytes += self.buf.len() as u64;
        p.bytes += self.buf.len() as u64;
        let chunk = std::mem::take(&mut self.buf);
        self.rt
            .block_on(self.copy.send(chunk.as_slice()))
            .map_err(pg)?;
        self.buf = chunk;
        self.buf.clear();
        Ok(())
    }

    /// Ends the `COPY`; answers the rows and bytes sent.
    pub fn finish(mut self, p: &mut Progress) -> Result<(u64, u64)> {
        self.buf.extend_from_slice(COPY_TRAILER);
        self.send(p)?;
        self.rt.block_on(self.copy.finish()).map_err(pg)?;
        Ok((self.rows, self.bytes))
    }
}

/// `ERR_SYNCULAR_COPY_VALUE`, naming the table, the column and the row's key.
pub(super) fn value_error(t: &Table, column: &str, r: &rusqlite::Row<'_>, why: &str) -> Error {
    let key: Vec<String> = t
        .key
        .iter()
        .map(|&i| {
            let v = match r.get_ref(i) {
                Ok(rusqlite::types::ValueRef::Text(b)) => String::from_utf8_lossy(b).into_owned(),
                Ok(rusqlite::types::ValueRef::Integer(i)) => i.to_string(),
                Ok(other) => format!("{other:?}"),
                Err(e) => e.to_string(),
            };
            format!("{} {:?}", t.columns[i].name, v)
        })
        .collect();
    Error::plain(
        "ERR_SYNCULAR_COPY_VALUE",
        format!(
            "cannot copy {}.{} of the row {}: {why}",
            t.name,
            column,
            key.join(", ")
        ),
    )
}
