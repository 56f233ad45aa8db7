//! The partition rewrite (storage-layout §13.1, §13.2) and its security
//! checks.

use super::lex::{tokenize, Kind, Token};
use super::*;
use crate::core::error::{Error, Result};
use crate::core::schema::{quote_ident, Schema, Table};

/// One relation of a compiler plan. Offsets are UTF-16 code units, as the
/// host's JS string reports them; they arrive as JS numbers.
#[derive(Debug, Clone)]
pub struct Relation {
    pub table: String,
    pub start: f64,
    pub end: f64,
    pub alias: Option<String>,
}

/// The request forms.
#[derive(Debug, Clone)]
pub enum Request {
    /// 0.15.x `{ sql }`.
    Legacy { sql: String },
    /// 0.24 `{ plan: { sql, relations } }`.
    Plan {
        sql: String,
        relations: Vec<Relation>,
    },
    /// A `plan` that is missing or not shaped like one.
    Malformed,
}

impl Request {
    /// Bytes of the request's SQL text (0 for a malformed one): what the
    /// rewrite's and a guard's work grow with.
    pub fn text_len(&self) -> usize {
        match self {
            Request::Legacy { sql } | Request::Plan { sql, .. } => sql.len(),
            Request::Malformed => 0,
        }
    }
}

/// Where a flattened `?` takes its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    Partition,
    /// Index into the request's `params`.
    Param(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Only plain `?` placeholders.
    pub sql: String,
    pub binds: Vec<Bind>,
    /// The schema tables the query reads (the declared set).
    pub tables: Vec<String>,
}

fn plan_err(msg: &str) -> Error {
    Error::plain(PLAN_ERROR, msg)
}

fn refused(msg: String) -> Error {
    Error::plain(REFUSED, msg)
}

/// What each relation occurrence becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `(SELECT cols FROM "t" WHERE "_sync_partition" = ?)`, the partition
    /// bound as a parameter (storage-layout §13.1 step 4).
    Subquery,
    /// `temp."<view>"`: the engine's partition-bound view of the table
    /// ([`view_name`]); no partition parameter.
    View,
}

/// Prepares a registered query against `schema`; `declared` is the
/// request's `tables`. Relations become partition-filtered subqueries.
pub fn prepare(
    req: &Request, params: &[Value], declared: &[String], schema: &Schema,
) -> Result<Prepared> {
    prepare_for(req, params, declared, schema, Target::Subquery)
}

/// [`prepare`], with each relation replaced as `target` says.
pub fn prepare_for(
    req: &Request, params: &[Value], declared: &[String], schema: &Schema, target: Target,
) -> Result<Prepared> {
    match req {
        Request::Legacy { sql } | Request::Plan { sql, .. } => check_text(sql)?,
        Request::Malformed => {}
    }
    match req {
        Request::Malformed => Err(plan_err(MSG_PLAN_REQUIRED)),
        Request::Legacy { sql } => prepare_legacy(sql, params, declared, schema, target),
        Request::Plan { sql, relations } => {
            prepare_plan(sql, relations, params, declared, schema, target)
        }
    }
}

/// The name of the per-connection view that exposes one partition of
/// `table` (its app columns only). The name carries a fingerprint of the
/// table's shape, so a connection that outlives a schema change never
/// reads through a view of the old shape.
pub fn view_name(table: &Table) -> String {
    // FNV-1a: stable across builds and processes, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= u32::from(x);
            h = h.wrapping_mul(0x0100_0193);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0193);
    };
    eat(table.name.as_bytes());
    for c in &table.columns {
        eat(c.name.as_bytes());
    }
    format!("_syncular_q_{}_{h:08x}", table.name)
}

// ---- statement shape ---------------------------------------------------------

/// Keywords that start or belong to a statement other than a query.
const WRITE_KEYWORDS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "replace",
    "create",
    "drop",
    "alter",
    "pragma",
    "attach",
    "detach",
    "vacuum",
    "reindex",
    "analyze",
    "begin",
    "commit",
    "rollback",
    "savepoint",
    "release",
];

fn has_semicolon(sql: &str, toks: &[Token]) -> bool {
    toks.iter().any(|t| t.is_punct(sql, ';'))
}

