//! The engine-side boundary of registered queries on PostgreSQL.
//!
//! The shared rewrite (`crate::query`) reads SQL with a lexer of its own;
//! wherever that lexer misreads PostgreSQL syntax (`ONLY`, `U&"…"`,
//! `E'…'`, nested comments, dollar quoting), the text it produced cannot be
//! trusted. So the final SQL is parsed again here by PostgreSQL's own
//! parser (libpg_query), and:
//!
//! 1. every relation is bound in the tree: each bare app-table reference,
//!    and each subquery of the rewrite's shape
//!    (`(SELECT <app columns> FROM <table> WHERE "_sync_partition" = ?)`),
//!    becomes `pg_temp."_syncular_q_<table>_<hash>" AS <name>`: the
//!    session's security-barrier view of the table (see [`view_ddl`]), which
//!    shows the rows of the partition the call sets in
//!    `syncular.partition`; the other parameters are renumbered densely;
//! 2. the whole tree, serialized so that every field of every node is
//!    visible, is checked against an allowlist of node types, fields,
//!    functions, operators, types and relation names;
//! 3. the tree is deparsed, the text parsed again and checked again, so
//!    what runs is exactly what was checked.
//!
//! What runs is the deparsed text, never the caller's.

use crate::error::{Error, Result};
use crate::query::{Bind, REFUSED};
use crate::schema::Table;
use pg_query::protobuf as pb;
use pg_query::NodeEnum as N;
use serde_json::{Map, Value as Json};

/// Where the value of one parameter of the guarded SQL comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The value of the rewrite's bind at this index (`Prepared::binds`).
    Bind(usize),
    Partition,
}

/// The SQL to run and its parameters, `$1…` in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub sql: String,
    pub slots: Vec<Slot>,
    /// Per slot: whether the SQL uses it (where the rewrite's lexer saw a
    /// placeholder PostgreSQL does not, the value is bound but unused).
    pub used: Vec<bool>,
}

/// What a query may read: the app tables of the loaded schema, stored in
/// `schema`.
pub struct Scope<'a> {
    pub schema: &'a str,
    pub tables: &'a [Table],
}

impl Scope<'_> {
    fn materialized(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.materialize && t.name == name)
    }

    /// Whether `name` is the view [`view_name`] gives a materialized table.
    fn is_view(&self, name: &str) -> bool {
        self.tables
            .iter()
            .any(|t| t.materialize && view_name(self.schema, t) == name)
    }

    fn names_app_table(&self, name: &str) -> bool {
        self.tables
            .iter()
            .any(|t| t.name.eq_ignore_ascii_case(name))
    }
}

/// The longest SQL text the guard reads, in bytes (after the rewrite,
/// which expands each table reference into a projection of its columns;
/// the request's own text is held to [`MAX_QUERY_BYTES`] before it). The
/// guard's work (PostgreSQL's parser twice, the walk, the printer) grows
/// with the text: this bounds it before any of it starts.
pub const MAX_GUARDED_BYTES: usize = 4 * MAX_QUERY_BYTES;

/// The longest registered query text accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 32 * 1024;

/// The largest size argument of a function whose cost its argument sets
/// (`lpad`, `rpad`, `repeat`, a `format()` width): PostgreSQL does not
/// check for cancellation inside one such call, so its size is bounded
/// here, as an integer literal.
pub const MAX_SIZE_ARGUMENT: i64 = 10_000;

/// Functions whose output size (and time) one argument sets, and the index
/// of that argument.
const SIZED: &[(&str, usize)] = &[("lpad", 1), ("rpad", 1), ("repeat", 1)];

fn refused(msg: impl std::fmt::Display) -> Error {
    Error::plain(REFUSED, format!("registered query refused: {msg}"))
}

/// Guards `sql` (the rewrite's output, placeholders numbered `$n` with
/// `binds[n-1]` saying what each one is).
pub fn guard(sql: &str, binds: &[Bind], scope: &Scope) -> Result<Guarded> {
    if sql.len() > MAX_GUARDED_BYTES {
        return Err(refused(format!(
            "its rewritten text is longer than {MAX_GUARDED_BYTES} bytes"
        )));
    }
    let parsed = pg_query::parse(sql, 0).map_err(|e| match e {
        // What the server would have said about the same text.
        pg_query::Error::Parse(m) => Error::Engine {
            code: "42601".into(),
            message: m,
        },
        other => refused(format!("it cannot be parsed ({other})")),
    })?;
    let mut tree = parsed.protobuf;
    // Each bounded call's share of a row's work, and the most a built
    // value may hold (see `super::cost`).
    let share = super::cost::shares(&tree)?;
    let mut binder = Binder::new(binds, scope, share);
    {
        let [raw] = tree.stmts.as_mut_slice() else {
            return Err(refused("it must be exactly one SELECT statement"));
        };
        let Some(N::SelectStmt(select)) = raw.stmt.as_mut().and_then(|n| n.node.as_mut()) else {
            return Err(refused("it must be a SELECT statement"));
        };
        binder.select(select);
    }
    if let Some(e) = binder.error.take() {
        return Err(e);
    }
    let slots = binder.slots();
    let used = (1..=slots.len() as i32)
        .map(|n| binder.used.contains(&n))
        .collect();
    let limit = slots.len() as i32;
    check(&tree, scope, limit)?;
    let text = tree
        .deparse(pg_query::DeparseOptions::default())
        .map_err(|e| refused(format!("it cannot be printed back ({e})")))?;
    let again = pg_query::parse(&text, 0)
        .map_err(|e| refused(format!("its printed form does not parse ({e})")))?;
    check(&again.protobuf, scope, limit)?;
    Ok(Guarded {
        sql: text,
        slots,
        used,
    })
}

// ---- binding ---------------------------------------------------------------------

