//! The mark a move to PostgreSQL leaves in the SQLite file (docs/copy.md,
//! "The mark in the file"): after a copy's final pass the file refuses
//! every write to the sync tables, in every process, with
//! `ERR_SYNCULAR_MOVED` naming the target, until an operator clears it.
//!
//! The mark is one row of `sync_native_moved` (the target without its
//! password, and when) and, on every meta table the file holds, three
//! triggers (before insert, update and delete) that abort the statement
//! with the refusal's text. Triggers rather than a check the storage makes
//! before a write: they run inside the writing statement, so no write can
//! slip in between a check and its commit; they stop every writer of the
//! file (another host, the in-tree storage, the `sqlite3` shell); and a
//! file without them costs nothing per write. `conn::map_err` turns their
//! abort into the coded error. Reads, and upstream's stores on the same
//! file (blobs, segments, leases), go on.

use super::conn::{map_err, table_exists};
use super::storage::SqliteEngine;
use crate::core::error::Result;
use crate::core::meta_layout::TABLES;
use rusqlite::{Connection, OptionalExtension};
use std::time::{Duration, Instant};

/// The code of the refusal (and the prefix of the triggers' text).
pub const CODE: &str = "ERR_SYNCULAR_MOVED";
const TABLE: &str = "sync_native_moved";
const TRIGGER: &str = "sync_native_moved_";

/// The refusal's message: `to` is the target without its password.
pub fn message(to: &str) -> String {
    format!(
        "this storage's database was moved to {to}: writes are refused here; switch the host to that url (an operator moving back clears the mark: syncular-native-storage moved <file> --clear)"
    )
}

/// Where the file says it moved, and when (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub target: String,
    pub moved_at_ms: i64,
}

fn sql_string(out: &mut String, s: &str) {
    out.push('\'');
    out.push_str(&s.replace('\'', "''"));
    out.push('\'');
}

/// Marks the file moved to `to`, in the caller's write transaction (it
/// commits with it). A mark already there is replaced.
pub fn mark(c: &Connection, to: &str, at_ms: i64) -> Result<()> {
    clear(c)?;
    c.execute_batch(&format!(
        "CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), target TEXT NOT NULL, moved_at_ms INTEGER NOT NULL)"
    ))
    .map_err(map_err)?;
    c.execute(
        &format!("INSERT INTO {TABLE} (id, target, moved_at_ms) VALUES (1, ?1, ?2)"),
        rusqlite::params![to, at_ms],
    )
    .map_err(map_err)?;
    let mut text = String::new();
    sql_string(&mut text, &format!("{CODE}: {}", message(to)));
    for t in TABLES {
        if !table_exists(c, t.name)? {
            continue;
        }
        for op in ["INSERT", "UPDATE", "DELETE"] {
            c.execute_batch(&format!(
                "CREATE TRIGGER \"{TRIGGER}{}_{}\" BEFORE {op} ON \"{}\" BEGIN SELECT RAISE(ABORT, {text}); END",
                t.name,
                op.to_ascii_lowercase(),
                t.name
            ))
            .map_err(map_err)?;
        }
    }
    Ok(())
}

