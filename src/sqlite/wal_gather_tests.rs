//! The gathered WAL: what other connections see, spills, rollbacks,
//! rewritten frames, and the number of writes.

use super::super::temp_vfs;
use rusqlite::{Connection, OpenFlags};
use std::cell::Cell;
use std::path::PathBuf;

thread_local! {
    /// Writes handed to the platform VFS on this thread.
    pub static SENT: Cell<usize> = const { Cell::new(0) };
}

fn sent() -> usize {
    SENT.with(Cell::get)
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> (Dir, String) {
    let d = std::env::temp_dir().join(format!("wal-gather-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let db = d.join("g.db").to_string_lossy().into_owned();
    (Dir(d), db)
}

fn gathered(path: &str) -> Connection {
    temp_vfs::register().unwrap();
    let c =
        Connection::open_with_flags_and_vfs(path, OpenFlags::default(), temp_vfs::NAME).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0;
         CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT, w TEXT);
         CREATE INDEX IF NOT EXISTS t_v ON t(v); CREATE INDEX IF NOT EXISTS t_w ON t(w);",
    )
    .unwrap();
    c
}

fn count(c: &Connection) -> (i64, i64) {
    c.query_row("SELECT count(*), coalesce(sum(id), 0) FROM t", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
}

#[test]
fn a_commit_is_one_write_and_another_connection_sees_it_at_once() {
    let (_d, path) = dir("commit");
    let c = gathered(&path);
    // Another handle on the platform's own VFS, as another process has.
    let other = Connection::open(&path).unwrap();
    for i in 1..=50i64 {
        let before = sent();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        c.execute(
            "INSERT INTO t VALUES (?1, hex(randomblob(40)), hex(randomblob(40)))",
            [i],
        )
        .unwrap();
        c.execute_batch("COMMIT").unwrap();
        // Three pages (the table, two indexes) at least, six writes
        // unbuffered; gathered, the run goes as one.
        assert_eq!(sent() - before, 1, "commit {i}");
        assert_eq!(count(&other), (i, i * (i + 1) / 2), "after commit {i}");
    }
    let ok: String = other
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_large_commit_goes_in_runs_the_platform_writes_whole() {
    let (_d, path) = dir("large");
    let c = gathered(&path);
    let other = Connection::open(&path).unwrap();
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    for i in 1..=3000i64 {
        c.execute(
            "INSERT INTO t VALUES (?1, hex(randomblob(100)), hex(randomblob(100)))",
            [i],
        )
        .unwrap();
    }
    let before = sent();
    c.execute_batch("COMMIT").unwrap();
    let frames: i64 = c
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
        .unwrap();
    // Hundreds of frames, up to 31 to a run (4,120 bytes each, under 128
    // KiB): more runs when the page cache spilled and the commit rewrote
    // spilled frames in place (another test's heap limit, process-wide,
    // can make it spill).
    assert!(frames > 200, "{frames} frames");
    let runs = (sent() - before) as i64;
    assert!(runs < frames, "{runs} writes for {frames} frames");
    assert_eq!(count(&other), (3000, 3000 * 3001 / 2));
}

#[test]
fn a_spilled_transaction_commits_or_rolls_back_whole() {
    let (_d, path) = dir("spill");
    let c = gathered(&path);
    let other = Connection::open(&path).unwrap();
    // A page cache of 10 pages: a 2,000-row transaction spills frames to
    // the WAL before its commit, and rewrites some of them in place.
    c.execute_batch("PRAGMA cache_size=10").unwrap();
    let fill = |first: i64| {
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        for i in first..first + 2000 {
            c.execute(
                "INSERT INTO t VALUES (?1, hex(randomblob(60)), hex(randomblob(60)))",
                [i],
            )
            .unwrap();
        }
        for i in first..first + 2000 {
            if i % 7 == 0 {
                c.execute("UPDATE t SET v = hex(randomblob(60)) WHERE id = ?1", [i])
                    .unwrap();
            }
        }
    };
    fill(1);
    // Not committed: nothing of it visible.
    assert_eq!(count(&other), (0, 0));
    c.execute_batch("ROLLBACK").unwrap();
    assert_eq!(count(&other), (0, 0));
    assert_eq!(count(&c), (0, 0));
    fill(10_001);
    c.execute_batch("COMMIT").unwrap();
    let want = (2000, (10_001..12_001).sum::<i64>());
    assert_eq!(count(&other), want);
    assert_eq!(count(&c), want);
    for conn in [&c, &other] {
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }
    // A checkpoint copies what the gathered runs wrote; a new connection
    // reads it from the database file.
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(c);
    drop(other);
    assert_eq!(count(&Connection::open(&path).unwrap()), want);
}

#[test]
fn the_wal_restarts_after_a_checkpoint_and_another_writer_interleaves() {
    let (_d, path) = dir("restart");
    let c = gathered(&path);
    let other = Connection::open(&path).unwrap();
    other
        .busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let mut n = 0i64;
    let mut sum = 0i64;
    for round in 0..20 {
        for _ in 0..5 {
            n += 1;
            sum += n;
            let w = if n % 2 == 0 { &c } else { &other };
            w.execute("INSERT INTO t VALUES (?1, 'x', 'y')", [n])
                .unwrap();
        }
        if round % 4 == 3 {
            // The next commit writes the WAL from its start again.
            c.execute_batch("PRAGMA wal_checkpoint(RESTART)").unwrap();
        }
        assert_eq!(count(&other), (n, sum));
        assert_eq!(count(&c), (n, sum));
    }
    drop(c);
    drop(other);
    let fresh = Connection::open(&path).unwrap();
    assert_eq!(count(&fresh), (n, sum));
    let ok: String = fresh
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}
