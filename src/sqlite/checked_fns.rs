//! Checked forms of SQLite's built-in functions whose work grows with
//! their arguments (text, JSON, number and formatting functions): each
//! call first reads the registered query's clock (`super::meter`) and
//! charges the bytes of its arguments, then runs SQLite's own function on
//! a private in-memory connection of this thread, which has none of these
//! replacements, with the values bound as parameters. So the answer is
//! SQLite's own, to the byte and the JSON subtype, and a row that calls
//! such functions hundreds of times on 1 MiB values stops at the first
//! call past the query's limit instead of running every one (one call is
//! one VM instruction, and a row's result columns are one straight run of
//! instructions, which SQLite's progress handler never interrupts).
//!
//! JSON arguments: a text argument that carries SQLite's JSON subtype (the
//! result of another JSON function) is bound as `json(?n)`, so it reaches
//! the function as JSON, not as a string; a result's subtype is kept.
//!
//! Cost: a call binds its arguments on the private connection and steps
//! one cached statement there (about a microsecond). Not replaced: the
//! functions whose work does not grow with their arguments (`coalesce`,
//! `typeof`, `unicode`, `octet_length`, …), aggregates and window functions
//! (each step is one input row, between the progress handler's checks),
//! the table-valued `json_each` and `json_tree`, and the date and time
//! functions, whose `'now'` is fixed per step of the calling statement
//! (see the README's bounds section).

use super::meter;
use rusqlite::ffi;
use rusqlite::functions::{Context, FunctionFlags, SubType};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, CStr, CString};

/// SQLite's JSON subtype (`'J'`).
const JSON_SUBTYPE: u32 = 74;

/// (name, argument counts (-1: any), takes or makes JSON).
const CHECKED: &[(&str, &[c_int], bool)] = &[
    // text
    ("length", &[1], false),
    ("lower", &[1], false),
    ("upper", &[1], false),
    ("trim", &[1], false),
    ("ltrim", &[1], false),
    ("rtrim", &[1], false),
    ("substr", &[2, 3], false),
    ("substring", &[2, 3], false),
    ("hex", &[1], false),
    ("unhex", &[1, 2], false),
    ("quote", &[1], false),
    ("concat", &[-1], false),
    ("concat_ws", &[-1], false),
    ("printf", &[-1], false),
    ("format", &[-1], false),
    // numbers: a text argument is converted at a cost linear in its length
    ("abs", &[1], false),
    ("round", &[1, 2], false),
    ("sign", &[1], false),
    ("ceil", &[1], false),
    ("ceiling", &[1], false),
    ("floor", &[1], false),
    ("trunc", &[1], false),
    ("ln", &[1], false),
    ("log", &[1, 2], false),
    ("log10", &[1], false),
    ("log2", &[1], false),
    ("exp", &[1], false),
    ("pow", &[2], false),
    ("power", &[2], false),
    ("sqrt", &[1], false),
    ("mod", &[2], false),
    ("degrees", &[1], false),
    ("radians", &[1], false),
    ("sin", &[1], false),
    ("cos", &[1], false),
    ("tan", &[1], false),
    ("asin", &[1], false),
    ("acos", &[1], false),
    ("atan", &[1], false),
    ("atan2", &[2], false),
    // JSON
    ("json", &[1], true),
    ("jsonb", &[1], true),
    ("json_array", &[-1], true),
    ("jsonb_array", &[-1], true),
    ("json_array_length", &[1, 2], true),
    ("json_extract", &[-1], true),
    ("jsonb_extract", &[-1], true),
    ("json_insert", &[-1], true),
    ("jsonb_insert", &[-1], true),
    ("json_object", &[-1], true),
    ("jsonb_object", &[-1], true),
    ("json_remove", &[-1], true),
    ("jsonb_remove", &[-1], true),
    ("json_replace", &[-1], true),
    ("jsonb_replace", &[-1], true),
    ("json_set", &[-1], true),
    ("jsonb_set", &[-1], true),
    ("json_type", &[1, 2], true),
    ("json_valid", &[1, 2], true),
    ("json_quote", &[1], true),
    ("json_pretty", &[1, 2], true),
    ("json_error_position", &[1], true),
    ("->", &[2], true),
    ("->>", &[2], true),
];