/// Refusals that come before anything else reads the text: its length,
/// and the storage's reserved names.
fn check_text(sql: &str) -> Result<()> {
    if sql.len() > MAX_TEXT {
        return Err(refused(format!(
            "registered query text is {} bytes; at most {MAX_TEXT} are allowed",
            sql.len()
        )));
    }
    // On the raw text, not the tokens: however a lexer reads it, a name
    // SQLite reads is spelled out in the text (it has no escapes in names,
    // and folds ASCII case only). PostgreSQL's U&"…" can spell any name;
    // its guard decides by the parse tree instead (postgres::query::guard).
    if sql
        .as_bytes()
        .windows(RESERVED_PREFIX.len())
        .any(|w| w.eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes()))
    {
        return Err(refused(format!(
            "registered query must not write {RESERVED_PREFIX:?}: names starting with it are reserved for the storage"
        )));
    }
    Ok(())
}

/// One read-only `SELECT` or `WITH … SELECT`, no statement separator, no
/// keyword of a writing or administrative statement.
fn check_statement(sql: &str, toks: &[Token]) -> Result<()> {
    if has_semicolon(sql, toks) {
        return Err(refused(format!(
            "{MSG_ONE_SELECT}: a statement separator ';' is not allowed"
        )));
    }
    let first_ok = toks
        .first()
        .is_some_and(|t| t.is_kw(sql, "select") || t.is_kw(sql, "with"));
    if !first_ok {
        return Err(refused(format!(
            "{MSG_ONE_SELECT}: it must start with SELECT or WITH"
        )));
    }
    for (i, t) in toks.iter().enumerate() {
        if t.kind != Kind::Word {
            continue;
        }
        let w = t.text(sql);
        // `REPLACE(…)` is the string function.
        if w.eq_ignore_ascii_case("replace")
            && toks.get(i + 1).is_some_and(|n| n.is_punct(sql, '('))
        {
            continue;
        }
        if WRITE_KEYWORDS.iter().any(|k| w.eq_ignore_ascii_case(k)) {
            return Err(refused(format!(
                "{MSG_ONE_SELECT}: {} is not allowed in a read-only query",
                w.to_ascii_uppercase()
            )));
        }
    }
    Ok(())
}

// ---- relation positions ---------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    From,
    Join,
    Comma,
    In,
}

/// A name in relation position.
#[derive(Debug, Clone, Copy)]
struct Occurrence {
    /// Token index of the relation name (the table part when qualified).
    tok: usize,
    via: Via,
    /// `schema.table`.
    qualified: bool,
    /// An alias follows.
    alias: bool,
}

/// Words after a relation that are not its alias.
const NOT_ALIAS: &[&str] = &[
    "on",
    "where",
    "group",
    "order",
    "inner",
    "left",
    "right",
    "full",
    "outer",
    "natural",
    "join",
    "cross",
    "using",
    "limit",
    "having",
    "window",
    "union",
    "except",
    "intersect",
    "indexed",
    "not",
    "offset",
    "returning",
    "select",
    "values",
    "from",
];

/// Words that end a FROM list at their nesting level.
const END_FROM: &[&str] = &[
    "where",
    "group",
    "order",
    "having",
    "limit",
    "window",
    "union",
    "except",
    "intersect",
    "select",
    "values",
    "returning",
];

fn is_any_kw(sql: &str, t: &Token, list: &[&str]) -> bool {
    t.kind == Kind::Word && list.iter().any(|k| t.text(sql).eq_ignore_ascii_case(k))
}

/// `WINDOW` at `i` starts a WINDOW clause only when a name and `AS`
/// follow, as SQLite's tokenizer decides; anywhere else it is a plain
/// name (an alias: `FROM t window, u`).
fn is_window_clause(sql: &str, toks: &[Token], i: usize) -> bool {
    toks[i].is_kw(sql, "window")
        && toks.get(i + 1).is_some_and(Token::is_name)
        && toks.get(i + 2).is_some_and(|t| t.is_kw(sql, "as"))
}

/// A word that is a keyword of the FROM grammar at `i`, not a name.
fn is_clause_kw(sql: &str, toks: &[Token], i: usize, list: &[&str]) -> bool {
    is_any_kw(sql, &toks[i], list)
        && (!toks[i].is_kw(sql, "window") || is_window_clause(sql, toks, i))
}

