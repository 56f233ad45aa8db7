//! What a registered query's program may do between two checks of its
//! clock, judged from the program SQLite compiles for it.
//!
//! A run stops at SQLite's progress checks and in the storage's own
//! functions (`super::meter`). The progress handler runs only at the
//! instructions that end a loop, once [`super::isolation::PROGRESS_OPS`]
//! instructions have passed since the last check; between two checks SQLite
//! runs up to that many instructions plus one straight run of the program.
//! An operator that is not a function call (arithmetic, `CAST`, a
//! comparison, `||`, a column read) costs time linear in its values: up to
//! 3 ns a byte (a string of digits made a number), so 3 ms on a 1 MiB
//! value. Two bounds follow from the heaviest straight run `S`:
//! - every value the query makes or reads is at most [`value_limit`]`(S)`
//!   bytes, so the work between two checks is at most [`WORK_BYTES`] of
//!   such bytes (about 50 ms) wherever it runs;
//! - a query runs on the calling thread only when `S` is at most
//!   [`NOW_MAX_HEAVY`] (any other runs on a worker from the start), and
//!   there under a tighter value limit, [`now_value_limit`]`(S)`, that keeps
//!   the work between two checks within [`NOW_WORK_BYTES`] (a few ms): a
//!   value over it sends the run to a worker, which answers the same.

use rusqlite::Connection;

/// The most value-touching instructions one straight run of a program may
/// hold for the query to run on the calling thread: about 50 ms at the
/// worst measured rate (a 1 MiB string of digits made a number).
pub const NOW_MAX_HEAVY: usize = 12;

/// The most bytes the value-touching instructions between two checks may
/// touch: about 50 ms at the worst measured rate (3 ns a byte).
pub const WORK_BYTES: i64 = 16 << 20;

/// The smallest value limit a query may run under: a program whose
/// straight runs are so long that its values would have to be smaller
/// (over 4,000 value-touching instructions without a loop) is refused.
pub const MIN_VALUE: i32 = 4 << 10;

/// The largest string or BLOB a registered query whose heaviest straight
/// run holds `heavy` value-touching instructions may make or read: what
/// keeps the work between two checks within [`WORK_BYTES`], at most
/// `max` (1 MiB). `None` when that is under [`MIN_VALUE`].
pub fn value_limit(heavy: usize, max: i32) -> Option<i32> {
    let between = super::isolation::PROGRESS_OPS as i64 + heavy as i64;
    let bytes = (WORK_BYTES / between).min(max as i64) as i32;
    (bytes >= MIN_VALUE).then_some(bytes)
}

/// The same on the calling thread: about 6 ms at the worst measured rate.
pub const NOW_WORK_BYTES: i64 = 2 << 20;

/// The value limit of a run on the calling thread ([`value_limit`] with
/// its own budget and check interval).
pub fn now_value_limit(heavy: usize, max: i32) -> i32 {
    let between = super::isolation::PROGRESS_OPS_NOW as i64 + heavy as i64;
    (NOW_WORK_BYTES / between).min(max as i64) as i32
}

/// Instructions that SQLite's progress handler runs after (the ends of
/// loops and jumps back).
const CHECKS: &[&str] = &[
    "Goto",
    "Gosub",
    "Next",
    "Prev",
    "VNext",
    "SorterNext",
    "RowSetRead",
    "Program",
];

/// Instructions whose cost can grow with the values they touch.
const HEAVY: &[&str] = &[
    "Add",
    "Subtract",
    "Multiply",
    "Divide",
    "Remainder",
    "BitAnd",
    "BitOr",
    "ShiftLeft",
    "ShiftRight",
    "BitNot",
    "Concat",
    "Cast",
    "MustBeInt",
    "RealAffinity",
    "Affinity",
    "Eq",
    "Ne",
    "Lt",
    "Le",
    "Gt",
    "Ge",
    "Compare",
    "SeekGE",
    "SeekGT",
    "SeekLE",
    "SeekLT",
    "IdxGE",
    "IdxGT",
    "IdxLE",
    "IdxLT",
    "Column",
    "Copy",
    "If",
    "IfNot",
    "IsTrue",
    "MakeRecord",
    "IdxInsert",
    "SorterInsert",
    "AggStep",
    "AggStep1",
    "AggValue",
    "AggFinal",
    "AggInverse",
];