/// Whether the function `name` (as SQLite names it in a program) reads the
/// query's clock itself: the checked forms here, and the storage's own
/// `like`, `glob`, `instr`, `replace` and trims.
pub fn checks_itself(name: &str) -> bool {
    matches!(
        name,
        "like" | "glob" | "instr" | "replace" | "trim" | "ltrim" | "rtrim"
    ) || CHECKED.iter().any(|(n, _, _)| *n == name)
}

/// Registers the checked forms on `conn` (each only where this SQLite has
/// the function).
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    for &(name, counts, json) in CHECKED {
        if !SIDE.with(|s| s.borrow_mut().exists(name)) {
            continue;
        }
        let mut flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
        if json {
            flags |= FunctionFlags::SQLITE_SUBTYPE | FunctionFlags::SQLITE_RESULT_SUBTYPE;
        }
        for &n in counts {
            conn.create_scalar_function(name, n, flags, move |ctx| call(ctx, name, json))?;
        }
    }
    Ok(())
}

fn call(ctx: &Context<'_>, name: &'static str, json: bool) -> rusqlite::Result<(Value, SubType)> {
    meter::enter()?;
    let mut bytes = 0;
    let mut mask = 0u128;
    for i in 0..ctx.len() {
        if let ValueRef::Text(b) | ValueRef::Blob(b) = ctx.get_raw(i) {
            bytes += b.len();
        }
        if json && i < 128 && ctx.get_subtype(i) == JSON_SUBTYPE {
            mask |= 1 << i;
        }
    }
    meter::work(bytes)?;
    // The value limit of the calling statement, which the private
    // connection mirrors (1 MiB while a registered query runs).
    let limit = meter::limits().value;
    SIDE.with(|s| s.borrow_mut().run(name, ctx, mask, limit))
}

thread_local! {
    static SIDE: RefCell<Side> = RefCell::new(Side::open());
}

/// This thread's private connection and its compiled calls.
struct Side {
    db: *mut ffi::sqlite3,
    calls: HashMap<(&'static str, usize, u128), *mut ffi::sqlite3_stmt>,
    limit: c_int,
}

impl Drop for Side {
    fn drop(&mut self) {
        // SAFETY: the statements and the connection are this struct's own.
        unsafe {
            for (_, st) in self.calls.drain() {
                ffi::sqlite3_finalize(st);
            }
            ffi::sqlite3_close(self.db);
        }
    }
}

fn text_of(db: *mut ffi::sqlite3) -> String {
    // SAFETY: SQLite returns a NUL-terminated message owned by `db`.
    unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
        .to_string_lossy()
        .into_owned()
}

fn failed(msg: impl Into<String>) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(msg.into().into())
}

impl Side {
    fn open() -> Side {
        let mut db = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READWRITE
            | ffi::SQLITE_OPEN_CREATE
            | ffi::SQLITE_OPEN_MEMORY
            | ffi::SQLITE_OPEN_NOMUTEX;
        // SAFETY: a fresh private connection; a failure leaves `db` to be
        // closed by Drop and every call failing with its message.
        unsafe {
            ffi::sqlite3_open_v2(c":memory:".as_ptr(), &mut db, flags, std::ptr::null());
        }
        Side {
            db,
            calls: HashMap::new(),
            limit: -1,
        }
    }

    /// Whether this SQLite has `name` (math functions are a build option).
    fn exists(&mut self, name: &'static str) -> bool {
        self.statement(name, 1, 0).is_ok()
            || self.statement(name, 2, 0).is_ok()
            || self.statement(name, 0, 0).is_ok()
    }