/// Removes the mark (the row and every trigger), in the caller's write
/// transaction; answers whether there was one.
pub fn clear(c: &Connection) -> Result<bool> {
    let names: Vec<String> = {
        let mut st = c
            .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND substr(name, 1, 18) = ?1")
            .map_err(map_err)?;
        let rows = st.query_map([TRIGGER], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
    };
    for n in &names {
        c.execute_batch(&format!("DROP TRIGGER \"{}\"", n.replace('"', "\"\"")))
            .map_err(map_err)?;
    }
    let had_table = table_exists(c, TABLE)?;
    if had_table {
        c.execute_batch(&format!("DROP TABLE {TABLE}"))
            .map_err(map_err)?;
    }
    Ok(had_table || !names.is_empty())
}

/// The mark, if the file has one.
pub fn read(c: &Connection) -> Result<Option<Mark>> {
    if !table_exists(c, TABLE)? {
        return Ok(None);
    }
    c.query_row(
        &format!("SELECT target, moved_at_ms FROM {TABLE} WHERE id = 1"),
        [],
        |r| {
            Ok(Mark {
                target: r.get(0)?,
                moved_at_ms: r.get(1)?,
            })
        },
    )
    .optional()
    .map_err(map_err)
}

impl SqliteEngine {
    /// The file's mark, read in a snapshot.
    pub fn moved_mark(&self) -> Result<Option<Mark>> {
        self.read_snapshot(|c| read(c))
    }

    /// Takes the write lock, waiting for another process's up to `wait`
    /// (retrying past the busy timeout); answers the lease.
    pub fn lock_waiting(&self, wait: Duration) -> Result<u32> {
        let deadline = Instant::now() + wait;
        loop {
            match self.lock_blocking(None) {
                Err(e) if e.is_busy() && Instant::now() < deadline => continue,
                out => return out,
            }
        }
    }

    /// Clears the mark under the write lock (an operator moving back to
    /// this file); answers whether there was one. A storage of this
    /// process that ran the final pass itself keeps refusing: open a new
    /// one.
    pub fn clear_moved(&self, wait: Duration) -> Result<bool> {
        let lease = self.lock_waiting(wait)?;
        let out = self.with_lease(lease, |held| clear(held.conn));
        let ended = self.unlock(lease, out.is_ok());
        let out = out?;
        ended?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::{Config, Location};

    fn write(e: &SqliteEngine, sql: &str) -> Result<()> {
        let id = e.lock_waiting(Duration::from_secs(5))?;
        let out = e.with_lease(id, |h| h.conn.execute_batch(sql).map_err(map_err));
        e.unlock(id, out.is_ok())?;
        out
    }

    /// Two storages on one file stand for two processes: one marks the
    /// file, the other's next write is refused; clearing lets it write.
    #[test]
    fn the_mark_refuses_every_writer_of_the_file_until_cleared() {
        let dir = std::env::temp_dir().join(format!(
            "syncular-moved-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db").to_string_lossy().into_owned();
        let host = SqliteEngine::new(Config::for_tests(Location::File(path.clone())));
        let mover = SqliteEngine::new(Config::for_tests(Location::File(path)));
        let upsert = "INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ('p', 1) \
                      ON CONFLICT (partition) DO UPDATE SET max_commit_seq = max_commit_seq + 1";
        write(&host, upsert).unwrap();
        assert_eq!(host.moved_mark().unwrap(), None);

        let id = mover.lock_waiting(Duration::from_secs(5)).unwrap();
        mover
            .with_lease(id, |h| mark(h.conn, "postgres://u@127.0.0.1/db", 7))
            .unwrap();
        mover.unlock(id, true).unwrap();

        for sql in [
            upsert,
            "DELETE FROM sync_partitions",
            "INSERT OR IGNORE INTO sync_clients (partition, client_id, actor_id, cursor, subscriptions, updated_at_ms) VALUES ('p', 'c', 'a', 0, '[]', 0)",
        ] {
            match write(&host, sql) {
                Err(crate::core::error::Error::Plain { code, message }) => {
                    assert_eq!(code, CODE);
                    assert!(message.contains("postgres://u@127.0.0.1/db"), "{message}");
                }
                other => panic!("{sql}: {other:?}"),
            }
        }
        // Reads go on, and the mark says where.
        let seq: i64 = host
            .read(|c| {
                c.query_row("SELECT max_commit_seq FROM sync_partitions", [], |r| {
                    r.get(0)
                })
                .map_err(map_err)
            })
            .unwrap();
        assert_eq!(seq, 1);
        assert_eq!(
            host.moved_mark().unwrap(),
            Some(Mark {
                target: "postgres://u@127.0.0.1/db".into(),
                moved_at_ms: 7
            })
        );

        assert!(mover.clear_moved(Duration::from_secs(5)).unwrap());
        assert!(!mover.clear_moved(Duration::from_secs(5)).unwrap());
        write(&host, upsert).unwrap();
        assert_eq!(host.moved_mark().unwrap(), None);
        host.close();
        mover.close();
        let _ = std::fs::remove_dir_all(dir);
    }
}
