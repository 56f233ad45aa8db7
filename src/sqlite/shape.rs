//! Which registered queries may run on the calling thread (the host's event
//! loop), judged from the program SQLite compiles for them.
//!
//! A run on the calling thread stops within its stall budget at SQLite's
//! progress checks and in the storage's own functions (`super::meter`).
//! Between two such checks SQLite runs one straight run of instructions,
//! and an operator that is not a function call (arithmetic, `CAST`, a
//! comparison, `||`, a column read) costs time linear in its values, up to
//! a few milliseconds on a 1 MiB value. So a query runs there only when no
//! straight run of its program holds more than [`NOW_MAX_HEAVY`] such
//! instructions; any other runs on a worker from the start.

use rusqlite::Connection;

/// The most value-touching instructions one straight run of a program may
/// hold for the query to run on the calling thread: about 50 ms at the
/// worst measured rate (a 1 MiB string of digits made a number).
pub const NOW_MAX_HEAVY: usize = 12;

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
        let conn = Connection::open_in_memory().unwrap();
        super::super::isolation::register(&conn).unwrap();
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
}