struct Binder<'a> {
    binds: &'a [Bind],
    scope: &'a Scope<'a>,
    /// New number of each original parameter (`binds` order); the
    /// partition's is `partition`.
    renumber: Vec<i32>,
    partition: i32,
    partition_used: bool,
    /// Numbers of the parameters the tree references.
    used: Vec<i32>,
    /// Each bounded call's share of a row's work (`super::cost`).
    share: super::cost::Shares,
    error: Option<Error>,
}

impl<'a> Binder<'a> {
    fn new(binds: &'a [Bind], scope: &'a Scope<'a>, share: super::cost::Shares) -> Binder<'a> {
        let mut next = 0;
        let mut renumber = Vec::with_capacity(binds.len());
        for b in binds {
            match b {
                Bind::Param(_) => {
                    next += 1;
                    renumber.push(next);
                }
                Bind::Partition => renumber.push(0),
            }
        }
        let partition = next + 1;
        for (r, b) in renumber.iter_mut().zip(binds) {
            if *b == Bind::Partition {
                *r = partition;
            }
        }
        Binder {
            binds,
            scope,
            renumber,
            partition,
            partition_used: false,
            used: Vec::new(),
            share,
            error: None,
        }
    }

    fn slots(&self) -> Vec<Slot> {
        let mut out: Vec<Slot> = self
            .binds
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Bind::Param(_) => Some(Slot::Bind(i)),
                Bind::Partition => None,
            })
            .collect();
        if self.partition_used {
            out.push(Slot::Partition);
        }
        out
    }

    fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }

    /// The partition-bound view of `t`, named `alias` in the query.
    fn bound(&self, t: &Table, alias: pb::Alias) -> N {
        N::RangeVar(pb::RangeVar {
            catalogname: String::new(),
            schemaname: "pg_temp".into(),
            relname: view_name(self.scope.schema, t),
            inh: true,
            relpersistence: "p".into(),
            alias: Some(alias),
            location: -1,
        })
    }

    fn nodes(&mut self, list: &mut [pb::Node]) {
        for n in list {
            self.node(n, false);
        }
    }

    fn opt(&mut self, n: &mut Option<Box<pb::Node>>) {
        if let Some(n) = n {
            self.node(n, false);
        }
    }

    fn select(&mut self, s: &mut pb::SelectStmt) {
        if let Some(w) = &mut s.with_clause {
            for cte in &mut w.ctes {
                if let Some(N::CommonTableExpr(c)) = &mut cte.node {
                    self.opt(&mut c.ctequery);
                }
            }
        }
        self.nodes(&mut s.distinct_clause);
        self.nodes(&mut s.target_list);
        for item in &mut s.from_clause {
            self.node(item, true);
        }
        self.opt(&mut s.where_clause);
        self.nodes(&mut s.group_clause);
        super::cost::grouped(&mut s.group_clause);
        self.opt(&mut s.having_clause);
        self.nodes(&mut s.window_clause);
        self.nodes(&mut s.values_lists);
        self.nodes(&mut s.sort_clause);
        self.opt(&mut s.limit_offset);
        self.opt(&mut s.limit_count);
        if let Some(l) = &mut s.larg {
            self.select(l);
        }
        if let Some(r) = &mut s.rarg {
            self.select(r);
        }
    }

    fn window(&mut self, w: &mut pb::WindowDef) {
        self.nodes(&mut w.partition_clause);
        self.nodes(&mut w.order_clause);
        self.opt(&mut w.start_offset);
        self.opt(&mut w.end_offset);
    }

    /// Walks the node types the allowlist admits; others are left as they
    /// are for the check to refuse.
    fn node(&mut self, n: &mut pb::Node, from_item: bool) {
        let Some(inner) = &mut n.node else { return };
        match inner {
            N::RangeVar(rv) if from_item => {
                if rv.catalogname.is_empty() && rv.schemaname.is_empty() {
                    if let Some(t) = self.scope.materialized(&rv.relname) {
                        let alias = rv.alias.take().unwrap_or(pb::Alias {
                            aliasname: rv.relname.clone(),
                            colnames: Vec::new(),
                        });
                        *inner = self.bound(t, alias);
                    }
                }
            }
            N::RangeSubselect(rs) => {
                // The rewrite's partition-bound projection of a table.
                let scope = self.scope;
                let shape = match rs.subquery.as_deref().and_then(|n| n.node.as_ref()) {
                    Some(N::SelectStmt(sel)) if !rs.lateral => serde_json::to_value(&**sel)
                        .ok()
                        .and_then(|j| canonical_table(j.as_object()?, scope, "")),
                    _ => None,
                };
                let table = shape.and_then(|(t, number)| {
                    let is_partition = usize::try_from(number - 1)
                        .ok()
                        .and_then(|i| self.binds.get(i))
                        == Some(&Bind::Partition);
                    if is_partition {
                        scope.materialized(&t)
                    } else {
                        None
                    }
                });
                if let Some(t) = table {
                    let alias = rs.alias.take().unwrap_or(pb::Alias {
                        aliasname: t.name.clone(),
                        colnames: Vec::new(),
                    });
                    *inner = self.bound(t, alias);
                    return;
                }
                if let Some(sub) = rs.subquery.as_deref_mut() {
                    self.node(sub, false);
                }
            }
            N::JoinExpr(j) => {
                if let Some(l) = &mut j.larg {
                    self.node(l, true);
                }
                if let Some(r) = &mut j.rarg {
                    self.node(r, true);
                }
                self.opt(&mut j.quals);
            }
            N::RangeFunction(f) => self.nodes(&mut f.functions),
            N::SelectStmt(s) => self.select(s),
            N::ParamRef(p) => {
                let i = usize::try_from(p.number - 1).ok();
                match i.and_then(|i| self.renumber.get(i)) {
                    Some(&new) => {
                        if new == self.partition {
                            self.partition_used = true;
                        }
                        self.used.push(new);
                        p.number = new;
                    }
                    None => {
                        let number = p.number;
                        self.fail(Error::plain(
                            crate::query::PLAN_ERROR,
                            format!("{} (${number} has no value)", crate::query::MSG_BINDS),
                        ))
                    }
                }
            }
            N::ResTarget(r) => {
                self.nodes(&mut r.indirection);
                self.opt(&mut r.val);
            }
            N::AExpr(e) => {
                self.opt(&mut e.lexpr);
                self.opt(&mut e.rexpr);
            }
            N::BoolExpr(e) => self.nodes(&mut e.args),
            N::NullTest(e) => self.opt(&mut e.arg),
            N::BooleanTest(e) => self.opt(&mut e.arg),
            N::FuncCall(f) => {
                self.nodes(&mut f.args);
                self.nodes(&mut f.agg_order);
                self.opt(&mut f.agg_filter);
                if let Some(w) = &mut f.over {
                    self.window(w);
                }
            }
            N::TypeCast(c) => {
                self.opt(&mut c.arg);
                if let Some(t) = &mut c.type_name {
                    self.nodes(&mut t.typmods);
                }
            }
            N::SubLink(s) => {
                self.opt(&mut s.testexpr);
                self.opt(&mut s.subselect);
            }
            N::CaseExpr(c) => {
                self.opt(&mut c.arg);
                self.nodes(&mut c.args);
                self.opt(&mut c.defresult);
            }
            N::CaseWhen(c) => {
                self.opt(&mut c.expr);
                self.opt(&mut c.result);
            }
            N::CoalesceExpr(c) => self.nodes(&mut c.args),
            N::MinMaxExpr(c) => self.nodes(&mut c.args),
            N::RowExpr(r) => self.nodes(&mut r.args),
            N::AArrayExpr(a) => self.nodes(&mut a.elements),
            N::AIndirection(a) => {
                self.opt(&mut a.arg);
                self.nodes(&mut a.indirection);
            }
            N::AIndices(a) => {
                self.opt(&mut a.lidx);
                self.opt(&mut a.uidx);
            }
            N::SortBy(s) => self.opt(&mut s.node),
            N::WindowDef(w) => self.window(w),
            N::CollateClause(c) => self.opt(&mut c.arg),
            N::GroupingSet(g) => self.nodes(&mut g.content),
            N::List(l) => self.nodes(&mut l.items),
            _ => {}
        }
        // After its arguments: a call of the cost classes takes its
        // bounded form.
        if let Err(e) = super::cost::bound(inner, self.share) {
            self.fail(e);
        }
    }
}