    fn statement(
        &mut self, name: &'static str, n: usize, mask: u128,
    ) -> rusqlite::Result<*mut ffi::sqlite3_stmt> {
        if let Some(&st) = self.calls.get(&(name, n, mask)) {
            return Ok(st);
        }
        let arg = |i: usize| {
            if mask & (1 << i) != 0 {
                format!("json(?{})", i + 1)
            } else {
                format!("?{}", i + 1)
            }
        };
        let sql = if name.starts_with('-') {
            format!("SELECT {} {name} {}", arg(0), arg(1))
        } else {
            let args: Vec<String> = (0..n).map(arg).collect();
            format!("SELECT {name}({})", args.join(", "))
        };
        let sql = CString::new(sql).map_err(|_| failed("function name"))?;
        let mut st = std::ptr::null_mut();
        // SAFETY: `sql` is NUL-terminated; `st` is kept until Drop.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(self.db, sql.as_ptr(), -1, &mut st, std::ptr::null_mut())
        };
        if rc != ffi::SQLITE_OK || st.is_null() {
            return Err(failed(text_of(self.db)));
        }
        if self.calls.len() >= 512 {
            for (_, old) in self.calls.drain() {
                // SAFETY: no statement of the map is running.
                unsafe { ffi::sqlite3_finalize(old) };
            }
        }
        self.calls.insert((name, n, mask), st);
        Ok(st)
    }

    fn run(
        &mut self, name: &'static str, ctx: &Context<'_>, mask: u128, limit: c_int,
    ) -> rusqlite::Result<(Value, SubType)> {
        if limit != self.limit {
            // SAFETY: setting a known limit on the private connection.
            unsafe { ffi::sqlite3_limit(self.db, ffi::SQLITE_LIMIT_LENGTH, limit) };
            self.limit = limit;
        }
        let st = self.statement(name, ctx.len(), mask)?;
        // SAFETY: `st` belongs to this thread's connection; every value
        // bound is copied (SQLITE_TRANSIENT); the result is copied out
        // before the statement is reset.
        unsafe {
            for i in 0..ctx.len() {
                let at = (i + 1) as c_int;
                let rc = match ctx.get_raw(i) {
                    ValueRef::Null => ffi::sqlite3_bind_null(st, at),
                    ValueRef::Integer(v) => ffi::sqlite3_bind_int64(st, at, v),
                    ValueRef::Real(v) => ffi::sqlite3_bind_double(st, at, v),
                    ValueRef::Text(t) => ffi::sqlite3_bind_text64(
                        st,
                        at,
                        t.as_ptr().cast(),
                        t.len() as u64,
                        ffi::SQLITE_TRANSIENT(),
                        ffi::SQLITE_UTF8 as u8,
                    ),
                    ValueRef::Blob(b) => ffi::sqlite3_bind_blob64(
                        st,
                        at,
                        b.as_ptr().cast(),
                        b.len() as u64,
                        ffi::SQLITE_TRANSIENT(),
                    ),
                };
                if rc != ffi::SQLITE_OK {
                    ffi::sqlite3_reset(st);
                    return Err(failed(text_of(self.db)));
                }
            }
            let rc = ffi::sqlite3_step(st);
            let out = if rc == ffi::SQLITE_ROW {
                let v = ffi::sqlite3_column_value(st, 0);
                let sub = ffi::sqlite3_value_subtype(v);
                let value = match ffi::sqlite3_value_type(v) {
                    ffi::SQLITE_INTEGER => Value::Integer(ffi::sqlite3_value_int64(v)),
                    ffi::SQLITE_FLOAT => Value::Real(ffi::sqlite3_value_double(v)),
                    ffi::SQLITE_TEXT => {
                        let p = ffi::sqlite3_value_text(v);
                        let n = ffi::sqlite3_value_bytes(v) as usize;
                        let b = if p.is_null() {
                            &[][..]
                        } else {
                            std::slice::from_raw_parts(p, n)
                        };
                        Value::Text(
                            String::from_utf8(b.to_vec())
                                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()),
                        )
                    }
                    ffi::SQLITE_BLOB => {
                        let p = ffi::sqlite3_value_blob(v).cast::<u8>();
                        let n = ffi::sqlite3_value_bytes(v) as usize;
                        Value::Blob(if p.is_null() {
                            Vec::new()
                        } else {
                            std::slice::from_raw_parts(p, n).to_vec()
                        })
                    }
                    _ => Value::Null,
                };
                // SQLite's printf answers NULL for a text over the limit:
                // a format that is not NULL always makes a text otherwise.
                let formats = matches!(name, "printf" | "format");
                let over = formats
                    && matches!(value, Value::Null)
                    && ctx.len() > 0
                    && !matches!(ctx.get_raw(0), ValueRef::Null);
                match over.then(meter::too_big).flatten() {
                    Some(e) => Err(e),
                    None => Ok((value, (sub != 0).then_some(sub))),
                }
            } else {
                let over = ffi::sqlite3_errcode(self.db) == ffi::SQLITE_TOOBIG;
                Err(over
                    .then(meter::too_big)
                    .flatten()
                    .unwrap_or_else(|| failed(text_of(self.db))))
            };
            ffi::sqlite3_reset(st);
            ffi::sqlite3_clear_bindings(st);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::fn_tests::{assert_agree, builtin_and_ours};

    /// Every case answered by SQLite's built-ins (a fresh connection) and
    /// through the checked forms must agree.
    #[test]
    fn checked_forms_answer_what_sqlite_answers() {
        let (builtin, ours) = builtin_and_ours(register);
        assert_agree(
            &builtin,
            &ours,
            [
                "length('héllo')",
                "length(x'0102')",
                "length(NULL)",
                "length(12.5)",
                "lower('ÀBC')",
                "upper('abc')",
                "trim('  a  ')",
                "substr('hello', 2)",
                "substr('hello', -3, 2)",
                "substring('héllo', 2, 2)",
                "substr(x'010203', 2)",
                "hex('abc')",
                "hex(12)",
                "unhex('6162')",
                "unhex('61-62', '-')",
                "unhex('zz')",
                "quote('it''s')",
                "quote(x'00ff')",
                "quote(1.5)",
                "concat('a', NULL, 2, 1.5)",
                "concat_ws(',', 'a', NULL, 'b')",
                "printf('%d-%s-%5.2f-%q', 3, 'x', 2.5, 'o''k')",
                "format('%.*c', 3, 'x')",
                "printf('%.*c', 2000000000, 'x')",
                "abs(-3)",
                "abs('-2.5')",
                "abs(-9223372036854775808)",
                "round(2.567, 2)",
                "round('x')",
                "sign(-2)",
                "typeof(sqrt(2))",
                "log(2, 8)",
                "mod(7, 3)",
                "atan2(1, 1)",
                "json('[1, 2]')",
                "json('{\"a\":')",
                "json_array(1, json('[2]'), '[3]')",
                "json_object('a', json_array(1), 'b', '{}')",
                "json_object('a', json('{\"x\":1}') -> '$.x')",
                "json_extract('{\"a\":[1,2]}', '$.a')",
                "json_array(json_extract('{\"a\":[1,2]}', '$.a'))",
                "'{\"a\":[1,2]}' -> '$.a'",
                "json_array('{\"a\":[1,2]}' -> '$.a')",
                "'{\"a\":[1,2]}' ->> '$.a[1]'",
                "json_set('{}', '$.a', json('[1]'))",
                "json_insert('[1]', '$[#]', 2)",
                "json_remove('[1,2]', '$[0]')",
                "json_replace('{\"a\":1}', '$.a', 'x')",
                "json_type('[1]', '$[0]')",
                "json_valid('[1')",
                "json_valid(jsonb('[1]'), 8)",
                "json_quote('a\"b')",
                "json_array_length('[1,2,3]')",
                "json_pretty('[1]')",
                "json_error_position('[1')",
                "hex(jsonb('[1]'))",
                "json(jsonb_object('a', 1))",
                "json_extract(jsonb_array(1, 2), '$[1]')",
            ],
        );
    }

    #[test]
    fn a_row_of_many_calls_stops_at_the_deadline() {
        let ours = Connection::open_in_memory().unwrap();
        register(&ours).unwrap();
        let cols: Vec<String> = (0..300).map(|i| format!("length(v || '{i}')")).collect();
        let sql = format!(
            "WITH m AS MATERIALIZED (SELECT printf('%.*c', 500000, 'a') AS v) SELECT {} FROM m",
            cols.join(", ")
        );
        let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let t = std::time::Instant::now();
        let _run = meter::start(
            meter::tests::TEST,
            t + std::time::Duration::from_millis(20),
            None,
            &closed,
        );
        assert!(ours.query_row(&sql, [], |r| r.get::<_, i64>(0)).is_err());
        assert_eq!(meter::stopped(), Some(meter::Stop::Deadline));
    }
}
