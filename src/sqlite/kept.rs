//! A connection with the statements it runs often kept prepared, each in a
//! slot of its own.
//!
//! rusqlite's statement cache is an LRU keyed by the statement's text:
//! every use trims and hashes the text to find the statement, copies the
//! text into a new `Arc<str>`, and hashes it again to put the statement
//! back, allocating a list node each way (23k instructions of a one-op
//! push through upstream's handler, issue 50). Here a statement is found by a number fixed
//! where it is written: [`kept!`] gives each call site a `static` [`Site`]
//! numbered on first use, and a row table's statements are numbered by the
//! table's position in the loaded schema and the statement's kind
//! ([`Conn::kept_row`]); a function running the literals its callers pass
//! (`conn::exec`) finds them by address ([`Conn::kept_literal`]). The number only picks the slot; the slot's text is
//! compared with the text asked for (a pointer and a length for a call
//! site's literal, the bytes for a row table's text, which a new schema
//! rebuilds), and a slot holding other text is prepared again. So a
//! number can never run the wrong statement.
//!
//! The statements are `sqlite3_prepare_v3`'s (PERSISTENT): a schema change
//! (ensureSchema, a dropped table, another process's migration) makes the
//! next step prepare the statement again by itself, or fail as a new
//! prepare would; rusqlite's cache keeps its statements the same way and
//! the engine never flushed it. A statement in use is out of its slot; a
//! second use of the same slot meanwhile prepares one of its own, which is
//! finalized after. The slots are dropped before the connection closes.
//! Bound values are left bound between uses (every use binds all
//! parameters again, or fails before it steps; they are SQLite's own
//! copies, never pointers into the caller's memory), so a kept statement
//! holds its last arguments, a row's payload at most, until its next use.

use rusqlite::{Connection, MappedRows, Params, PrepFlags, Row, Rows, Statement};
use std::cell::RefCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A call site of [`kept!`]: its slot number, given on first use.
pub struct Site(AtomicUsize);

/// Call sites numbered so far.
static SITES: AtomicUsize = AtomicUsize::new(0);

impl Site {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Site {
        Site(AtomicUsize::new(0))
    }

    fn number(&self) -> usize {
        let n = self.0.load(Relaxed);
        if n != 0 {
            return n - 1;
        }
        let mine = SITES.fetch_add(1, Relaxed) + 1;
        // Two threads numbering one site at once: one number wins, the
        // other is never used.
        match self.0.compare_exchange(0, mine, Relaxed, Relaxed) {
            Ok(_) => mine - 1,
            Err(won) => won - 1,
        }
    }
}

/// The kept statement of `$sql` (a `&'static str`) on `$conn` (a
/// [`Conn`]), in the slot of this call site.
macro_rules! kept {
    ($conn:expr, $sql:expr $(,)?) => {{
        static SITE: $crate::sqlite::kept::Site = $crate::sqlite::kept::Site::new();
        $conn.kept(&SITE, $sql)
    }};
}
pub(crate) use kept;

/// A row table's statements ([`Conn::kept_row`]).
#[derive(Clone, Copy)]
pub enum RowStmt {
    Select = 0,
    SelectScopes = 1,
    Upsert = 2,
    Delete = 3,
}
const ROW_STMTS: usize = 4;

enum Text {
    /// A call site's literal: the same text is the same pointer.
    Literal(&'static str),
    /// A row table's statement text, kept to compare with.
    Owned(Box<str>),
}

struct Slot {
    text: Text,
    /// Refers to the boxed connection of the [`Conn`] holding the slot,
    /// which outlives it (see `Conn`'s fields).
    stmt: Statement<'static>,
}

/// A connection and its kept statements. Dereferences to the connection.
pub struct Conn {
    // Declared first, so dropped first: every statement is finalized
    // before the connection closes (rusqlite closes with sqlite3_close,
    // which refuses a connection with statements left).
    sites: RefCell<Vec<Option<Slot>>>,
    rows: RefCell<Vec<Option<Slot>>>,
    /// [`Conn::kept_literal`]'s slots, found by the text's address.
    literals: RefCell<Vec<(usize, Option<Slot>)>>,
    /// Boxed: the statements refer to it, and a `Conn` moves (into the
    /// writer, in and out of the reader pool).
    conn: Box<Connection>,
}

// SAFETY: the statements refer only to the boxed connection they move
// with (a `Statement` is not `Send` because it borrows its connection);
// the connection itself is `Send`, and a `Conn` is used by one thread at a
// time as a `Connection` is (it is not `Sync`).
unsafe impl Send for Conn {}

impl Conn {
    pub fn new(conn: Connection) -> Conn {
        Conn {
            sites: RefCell::new(Vec::new()),
            rows: RefCell::new(Vec::new()),
            literals: RefCell::new(Vec::new()),
            conn: Box::new(conn),
        }
    }