/// Finds every name SQLite would resolve as a table: after FROM (not `IS
/// DISTINCT FROM`), JOIN, a comma of a FROM list, or `IN` without a
/// parenthesis, through any number of opening parentheses; database-
/// qualified names included.
fn relations(sql: &str, toks: &[Token]) -> Vec<Occurrence> {
    let mut out = Vec::new();
    // Per nesting level: inside a FROM list?
    let mut in_from: Vec<bool> = vec![false];
    let mut expect: Option<Via> = None;
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.is_punct(sql, '(') {
            // `IN (…)` is a list or a subquery, never a table name.
            if expect == Some(Via::In) {
                expect = None;
            }
            in_from.push(expect.is_some());
            i += 1;
            continue;
        }
        if t.is_punct(sql, ')') {
            if in_from.len() > 1 {
                in_from.pop();
            }
            expect = None;
            i += 1;
            continue;
        }
        if let Some(via) = expect.take() {
            if t.is_name() && !is_any_kw(sql, t, &["select", "with", "values"]) {
                let next = toks.get(i + 1);
                if next.is_some_and(|n| n.is_punct(sql, '(')) {
                    // A table-valued function.
                    i += 1;
                    continue;
                }
                let (tok, qualified) = if next.is_some_and(|n| n.is_punct(sql, '.'))
                    && toks.get(i + 2).is_some_and(Token::is_name)
                {
                    (i + 2, true)
                } else {
                    (i, false)
                };
                let after = toks.get(tok + 1);
                let alias = after.is_some_and(|a| {
                    a.is_kw(sql, "as")
                        || (a.is_name() && !is_clause_kw(sql, toks, tok + 1, NOT_ALIAS))
                });
                out.push(Occurrence {
                    tok,
                    via,
                    qualified,
                    alias,
                });
                i = tok + 1;
                continue;
            }
        }
        let level = in_from.len() - 1;
        if t.is_kw(sql, "from") {
            let distinct = i > 0 && toks[i - 1].is_kw(sql, "distinct");
            if !distinct {
                in_from[level] = true;
                expect = Some(Via::From);
            }
        } else if t.is_kw(sql, "join") {
            in_from[level] = true;
            expect = Some(Via::Join);
        } else if t.is_punct(sql, ',') && in_from[level] {
            expect = Some(Via::Comma);
        } else if t.is_kw(sql, "in") {
            expect = Some(Via::In);
        } else if is_clause_kw(sql, toks, i, END_FROM) {
            in_from[level] = false;
        }
        i += 1;
    }
    out
}

fn is_internal(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.starts_with("sync_") || l.starts_with("_sync") || l.starts_with("sqlite_")
}

fn schema_table_ci<'a>(schema: &'a Schema, name: &str) -> Option<&'a Table> {
    schema
        .tables
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
}

/// Refusals common to both forms for one relation occurrence; returns the
/// schema table it names, if any.
fn screen<'a>(
    sql: &str, toks: &[Token], o: &Occurrence, schema: &'a Schema,
) -> Result<Option<&'a Table>> {
    let name = toks[o.tok].name(sql).unwrap_or_default();
    if o.qualified {
        let db = toks[o.tok - 2].name(sql).unwrap_or_default();
        return Err(refused(format!(
            "registered query must not qualify a relation with a database name ({db}.{name})"
        )));
    }
    if is_internal(&name) {
        return Err(refused(format!(
            "registered query must not read the internal table {name:?}"
        )));
    }
    Ok(schema_table_ci(schema, &name))
}

// ---- the replacement and bind flattening ------------------------------------------

fn replacement(table: &Table, with_alias: bool, target: Target) -> Splice {
    let mut s = match target {
        Target::Subquery => {
            let cols: Vec<String> = table.columns.iter().map(|c| quote_ident(&c.name)).collect();
            format!(
                "(SELECT {} FROM {} WHERE \"_sync_partition\" = ?)",
                cols.join(", "),
                table.quoted
            )
        }
        Target::View => format!("temp.{}", quote_ident(&view_name(table))),
    };
    if with_alias {
        s.push_str(" AS ");
        s.push_str(&table.quoted);
    }
    Splice {
        start: 0,
        end: 0,
        text: s,
        partition: target == Target::Subquery,
    }
}

/// A rewrite target: replace bytes `start..end` with `text`.
struct Splice {
    start: usize,
    end: usize,
    text: String,
    /// `text` holds one `?` bound to the partition.
    partition: bool,
}