/// The name of the session's view of `t` in `pg_temp`: the table's name
/// (cut to fit PostgreSQL's 63-byte identifiers) and a fingerprint of the
/// storage's schema, the table and its columns, so a connection that
/// outlives a schema change never reads through a view of the old shape.
pub fn view_name(schema: &str, t: &Table) -> String {
    // FNV-1a, 64 bits: stable across builds and processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(schema.as_bytes());
    eat(t.name.as_bytes());
    for c in &t.columns {
        eat(c.name.as_bytes());
    }
    // "_syncular_q_" + name + "_" + 16 hex digits <= 63 bytes.
    let mut cut = t.name.len().min(63 - 12 - 1 - 16);
    while !t.name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("_syncular_q_{}_{h:016x}", &t.name[..cut])
}

/// The session setting that holds the call's partition; set transaction-
/// (or savepoint-) locally by each call, read by the views.
pub const PARTITION_SETTING: &str = "syncular.partition";

/// `CREATE OR REPLACE TEMP VIEW` statements (`;`-separated) for the
/// partition-bound views of every materialized table of `tables`, stored
/// in `schema`.
///
/// Each view is a security barrier (`WITH (security_barrier)`): PostgreSQL
/// does not flatten it into the query that reads it, and evaluates a
/// condition or function of that query on a row only after the view's own
/// condition has passed it, unless the function is `LEAKPROOF` (PostgreSQL
/// documentation, "Rules and Privileges" and `CREATE VIEW`). So whatever
/// plan the planner picks (sequential scan, index scan, join order, generic
/// or custom plan), an expression of a registered query never sees a row of
/// another partition, and its errors cannot print one. A temporary view
/// belongs to the session and writes nothing to the database's own schema.
pub fn view_ddl(schema: &str, tables: &[Table]) -> String {
    let mut out = String::from(super::bounds::REFUSE_DDL);
    out.push_str(&super::cost::ddl());
    push_views(&mut out, schema, tables, |_| true);
    out
}

/// [`view_ddl`] of only what the guarded `sql` reads and calls: made in
/// each query's own transaction under transaction pooling, where a few
/// statements cost less than every view and wrapper.
pub fn view_ddl_for(schema: &str, tables: &[Table], sql: &str) -> String {
    // The refusal always: the result-size check that wraps every query
    // when it runs (`bounds`) calls it too.
    let mut out = String::from(super::bounds::REFUSE_DDL);
    out.push_str(&super::cost::ddl_for(sql));
    // A view's name ends in a hash: it appears in no other name.
    push_views(&mut out, schema, tables, |view| sql.contains(view));
    out
}

fn push_views(out: &mut String, schema: &str, tables: &[Table], wanted: impl Fn(&str) -> bool) {
    for t in tables
        .iter()
        .filter(|t| t.materialize && wanted(&view_name(schema, t)))
    {
        let cols: Vec<String> = t
            .columns
            .iter()
            .map(|c| crate::schema::quote_ident(&c.name))
            .collect();
        out.push_str(&format!(
            "CREATE OR REPLACE TEMP VIEW {} WITH (security_barrier = true) AS SELECT {} FROM {}.{} \
             WHERE \"_sync_partition\" OPERATOR(pg_catalog.=) pg_catalog.current_setting('{PARTITION_SETTING}', true);",
            crate::schema::quote_ident(&view_name(schema, t)),
            cols.join(", "),
            crate::schema::quote_ident(schema),
            crate::schema::quote_ident(&t.name),
        ));
    }
}