/// The most value-touching instructions in one straight run of the
/// program compiled for `text` (a function of the storage's own checks
/// its own clock and does not count). `None` when it does not compile as
/// EXPLAIN; the query's own compile then reports why.
pub fn heaviest_run(conn: &Connection, text: &str) -> Option<usize> {
    let mut st = conn.prepare(&format!("EXPLAIN {text}")).ok()?;
    let mut rows = st.raw_query();
    let (mut run, mut most) = (0usize, 0usize);
    while let Ok(Some(r)) = rows.next() {
        let op: String = r.get(1).ok()?;
        let op = op.as_str();
        if CHECKS.contains(&op) {
            run = 0;
            continue;
        }
        let heavy = match op {
            "Function" | "PureFunc" => {
                let p4: Option<String> = r.get(5).ok()?;
                let name = p4
                    .as_deref()
                    .and_then(|p| p.split('(').next())
                    .unwrap_or("");
                !super::checked_fns::checks_itself(name)
            }
            _ => HEAVY.contains(&op),
        };
        if heavy {
            run += 1;
            most = most.max(run);
        }
    }
    Some(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_and_aggregate_queries_fit_rows_of_arithmetic_do_not() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::isolation::register(&mut conn).unwrap();
        conn.execute_batch(
            "CREATE TABLE t(p TEXT, id TEXT, title TEXT, project_id TEXT, n INTEGER);
             CREATE INDEX t_p ON t(p, id); CREATE INDEX t_pp ON t(p, project_id);",
        )
        .unwrap();
        let run = |sql: &str| heaviest_run(&conn, sql).unwrap();
        for sql in [
            "SELECT * FROM (SELECT id, title FROM t WHERE p = 'x' AND id = ?) AS q LIMIT ?",
            "SELECT * FROM (SELECT count(*) AS c, sum(n) AS s FROM t WHERE p = 'x' AND project_id = ?) AS q LIMIT ?",
            "SELECT id, instr(title, 'a'), length(title), title LIKE '%x%' FROM t WHERE p = 'x'",
        ] {
            assert!(run(sql) <= NOW_MAX_HEAVY, "{sql}: {}", run(sql));
        }
        let cols: Vec<String> = (0..40).map(|i| format!("v + {i}")).collect();
        let wide = format!(
            "WITH m AS MATERIALIZED (SELECT ? AS v) SELECT {} FROM m",
            cols.join(", ")
        );
        assert!(run(&wide) > NOW_MAX_HEAVY, "{}", run(&wide));
    }

    #[test]
    fn values_shrink_as_straight_runs_grow() {
        let max = 1 << 20;
        // A point query keeps most of the 1 MiB.
        let light = value_limit(4, max).unwrap();
        assert!(light >= 400 << 10, "{light}");
        // The work between two checks stays within the budget.
        for heavy in [0, 12, 40, 250, 1000, 4000] {
            let Some(v) = value_limit(heavy, max) else {
                panic!("{heavy} refused");
            };
            let between = super::super::isolation::PROGRESS_OPS as i64 + heavy as i64;
            assert!(between * v as i64 <= WORK_BYTES, "{heavy}: {v}");
        }
        assert!(value_limit(250, max).unwrap() < 64 << 10);
        assert_eq!(value_limit(0, 5000), Some(5000));
        assert_eq!(value_limit(10_000, max), None);
        // The calling thread's is tighter, and keeps its own budget.
        for heavy in 0..=NOW_MAX_HEAVY {
            let now = now_value_limit(heavy, max);
            assert!(now <= value_limit(heavy, max).unwrap());
            assert!(now >= 16 << 10, "{heavy}: {now}");
            let between = super::super::isolation::PROGRESS_OPS_NOW as i64 + heavy as i64;
            assert!(between * now as i64 <= NOW_WORK_BYTES);
        }
    }
}