/// One walk over `sql`: copies everything verbatim except the splices and
/// the placeholders, which become plain `?` with their binds in textual
/// order (§13.1 step 6).
fn flatten(
    sql: &str, toks: &[Token], mut splices: Vec<Splice>, params: &[Value],
) -> Result<(String, Vec<Bind>)> {
    splices.sort_by_key(|s| s.start);
    let mut out = String::with_capacity(sql.len() + splices.len() * 64);
    let mut binds = Vec::new();
    let mut anonymous = 0usize;
    let mut pos = 0usize;
    let mut next_splice = 0usize;
    for t in toks {
        if t.start < pos {
            continue; // inside a splice
        }
        if let Some(s) = splices.get(next_splice) {
            if s.start <= t.start {
                out.push_str(&sql[pos..s.start]);
                out.push_str(&s.text);
                if s.partition {
                    binds.push(Bind::Partition);
                }
                pos = s.end;
                next_splice += 1;
                if t.start < pos {
                    continue;
                }
            }
        }
        match t.kind {
            Kind::Param => {
                out.push_str(&sql[pos..t.start]);
                let digits = &sql[t.start + 1..t.end];
                let index = if digits.is_empty() {
                    anonymous += 1;
                    anonymous - 1
                } else {
                    let n: usize = digits.parse().unwrap_or(usize::MAX);
                    if n == 0 {
                        return Err(plan_err(MSG_BINDS));
                    }
                    anonymous = anonymous.max(n);
                    n - 1
                };
                match params.get(index) {
                    None | Some(Value::Undefined) => return Err(plan_err(MSG_BINDS)),
                    Some(_) => {}
                }
                out.push('?');
                binds.push(Bind::Param(index));
                pos = t.end;
            }
            Kind::NamedParam => {
                return Err(plan_err(&format!(
                    "{MSG_BINDS} (named parameter {} is not supported)",
                    t.text(sql)
                )))
            }
            _ => {}
        }
    }
    for s in &splices[next_splice..] {
        out.push_str(&sql[pos..s.start]);
        out.push_str(&s.text);
        if s.partition {
            binds.push(Bind::Partition);
        }
        pos = s.end;
    }
    out.push_str(&sql[pos..]);
    Ok((out, binds))
}

// ---- 0.15.x `{ sql }` --------------------------------------------------------------

fn prepare_legacy(
    sql: &str, params: &[Value], declared: &[String], schema: &Schema, target: Target,
) -> Result<Prepared> {
    let toks = tokenize(sql);
    if has_semicolon(sql, &toks) {
        return Err(plan_err(MSG_ONE_SELECT));
    }
    check_statement(sql, &toks)?;
    let mut splices = Vec::new();
    let mut found: Vec<String> = Vec::new();
    for o in relations(sql, &toks) {
        let Some(table) = screen(sql, &toks, &o, schema)? else {
            continue;
        };
        let tok = &toks[o.tok];
        let exact = tok.kind == Kind::Word && tok.text(sql) == table.name;
        if !exact || o.via == Via::In {
            return Err(refused(format!(
                "registered query names table {:?} as {:?}, which the partition rewrite does not cover; write it as a bare FROM/JOIN relation",
                table.name,
                tok.text(sql)
            )));
        }
        if !declared.contains(&table.name) {
            return Err(plan_err(MSG_TABLES));
        }
        if !table.materialize {
            return Err(plan_err(MSG_NOT_MATERIALIZED));
        }
        splices.push(Splice {
            start: tok.start,
            end: tok.end,
            ..replacement(table, !o.alias, target)
        });
        if !found.contains(&table.name) {
            found.push(table.name.clone());
        }
    }
    let mut want: Vec<&String> = declared.iter().collect();
    want.sort();
    want.dedup();
    if want.len() != found.len() || want.iter().any(|d| !found.contains(d)) {
        return Err(plan_err(MSG_TABLES));
    }
    let (sql, binds) = flatten(sql, &toks, splices, params)?;
    Ok(Prepared {
        sql,
        binds,
        tables: found,
    })
}

// ---- 0.24 `{ plan }` -------------------------------------------------------------------