// ---- the partition-bound subquery, recognized ----------------------------------------

fn is_default(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Bool(b) => !b,
        Json::Number(n) => n.as_i64() == Some(0),
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(_) => false,
    }
}

/// `{"node": {"<ty>": body}}` → body.
fn unwrap<'j>(v: &'j Json, ty: &str) -> Option<&'j Map<String, Json>> {
    v.get("node")?.get(ty)?.as_object()
}

fn single_name(v: &Json) -> Option<&str> {
    let fields = unwrap(v, "ColumnRef")?.get("fields")?.as_array()?;
    let [f] = fields.as_slice() else { return None };
    unwrap(f, "String")?.get("sval")?.as_str()
}

/// Whether `sel` (a SelectStmt's fields) is exactly the partition-bound
/// projection of one materialized app table read from schema `schema`
/// (`""`: unqualified, the rewrite's form): its table's name and the
/// parameter number of the partition. Every other field must be empty.
fn canonical_table(o: &Map<String, Json>, scope: &Scope, schema: &str) -> Option<(String, i64)> {
    for (k, v) in o {
        match k.as_str() {
            "target_list" | "from_clause" | "where_clause" | "limit_option" => {}
            "op" => {
                if v.as_i64() != Some(pb::SetOperation::SetopNone as i64) {
                    return None;
                }
            }
            _ => {
                if !is_default(v) {
                    return None;
                }
            }
        }
    }
    let [from] = o.get("from_clause")?.as_array()?.as_slice() else {
        return None;
    };
    let rv = unwrap(from, "RangeVar")?;
    for (k, v) in rv {
        let ok = match k.as_str() {
            "schemaname" => v.as_str() == Some(schema),
            "relname" | "location" => true,
            "inh" => v.as_bool() == Some(true),
            "relpersistence" => v.as_str() == Some("p"),
            _ => is_default(v),
        };
        if !ok {
            return None;
        }
    }
    let table = scope.materialized(rv.get("relname")?.as_str()?)?;
    let targets = o.get("target_list")?.as_array()?;
    if targets.len() != table.columns.len() {
        return None;
    }
    for (t, c) in targets.iter().zip(&table.columns) {
        let r = unwrap(t, "ResTarget")?;
        for (k, v) in r {
            let ok = match k.as_str() {
                "val" => single_name(v) == Some(c.name.as_str()),
                "location" => true,
                _ => is_default(v),
            };
            if !ok {
                return None;
            }
        }
    }
    let w = unwrap(o.get("where_clause")?, "AExpr")?;
    let mut number = None;
    for (k, v) in w {
        let ok = match k.as_str() {
            "kind" => v.as_i64() == Some(pb::AExprKind::AexprOp as i64),
            "name" => {
                matches!(v.as_array().map(Vec::as_slice), Some([n]) if unwrap(n, "String").and_then(|s| s.get("sval")).and_then(Json::as_str) == Some("="))
            }
            "lexpr" => single_name(v) == Some("_sync_partition"),
            "rexpr" => {
                number = unwrap(v, "ParamRef")
                    .and_then(|p| p.get("number"))
                    .and_then(Json::as_i64);
                number.is_some()
            }
            "rexpr_list_start" | "rexpr_list_end" | "location" => true,
            _ => is_default(v),
        };
        if !ok {
            return None;
        }
    }
    Some((table.name.clone(), number?))
}

// ---- the allowlist ---------------------------------------------------------------------