    /// The connection, to configure (an authorizer, functions). It must
    /// stay this connection: replacing it would leave the kept statements
    /// on the one replaced.
    pub fn get_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The kept statement of `sql` for call site `site` (use [`kept!`]).
    pub fn kept(&self, site: &Site, sql: &'static str) -> rusqlite::Result<Stmt<'_>> {
        let n = site.number();
        let held = take(&self.sites, n).filter(|s| match s.text {
            Text::Literal(t) => std::ptr::eq(t, sql),
            Text::Owned(_) => false,
        });
        let slot = match held {
            Some(s) => s,
            None => self.prepare(sql, Text::Literal(sql))?,
        };
        Ok(Stmt {
            slot: Some(slot),
            home: Home::Slots(&self.sites),
            n,
        })
    }

    /// The kept statement of the literal `sql`, found by its address
    /// among the literals this connection has run this way: for a
    /// function that runs the statements its callers name (`conn::exec`'s
    /// control statements, a handful), where one call site would be one
    /// slot for them all.
    pub fn kept_literal(&self, sql: &'static str) -> rusqlite::Result<Stmt<'_>> {
        let key = sql.as_ptr() as usize;
        let n = {
            let mut all = self.literals.borrow_mut();
            match all.iter().position(|(k, _)| *k == key) {
                Some(n) => n,
                None => {
                    all.push((key, None));
                    all.len() - 1
                }
            }
        };
        let held = self.literals.borrow_mut()[n]
            .1
            .take()
            .filter(|s| matches!(s.text, Text::Literal(t) if std::ptr::eq(t, sql)));
        let slot = match held {
            Some(s) => s,
            None => self.prepare(sql, Text::Literal(sql))?,
        };
        Ok(Stmt {
            slot: Some(slot),
            home: Home::Literals(&self.literals),
            n,
        })
    }

    /// The kept statement `kind` of the row table at position `table` of
    /// the loaded schema, whose text is `sql`.
    pub fn kept_row(&self, table: usize, kind: RowStmt, sql: &str) -> rusqlite::Result<Stmt<'_>> {
        let n = table * ROW_STMTS + kind as usize;
        let held = take(&self.rows, n).filter(|s| match &s.text {
            Text::Owned(t) => **t == *sql,
            Text::Literal(_) => false,
        });
        let slot = match held {
            Some(s) => s,
            None => self.prepare(sql, Text::Owned(sql.into()))?,
        };
        Ok(Stmt {
            slot: Some(slot),
            home: Home::Slots(&self.rows),
            n,
        })
    }

    fn prepare(&self, sql: &str, text: Text) -> rusqlite::Result<Slot> {
        let stmt = self
            .conn
            .prepare_with_flags(sql, PrepFlags::SQLITE_PREPARE_PERSISTENT)?;
        // SAFETY: the statement borrows `*self.conn`, which is boxed (it
        // does not move with `self`) and outlives every slot (the slots
        // are dropped first); `Stmt` lends it for no longer than `&self`.
        let stmt = unsafe { std::mem::transmute::<Statement<'_>, Statement<'static>>(stmt) };
        Ok(Slot { text, stmt })
    }
}

fn take(slots: &RefCell<Vec<Option<Slot>>>, n: usize) -> Option<Slot> {
    slots.borrow_mut().get_mut(n).and_then(Option::take)
}

impl Deref for Conn {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// A kept statement lent out; back in its slot when dropped (finalized
/// instead if the slot was filled meanwhile).
pub struct Stmt<'c> {
    slot: Option<Slot>,
    home: Home<'c>,
    n: usize,
}

enum Home<'c> {
    Slots(&'c RefCell<Vec<Option<Slot>>>),
    Literals(&'c RefCell<Vec<(usize, Option<Slot>)>>),
}

impl<'c> Deref for Stmt<'c> {
    type Target = Statement<'c>;

    fn deref(&self) -> &Statement<'c> {
        // Shortening the lifetime of a shared reference's statement is
        // what covariance allows.
        &self.slot.as_ref().expect("a lent statement").stmt
    }
}

/// The statement's `&mut self` members, forwarded: lending
/// `&mut Statement` would let two lent statements be swapped between
/// connections.
impl Stmt<'_> {
    fn stmt(&mut self) -> &mut Statement<'static> {
        &mut self.slot.as_mut().expect("a lent statement").stmt
    }