/// UTF-16 offset → byte offset; `None` beyond the end or inside a
/// character's encoding (a surrogate pair split in two).
fn byte_offsets(sql: &str) -> Vec<Option<usize>> {
    let mut map = Vec::with_capacity(sql.len() + 1);
    for (b, c) in sql.char_indices() {
        map.push(Some(b));
        if c.len_utf16() == 2 {
            map.push(None);
        }
    }
    map.push(Some(sql.len()));
    map
}

fn safe_offset(v: f64) -> Option<i64> {
    (v.is_finite() && v.fract() == 0.0 && v.abs() <= crate::core::model::MAX_SAFE_INTEGER as f64)
        .then_some(v as i64)
}

/// The text of a relation occurrence without its quotes.
fn unquote_relation(text: &str) -> String {
    let pairs = [('"', '"'), ('`', '`'), ('[', ']')];
    for (open, close) in pairs {
        if text.len() >= 2 && text.starts_with(open) && text.ends_with(close) {
            let body = &text[1..text.len() - 1];
            return if open == '[' {
                body.to_owned()
            } else {
                body.replace(&format!("{open}{open}"), &open.to_string())
            };
        }
    }
    text.to_owned()
}

fn prepare_plan(
    sql: &str, relations_in: &[Relation], params: &[Value], declared: &[String], schema: &Schema,
    target: Target,
) -> Result<Prepared> {
    let offsets = byte_offsets(sql);
    let utf16_len = (offsets.len() - 1) as i64;
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(relations_in.len());
    let mut previous_end = 0i64;
    for r in relations_in {
        let (Some(start), Some(end)) = (safe_offset(r.start), safe_offset(r.end)) else {
            return Err(plan_err(MSG_BOUNDARIES));
        };
        if start < previous_end || end <= start || end > utf16_len {
            return Err(plan_err(MSG_BOUNDARIES));
        }
        let (Some(bs), Some(be)) = (offsets[start as usize], offsets[end as usize]) else {
            return Err(plan_err(MSG_BOUNDARIES));
        };
        previous_end = end;
        if !declared.contains(&r.table) {
            return Err(plan_err(MSG_TABLES));
        }
        if !unquote_relation(&sql[bs..be]).eq_ignore_ascii_case(&r.table) {
            return Err(plan_err(MSG_NAME));
        }
        spans.push((bs, be));
    }
    let mut plan_tables: Vec<&String> = relations_in.iter().map(|r| &r.table).collect();
    plan_tables.sort();
    plan_tables.dedup();
    let mut want: Vec<&String> = declared.iter().collect();
    want.sort();
    want.dedup();
    if plan_tables != want {
        return Err(plan_err(MSG_TABLES));
    }
    let mut tables = Vec::with_capacity(relations_in.len());
    for r in relations_in {
        let t = schema.table(&r.table).map_err(|_| plan_err(MSG_UNKNOWN))?;
        tables.push(t);
    }
    if tables.iter().any(|t| !t.materialize) {
        return Err(plan_err(MSG_NOT_MATERIALIZED));
    }

    // Security: the statement shape, and every relation that names a
    // schema table must be one the plan rewrites.
    let toks = tokenize(sql);
    check_statement(sql, &toks)?;
    for &(bs, be) in &spans {
        if !toks
            .iter()
            .any(|t| t.start == bs && t.end == be && t.is_name())
        {
            return Err(plan_err(MSG_BOUNDARIES));
        }
    }
    for o in relations(sql, &toks) {
        let Some(table) = screen(sql, &toks, &o, schema)? else {
            continue;
        };
        let tok = &toks[o.tok];
        if !spans
            .iter()
            .any(|&(bs, be)| bs == tok.start && be == tok.end)
        {
            return Err(refused(format!(
                "registered query reads table {:?} outside its relation plan",
                table.name
            )));
        }
    }

    let splices = relations_in
        .iter()
        .zip(&spans)
        .zip(&tables)
        .map(|((r, &(start, end)), t)| Splice {
            start,
            end,
            ..replacement(t, r.alias.is_none(), target)
        })
        .collect();
    let (sql, binds) = flatten(sql, &toks, splices, params)?;
    let mut names: Vec<String> = Vec::new();
    for t in tables {
        if !names.contains(&t.name) {
            names.push(t.name.clone());
        }
    }
    Ok(Prepared {
        sql,
        binds,
        tables: names,
    })
}