/// How a field of an allowlisted node is treated; fields not listed must
/// hold their default (empty) value.
#[derive(Clone, Copy)]
enum F {
    /// A value that selects nothing by itself (flags, kinds, names
    /// checked by the node's own rule).
    Scalar,
    /// One `Node`.
    Node,
    /// A list of `Node`s.
    List,
    /// A message of the named type, inline.
    Typed(&'static str),
    /// Walked by the node's own rule.
    Own,
}

use F::*;

fn fields(ty: &str) -> Option<&'static [(&'static str, F)]> {
    Some(match ty {
        "SelectStmt" => &[
            ("distinct_clause", List),
            ("target_list", List),
            ("from_clause", List),
            ("where_clause", Node),
            ("group_clause", List),
            ("group_distinct", Scalar),
            ("having_clause", Node),
            ("window_clause", List),
            ("values_lists", List),
            ("sort_clause", List),
            ("limit_offset", Node),
            ("limit_count", Node),
            ("limit_option", Scalar),
            ("with_clause", Own),
            ("op", Scalar),
            ("all", Scalar),
            ("larg", Typed("SelectStmt")),
            ("rarg", Typed("SelectStmt")),
        ],
        "ResTarget" => &[("name", Scalar), ("indirection", List), ("val", Node)],
        "ColumnRef" => &[("fields", List)],
        "AConst" => &[("isnull", Scalar), ("val", Scalar)],
        "AExpr" => &[
            ("kind", Scalar),
            ("name", List),
            ("lexpr", Node),
            ("rexpr", Node),
            ("rexpr_list_start", Scalar),
            ("rexpr_list_end", Scalar),
        ],
        "BoolExpr" => &[("boolop", Scalar), ("args", List)],
        "NullTest" => &[
            ("arg", Node),
            ("nulltesttype", Scalar),
            ("argisrow", Scalar),
        ],
        "BooleanTest" => &[("arg", Node), ("booltesttype", Scalar)],
        "FuncCall" => &[
            ("funcname", List),
            ("args", List),
            ("agg_order", List),
            ("agg_filter", Node),
            ("over", Typed("WindowDef")),
            ("agg_within_group", Scalar),
            ("agg_star", Scalar),
            ("agg_distinct", Scalar),
            ("func_variadic", Scalar),
            ("funcformat", Scalar),
        ],
        "TypeCast" => &[("arg", Node), ("type_name", Typed("TypeName"))],
        "TypeName" => &[
            ("names", List),
            ("typmods", List),
            ("typemod", Scalar),
            ("array_bounds", List),
        ],
        "ParamRef" => &[("number", Scalar)],
        "SubLink" => &[
            ("sub_link_type", Scalar),
            ("sub_link_id", Scalar),
            ("testexpr", Node),
            ("oper_name", List),
            ("subselect", Node),
        ],
        "CaseExpr" => &[("arg", Node), ("args", List), ("defresult", Node)],
        "CaseWhen" => &[("expr", Node), ("result", Node)],
        "CoalesceExpr" => &[("args", List)],
        "MinMaxExpr" => &[("op", Scalar), ("args", List)],
        "SqlvalueFunction" => &[("op", Scalar), ("typmod", Scalar)],
        "RowExpr" => &[("args", List), ("row_format", Scalar), ("colnames", List)],
        "AArrayExpr" => &[
            ("elements", List),
            ("list_start", Scalar),
            ("list_end", Scalar),
        ],
        "AIndirection" => &[("arg", Node), ("indirection", List)],
        "AIndices" => &[("is_slice", Scalar), ("lidx", Node), ("uidx", Node)],
        "AStar" => &[],
        "CollateClause" => &[("arg", Node), ("collname", List)],
        "SortBy" => &[
            ("node", Node),
            ("sortby_dir", Scalar),
            ("sortby_nulls", Scalar),
            ("use_op", List),
        ],
        "WindowDef" => &[
            ("name", Scalar),
            ("refname", Scalar),
            ("partition_clause", List),
            ("order_clause", List),
            ("frame_options", Scalar),
            ("start_offset", Node),
            ("end_offset", Node),
        ],
        "GroupingSet" => &[("kind", Scalar), ("content", List)],
        "RangeVar" => &[
            // Checked by the rule: only `pg_temp` and a view of the binder's.
            ("schemaname", Scalar),
            ("relname", Scalar),
            ("inh", Scalar),
            ("relpersistence", Scalar),
            ("alias", Typed("Alias")),
        ],
        "RangeSubselect" => &[
            ("lateral", Scalar),
            ("subquery", Own),
            ("alias", Typed("Alias")),
        ],
        "RangeFunction" => &[
            ("lateral", Scalar),
            ("ordinality", Scalar),
            ("is_rowsfrom", Scalar),
            ("functions", List),
            ("alias", Typed("Alias")),
        ],
        "JoinExpr" => &[
            ("jointype", Scalar),
            ("is_natural", Scalar),
            ("larg", Node),
            ("rarg", Node),
            ("using_clause", List),
            ("join_using_alias", Typed("Alias")),
            ("quals", Node),
            ("alias", Typed("Alias")),
            ("rtindex", Scalar),
        ],
        "CommonTableExpr" => &[
            ("ctename", Scalar),
            ("aliascolnames", List),
            ("ctematerialized", Scalar),
            ("ctequery", Own),
        ],
        "Alias" => &[("aliasname", Scalar), ("colnames", List)],
        "List" => &[("items", List)],
        "String" => &[("sval", Scalar)],
        "Integer" => &[("ival", Scalar)],
        "Float" => &[("fval", Scalar)],
        "Boolean" => &[("boolval", Scalar)],
        "BitString" => &[("bsval", Scalar)],
        _ => return None,
    })
}

/// Functions a query may call: aggregates, window functions, and string,
/// number, date/time, array and JSON functions that neither read nor write
/// anything but their arguments (no SQL given as text, no files, no
/// settings, no sequences, no sleeping, no catalog lookups).
const FUNCTIONS: &[&str] = &[
    // aggregates
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "bool_and",
    "bool_or",
    "every",
    "string_agg",
    "array_agg",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "bit_and",
    "bit_or",
    "percentile_cont",
    "percentile_disc",
    "mode",
    "corr",
    "covar_pop",
    "covar_samp",
    // window functions: crate::query::WINDOW_FUNCTIONS
    // strings
    "lower",
    "upper",
    "length",
    "char_length",
    "character_length",
    "octet_length",
    "bit_length",
    "substr",
    "substring",
    "trim",
    "btrim",
    "ltrim",
    "rtrim",
    "replace",
    "concat",
    "concat_ws",
    "left",
    "right",
    "lpad",
    "rpad",
    "position",
    "strpos",
    "split_part",
    "starts_with",
    "repeat",
    "reverse",
    "initcap",
    "md5",
    "sha256",
    "sha512",
    "encode",
    "decode",
    "to_hex",
    "format",
    "regexp_replace",
    "regexp_match",
    "regexp_matches",
    "regexp_like",
    "regexp_split_to_array",
    "regexp_count",
    "regexp_substr",
    "regexp_instr",
    "translate",
    "ascii",
    "chr",
    "quote_ident",
    "quote_literal",
    "quote_nullable",
    "string_to_array",
    "array_to_string",
    "overlay",
    "normalize",
    "is_normalized",
    "similar_to_escape",
    "like_escape",
    "to_char",
    "to_number",
    "to_date",
    "to_timestamp",
    "unistr",
    "casefold",
    // numbers
    "abs",
    "ceil",
    "ceiling",
    "floor",
    "round",
    "trunc",
    "sign",
    "mod",
    "power",
    "pow",
    "sqrt",
    "cbrt",
    "exp",
    "ln",
    "log",
    "log10",
    "div",
    "pi",
    "random",
    "width_bucket",
    "gcd",
    "lcm",
    "degrees",
    "radians",
    "num_nonnulls",
    "num_nulls",
    "scale",
    // dates and times
    "now",
    "date_trunc",
    "date_part",
    "extract",
    "age",
    "make_date",
    "make_time",
    "make_timestamp",
    "make_timestamptz",
    "make_interval",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timezone",
    "date_bin",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "isfinite",
    "overlaps",
    // arrays and sets
    "array_length",
    "cardinality",
    "array_position",
    "array_positions",
    "array_append",
    "array_prepend",
    "array_cat",
    "array_remove",
    "array_replace",
    "array_lower",
    "array_upper",
    "unnest",
    "generate_series",
    "generate_subscripts",
    // JSON
    "to_json",
    "to_jsonb",
    "row_to_json",
    "array_to_json",
    "json_build_object",
    "jsonb_build_object",
    "json_build_array",
    "jsonb_build_array",
    "json_object",
    "jsonb_object",
    "json_extract_path",
    "json_extract_path_text",
    "jsonb_extract_path",
    "jsonb_extract_path_text",
    "json_typeof",
    "jsonb_typeof",
    "json_array_length",
    "jsonb_array_length",
    "json_each",
    "jsonb_each",
    "json_each_text",
    "jsonb_each_text",
    "json_array_elements",
    "jsonb_array_elements",
    "json_array_elements_text",
    "jsonb_array_elements_text",
    "json_object_keys",
    "jsonb_object_keys",
    "jsonb_set",
    "jsonb_insert",
    "json_strip_nulls",
    "jsonb_strip_nulls",
    "jsonb_pretty",
    "jsonb_path_exists",
    "jsonb_path_match",
    "jsonb_path_query",
    "jsonb_path_query_array",
    "jsonb_path_query_first",
    // other
    "gen_random_uuid",
];

