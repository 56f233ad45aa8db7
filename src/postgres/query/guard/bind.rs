//! The binder: walks the parsed statement and binds every relation. Each
//! bare app-table reference, and each subquery of the rewrite's
//! partition-bound shape, becomes the session's view of the table
//! (`pg_temp."_syncular_q_…"`); parameters are renumbered densely, the
//! partition's last; each call of the cost classes takes its bounded form
//! (`super::super::cost`).

use super::scope::{view_name, Scope};
use super::tree::{is_default, single_name, unwrap};
use crate::core::error::Error;
use crate::core::query::Bind;
use crate::core::schema::Table;
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

pub(super) struct Binder<'a> {
    binds: &'a [Bind],
    scope: &'a Scope<'a>,
    /// New number of each original parameter (`binds` order); the
    /// partition's is `partition`.
    renumber: Vec<i32>,
    partition: i32,
    partition_used: bool,
    /// Numbers of the parameters the tree references.
    pub(super) used: Vec<i32>,
    /// Each bounded call's share of a row's work (`super::cost`).
    share: super::super::cost::Shares,
    pub(super) error: Option<Error>,
}

impl<'a> Binder<'a> {
    pub(super) fn new(
        binds: &'a [Bind], scope: &'a Scope<'a>, share: super::super::cost::Shares,
    ) -> Binder<'a> {
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

    pub(super) fn slots(&self) -> Vec<Slot> {
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

    pub(super) fn select(&mut self, s: &mut pb::SelectStmt) {
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
        super::super::cost::grouped(&mut s.group_clause);
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
                            crate::core::query::PLAN_ERROR,
                            format!("{} (${number} has no value)", crate::core::query::MSG_BINDS),
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
        if let Err(e) = super::super::cost::bound(inner, self.share) {
            self.fail(e);
        }
    }
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