    pub fn execute<P: Params>(&mut self, params: P) -> rusqlite::Result<usize> {
        self.stmt().execute(params)
    }

    pub fn query<P: Params>(&mut self, params: P) -> rusqlite::Result<Rows<'_>> {
        self.stmt().query(params)
    }

    pub fn query_row<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.stmt().query_row(params, f)
    }

    pub fn query_map<T, P, F>(&mut self, params: P, f: F) -> rusqlite::Result<MappedRows<'_, F>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.stmt().query_map(params, f)
    }

    pub fn exists<P: Params>(&mut self, params: P) -> rusqlite::Result<bool> {
        self.stmt().exists(params)
    }
}

impl Drop for Stmt<'_> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let back = match self.home {
            Home::Slots(slots) => {
                let mut slots = slots.borrow_mut();
                if slots.len() <= self.n {
                    slots.resize_with(self.n + 1, || None);
                }
                put(&mut slots[self.n], slot)
            }
            Home::Literals(all) => put(&mut all.borrow_mut()[self.n].1, slot),
        };
        // The slot was filled meanwhile: this one is finalized, outside
        // the borrow.
        drop(back);
    }
}

/// Puts `slot` in `place` if it is empty; otherwise hands it back.
fn put(place: &mut Option<Slot>, slot: Slot) -> Option<Slot> {
    if place.is_none() {
        *place = Some(slot);
        None
    } else {
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Conn {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x');")
            .unwrap();
        Conn::new(c)
    }

    fn count(c: &Conn) -> i64 {
        kept!(c, "SELECT count(*) FROM t")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .unwrap()
    }

    #[test]
    fn a_site_keeps_its_statement_and_a_nested_use_gets_its_own() {
        let c = conn();
        assert_eq!(count(&c), 1);
        let held = kept!(c, "SELECT count(*) FROM t").unwrap();
        // The same site while its statement is lent: one of its own.
        assert_eq!(count(&c), 1);
        assert_eq!(count(&c), 1);
        drop(held);
        assert_eq!(count(&c), 1);
    }

    #[test]
    fn kept_statements_follow_schema_changes() {
        let c = conn();
        let first = |c: &Conn| -> rusqlite::Result<String> {
            kept!(c, "SELECT * FROM t").and_then(|mut st| {
                st.query_row([], |r| Ok(format!("{} columns", r.as_ref().column_count())))
            })
        };
        assert_eq!(first(&c).unwrap(), "2 columns");
        c.execute_batch("ALTER TABLE t ADD COLUMN c").unwrap();
        assert_eq!(first(&c).unwrap(), "3 columns");
        c.execute_batch("DROP TABLE t").unwrap();
        assert!(
            first(&c).is_err(),
            "a dropped table fails as a new prepare would"
        );
        c.execute_batch("CREATE TABLE t (z); INSERT INTO t VALUES (9);")
            .unwrap();
        assert_eq!(first(&c).unwrap(), "1 columns");
        assert_eq!(count(&c), 1);
    }

    #[test]
    fn a_row_slot_holding_other_text_is_prepared_again() {
        let c = conn();
        let one = "SELECT a FROM t".to_string();
        let other = "SELECT b FROM t".to_string();
        let read = |sql: &str| -> String {
            let mut st = c.kept_row(0, RowStmt::Select, sql).unwrap();
            st.query_row([], |r| r.get::<_, rusqlite::types::Value>(0))
                .map(|v| format!("{v:?}"))
                .unwrap()
        };
        assert_eq!(read(&one), "Integer(1)");
        // Same slot, other text (a schema loaded since): never the old statement.
        assert_eq!(read(&other), r#"Text("x")"#);
        assert_eq!(read(&one), "Integer(1)");
    }

    #[test]
    fn literals_are_told_apart_by_address() {
        let c = conn();
        const A: &str = "SELECT 1";
        const B: &str = "SELECT 2";
        let run = |sql: &'static str| -> i64 {
            c.kept_literal(sql)
                .and_then(|mut st| st.query_row([], |r| r.get(0)))
                .unwrap()
        };
        for _ in 0..3 {
            assert_eq!((run(A), run(B)), (1, 2));
        }
    }

    #[test]
    fn a_moved_connection_keeps_its_statements_and_closes() {
        let c = conn();
        assert_eq!(count(&c), 1);
        let mut moved = vec![c];
        let c = moved.pop().unwrap();
        // Still usable after the move: the statements refer to the boxed
        // connection, not to where the `Conn` was.
        assert_eq!(count(&c), 1);
        drop(c);
    }
}