/// Type names a cast may name (no `reg*` types, which look up catalogs).
const TYPES: &[&str] = &[
    "bool",
    "boolean",
    "int2",
    "int4",
    "int8",
    "smallint",
    "integer",
    "int",
    "bigint",
    "numeric",
    "decimal",
    "float4",
    "float8",
    "real",
    "text",
    "varchar",
    "bpchar",
    "char",
    "date",
    "time",
    "timetz",
    "timestamp",
    "timestamptz",
    "interval",
    "json",
    "jsonb",
    "jsonpath",
    "bytea",
    "uuid",
];

const SYSTEM_COLUMNS: &[&str] = &["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"];

fn internal_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.starts_with("pg_") || l.starts_with("sync_") || l.starts_with("_sync")
}

/// Whether a function's name list is `pg_temp` and one of the bounded
/// forms of `super::cost` (the binder's own calls).
fn is_bounded_call(list: &Json) -> bool {
    matches!(name_list(list).as_deref(), Some(["pg_temp", n]) if super::cost::is_wrapper(n))
}

/// The parts of a qualified name (a list of `String` nodes); `None` when
/// any part is something else.
fn name_list(list: &Json) -> Option<Vec<&str>> {
    list.as_array()?
        .iter()
        .map(|n| unwrap(n, "String")?.get("sval")?.as_str())
        .collect()
}

/// The name list of a function, type, operator or collation: one name, or
/// two with `pg_catalog` first.
fn catalog_name<'j>(list: &'j Json, what: &str) -> Result<&'j str> {
    match name_list(list).as_deref() {
        Some([n]) => Ok(n),
        Some(["pg_catalog", n]) => Ok(n),
        other => Err(refused(format!(
            "{what} {} must be unqualified or in pg_catalog",
            other.map_or_else(
                || "(a name with a part that is not a name)".to_owned(),
                |n| n.join(".")
            )
        ))),
    }
}

fn check(tree: &pb::ParseResult, scope: &Scope, params: i32) -> Result<()> {
    let [raw] = tree.stmts.as_slice() else {
        return Err(refused("it must be exactly one SELECT statement"));
    };
    let json = serde_json::to_value(raw)
        .map_err(|e| refused(format!("its parse tree cannot be read ({e})")))?;
    let stmt = json.get("stmt").unwrap_or(&Json::Null);
    if unwrap(stmt, "SelectStmt").is_none() {
        return Err(refused("it must be a SELECT statement"));
    }
    let mut c = Checker {
        scope,
        params,
        frames: Vec::new(),
        depth: 0,
    };
    c.node(stmt)
}

struct Checker<'a> {
    scope: &'a Scope<'a>,
    /// Parameters `$1..=$params` exist.
    params: i32,
    /// CTE names in scope, innermost last.
    frames: Vec<Vec<String>>,
    depth: usize,
}

impl Checker<'_> {
    fn node(&mut self, v: &Json) -> Result<()> {
        let inner = match v {
            // An absent optional node.
            Json::Null => return Ok(()),
            Json::Object(o) if o.len() == 1 => o.get("node"),
            _ => None,
        };
        let Some(inner) = inner else {
            return Err(refused(format!("unexpected parse tree shape (node {v})")));
        };
        match inner {
            Json::Null => Ok(()),
            Json::Object(o) if o.len() == 1 => {
                let (ty, body) = o.iter().next().expect("one entry");
                self.typed(ty, body)
            }
            _ => Err(refused("unexpected parse tree shape")),
        }
    }

    fn typed(&mut self, ty: &str, body: &Json) -> Result<()> {
        let Some(o) = body.as_object() else {
            return Err(refused("unexpected parse tree shape"));
        };
        self.typed_map(ty, o)
    }

    fn typed_map(&mut self, ty: &str, o: &Map<String, Json>) -> Result<()> {
        let Some(spec) = fields(ty) else {
            return Err(refused(format!("{ty} is not allowed")));
        };
        self.depth += 1;
        if self.depth > 200 {
            return Err(refused("it nests too deeply"));
        }
        self.rule(ty, o)?;
        let framed = ty == "SelectStmt" && !o.get("with_clause").is_none_or(Json::is_null);
        for (k, v) in o {
            if k == "location" {
                continue;
            }
            match spec.iter().find(|(n, _)| n == k).map(|(_, f)| *f) {
                None => {
                    if !is_default(v) {
                        return Err(refused(format!("{ty}.{k} is not allowed")));
                    }
                }
                Some(Scalar) | Some(Own) => {}
                Some(Node) => self.node(v)?,
                Some(List) => {
                    for item in v.as_array().into_iter().flatten() {
                        self.node(item)?;
                    }
                }
                Some(Typed(t)) => {
                    if !v.is_null() {
                        self.typed(t, v)?;
                    }
                }
            }
        }
        if framed {
            self.frames.pop();
        }
        self.depth -= 1;
        Ok(())
    }

    /// Rules of one node beyond its fields' types; a SelectStmt's WITH
    /// opens a frame the caller closes after the body.
    fn rule(&mut self, ty: &str, o: &Map<String, Json>) -> Result<()> {
        let get = |k: &str| o.get(k).unwrap_or(&Json::Null);
        match ty {
            "SelectStmt" => {
                let with = get("with_clause");
                if !with.is_null() {
                    self.with(with)?;
                }
            }
            "ColumnRef" => {
                // The column part: system columns and the storage's own
                // (`_sync*`) are not part of any query's view.
                let fields = get("fields")
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if let Some(name) = fields
                    .last()
                    .and_then(|f| unwrap(f, "String"))
                    .and_then(|s| s.get("sval")?.as_str())
                {
                    let l = name.to_ascii_lowercase();
                    if SYSTEM_COLUMNS.contains(&l.as_str()) || l.starts_with("_sync") {
                        return Err(refused(format!("column {name:?} is not readable")));
                    }
                }
            }
            "FuncCall" => {
                if is_bounded_call(get("funcname")) {
                    return Ok(());
                }
                let name = catalog_name(get("funcname"), "function")?;
                if !FUNCTIONS.contains(&name) && !crate::query::WINDOW_FUNCTIONS.contains(&name) {
                    return Err(refused(format!("function {name}() is not allowed")));
                }
                sized_arguments(name, get("args"))?;
            }
            "AExpr" => {
                catalog_name(get("name"), "operator")?;
            }
            "SubLink" => {
                // EXISTS, ALL, ANY, scalar and ARRAY subqueries.
                let kind = get("sub_link_type").as_i64().unwrap_or(0);
                if ![1, 2, 3, 5, 7].contains(&kind) {
                    return Err(refused("this kind of subquery is not allowed"));
                }
                if get("oper_name").as_array().is_some_and(|a| !a.is_empty()) {
                    catalog_name(get("oper_name"), "operator")?;
                }
            }
            "SortBy" => {
                if get("use_op").as_array().is_some_and(|a| !a.is_empty()) {
                    catalog_name(get("use_op"), "operator")?;
                }
            }
            "CollateClause" => {
                catalog_name(get("collname"), "collation")?;
            }
            "TypeName" => {
                let name = catalog_name(get("names"), "type")?;
                if !TYPES.contains(&name) {
                    return Err(refused(format!("type {name} is not allowed")));
                }
            }
            "SqlvalueFunction" => {
                // CURRENT_DATE … LOCALTIMESTAMP(n); not the user, role,
                // catalog or schema.
                let op = get("op").as_i64().unwrap_or(0);
                if !(1..=9).contains(&op) {
                    return Err(refused("this SQL value function is not allowed"));
                }
            }
            "ParamRef" => {
                let n = get("number").as_i64().unwrap_or(0);
                if n < 1 || n > i64::from(self.params) {
                    return Err(refused(format!("parameter ${n} does not exist")));
                }
            }
            "RangeVar" => {
                let name = get("relname").as_str().unwrap_or_default();
                let schema = get("schemaname").as_str().unwrap_or_default();
                let catalog = get("catalogname").as_str().unwrap_or_default();
                // The binder's own references: the session's views.
                if schema == "pg_temp" && catalog.is_empty() && self.scope.is_view(name) {
                    return Ok(());
                }
                if !schema.is_empty() || !catalog.is_empty() {
                    return Err(refused(format!(
                        "relation {schema}.{name} must not be qualified"
                    )));
                }
                let in_scope = self.frames.iter().any(|f| f.iter().any(|c| c == name));
                if !in_scope {
                    return Err(refused(if self.scope.names_app_table(name) {
                        format!("table {name:?} is not a materialized table of the schema, or is named in another letter case")
                    } else {
                        format!(
                            "relation {name:?} is neither a table of the schema nor a CTE in scope"
                        )
                    }));
                }
            }
            "RangeSubselect" => {
                let sub = get("subquery");
                if unwrap(sub, "SelectStmt").is_none() {
                    return Err(refused("a subquery in FROM must be a SELECT"));
                }
                self.node(sub)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Opens the frame of a WITH clause: CTE names are visible to the
    /// bodies after them (all of them when RECURSIVE) and to the statement.
    fn with(&mut self, w: &Json) -> Result<()> {
        let Some(o) = w.as_object() else {
            return Err(refused("unexpected parse tree shape"));
        };
        for (k, v) in o {
            if !matches!(k.as_str(), "ctes" | "recursive" | "location") && !is_default(v) {
                return Err(refused(format!("WithClause.{k} is not allowed")));
            }
        }
        let recursive = o.get("recursive").and_then(Json::as_bool) == Some(true);
        let mut ctes = Vec::new();
        for c in o.get("ctes").and_then(Json::as_array).into_iter().flatten() {
            let Some(cte) = unwrap(c, "CommonTableExpr") else {
                return Err(refused("unexpected parse tree shape"));
            };
            let name = cte
                .get("ctename")
                .and_then(Json::as_str)
                .unwrap_or_default();
            if internal_name(name) || self.scope.names_app_table(name) {
                return Err(refused(format!(
                    "CTE name {name:?} is reserved (pg_*, sync_*, _sync* or a table of the schema)"
                )));
            }
            if unwrap(cte.get("ctequery").unwrap_or(&Json::Null), "SelectStmt").is_none() {
                return Err(refused(format!("CTE {name:?} must be a SELECT")));
            }
            ctes.push((name.to_owned(), cte));
        }
        let mut frame: Vec<String> = Vec::new();
        if recursive {
            frame = ctes.iter().map(|(n, _)| n.clone()).collect();
        }
        for (name, cte) in &ctes {
            self.frames.push(frame.clone());
            let out = self
                .typed_map("CommonTableExpr", cte)
                .and_then(|()| self.node(cte.get("ctequery").unwrap_or(&Json::Null)));
            self.frames.pop();
            out?;
            if !recursive {
                frame.push(name.clone());
            }
        }
        self.frames.push(frame);
        Ok(())
    }
}

/// An integer literal's value (`5`, `-5`; not a cast, parameter or
/// expression).
fn int_literal(v: &Json) -> Option<i64> {
    let c = unwrap(v, "AConst")?;
    let ival = c.get("val")?.get("Ival")?;
    Some(ival.get("ival").and_then(Json::as_i64).unwrap_or(0))
}

fn string_literal(v: &Json) -> Option<&str> {
    unwrap(v, "AConst")?
        .get("val")?
        .get("Sval")?
        .get("sval")
        .and_then(Json::as_str)
        .or(Some(""))
}

/// The rules of functions whose cost an argument sets: `lpad`, `rpad` and
/// `repeat` take their size as an integer literal of at most
/// [`MAX_SIZE_ARGUMENT`]; `format()` takes a literal format string whose
/// widths are at most that, never `*` (a width from an argument).
fn sized_arguments(name: &str, args: &Json) -> Result<()> {
    let args = args.as_array().map(Vec::as_slice).unwrap_or_default();
    if let Some(&(_, at)) = SIZED.iter().find(|(n, _)| *n == name) {
        let Some(size) = args.get(at) else {
            return Ok(());
        };
        return match int_literal(size) {
            Some(n) if n <= MAX_SIZE_ARGUMENT => Ok(()),
            _ => Err(refused(format!(
                "{name}() takes its length as an integer literal of at most {MAX_SIZE_ARGUMENT}"
            ))),
        };
    }
    if name == "format" {
        let Some(spec) = args.first().and_then(string_literal) else {
            return Err(refused("format() takes a string literal as its format"));
        };
        return format_widths(spec);
    }
    Ok(())
}

/// Checks the widths of a `format()` format string: `%[n$][-][width]type`.
fn format_widths(spec: &str) -> Result<()> {
    let b = spec.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        &spec[start..*i]
    };
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        if b.get(i) == Some(&b'%') {
            i += 1;
            continue;
        }
        // An argument position (`n$`), or a width.
        let mut width = digits(&mut i);
        if b.get(i) == Some(&b'$') {
            i += 1;
            width = "";
        }
        while b.get(i) == Some(&b'-') {
            i += 1;
        }
        if width.is_empty() {
            if b.get(i) == Some(&b'*') {
                return Err(refused(
                    "format() widths must be written in the format string, not taken from an argument (*)",
                ));
            }
            width = digits(&mut i);
        }
        let too_wide = !width.is_empty()
            && (width.len() > 9 || width.parse::<i64>().map_or(true, |w| w > MAX_SIZE_ARGUMENT));
        if too_wide {
            return Err(refused(format!(
                "format() widths are at most {MAX_SIZE_ARGUMENT}"
            )));
        }
    }
    Ok(())
}

/// The guard's result per final SQL text and partition-bind pattern, for
/// one loaded schema; repeat calls skip parsing.
#[derive(Default)]
pub struct Cache {
    /// The loaded schema the entries were made for (held, so its address
    /// is never reused by another).
    owner: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
    map: std::collections::HashMap<String, std::sync::Arc<Guarded>>,
}

const CACHE_ENTRIES: usize = 512;

/// The cache key: the SQL and which of its parameters are the partition.
pub fn cache_key(sql: &str, binds: &[Bind]) -> String {
    let mut key = String::with_capacity(sql.len() + binds.len() + 1);
    key.push_str(sql);
    key.push('\0');
    key.extend(binds.iter().map(|b| match b {
        Bind::Partition => 'p',
        Bind::Param(_) => 'v',
    }));
    key
}

impl Cache {
    fn owned_by(&mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>) {
        let same = self.owner.as_ref().is_some_and(|o| {
            std::ptr::addr_eq(std::sync::Arc::as_ptr(o), std::sync::Arc::as_ptr(owner))
        });
        if !same {
            self.map.clear();
            self.owner = Some(owner.clone());
        }
    }

    pub fn get(
        &mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>, key: &str,
    ) -> Option<std::sync::Arc<Guarded>> {
        self.owned_by(owner);
        self.map.get(key).cloned()
    }

    pub fn insert(
        &mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>, key: String,
        g: std::sync::Arc<Guarded>,
    ) {
        self.owned_by(owner);
        if self.map.len() >= CACHE_ENTRIES {
            self.map.clear();
        }
        self.map.insert(key, g);
    }
}

/// The guard through `cache`, whose lock is not held while guarding.
pub fn cached(
    cache: &std::sync::Mutex<Cache>, owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    sql: &str, binds: &[Bind], scope: &Scope,
) -> Result<std::sync::Arc<Guarded>> {
    let lock = || cache.lock().unwrap_or_else(|p| p.into_inner());
    let key = cache_key(sql, binds);
    if let Some(g) = lock().get(&owner, &key) {
        return Ok(g);
    }
    let g = std::sync::Arc::new(guard(sql, binds, scope)?);
    lock().insert(&owner, key, g.clone());
    Ok(g)
}
