//! Cost classes of PostgreSQL operators and functions in registered
//! queries.
//!
//! PostgreSQL checks for cancellation (`statement_timeout`, `close()`)
//! between rows, never inside one call of an operator or function, and a
//! row's expressions are evaluated without a check between them. Most
//! admitted functions cost time linear in their arguments, and regular
//! expressions and JSON path queries check for cancellation themselves.
//! Two classes do not, and compare every part of one argument with every
//! part of the other:
//!
//! - **substring search and character sets**: `LIKE`/`ILIKE` (and their
//!   `NOT`, `ANY`/`ALL` and operator forms), `strpos`, `position`,
//!   `split_part`, `replace`, `translate`, `string_to_array` and the
//!   two-argument trims; a call costs up to the product of the haystack's
//!   and the needle's lengths (seconds to minutes for strings the query
//!   built itself);
//! - **containment and overlap**: `@>`, `<@`, `&&`, `?|`, `?&` on arrays
//!   and `jsonb`; up to the product of the elements of both sides.
//!
//! Each such call is rewritten into a bounded form: the same operator or
//! function inside a function of the session's own
//! (`pg_temp._syncular_q_<name>`, [`ddl`]) that first checks the product of
//! its arguments' sizes (bytes of text; elements of arrays; bytes of
//! `jsonb` as text, over 8) against the call's share of [`ROW_WORK`], and refuses the call past it
//! with `ERR_SYNCULAR_QUERY_REFUSED`. The share is [`ROW_WORK`] divided by the
//! number of such calls in the statement, so the calls of one row together
//! do at most [`ROW_WORK`] units of work (about 40 ms at the slowest rate
//! measured, `translate` with multibyte characters). The functions are
//! plain SQL, so PostgreSQL inlines them when the arguments are simple and
//! each argument is evaluated once otherwise. `LIKE`/`ILIKE` against a
//! subquery (`x LIKE ANY (SELECT …)`) and containment with `ANY`/`ALL`
//! cannot be bounded this way and are refused.
//!
//! A third class builds values: the aggregates that collect their inputs
//! (`string_agg`, `array_agg`, the JSON aggregates), `||`, and the
//! functions whose result is about the size of all their arguments
//! together (`concat`, `format`, `array_cat`, `jsonb_build_object`, …, see
//! [`BUILDERS`]). Nested, or fed back through a recursive query, they make
//! a value of hundreds of MB within the time limit, and then every linear
//! function that reads it runs for seconds without checking for
//! cancellation. Each such call's result passes through
//! `pg_temp._syncular_q_cap`, which refuses (`ERR_SYNCULAR_QUERY_REFUSED`) a
//! value of more than [`ROW_WORK`] bytes over the number of calls and
//! operators in the statement (at least [`MIN_VALUE_BYTES`]): the calls of
//! one row then read at most about [`ROW_WORK`] bytes of built values
//! together. A chain `a || b || c` is checked once, at its end.

mod functions;

pub use functions::{ddl, ddl_for, is_wrapper};

use crate::core::error::{Error, Result};
use crate::core::query::REFUSED;
use functions::{CAP, PREFIX};
use pg_query::protobuf as pb;
use pg_query::NodeEnum as N;

/// The work, in byte pairs, that the bounded calls of one row may do
/// together.
pub const ROW_WORK: i64 = 1 << 24;

/// The least a built value may hold, however many calls a statement has.
pub const MIN_VALUE_BYTES: i64 = 4 << 10;

/// Functions whose result a query builds from its arguments, about their
/// size together (or, for the aggregates, all their input rows'): their
/// results are checked against the statement's value bound.
const BUILDERS: &[&str] = &[
    "string_agg",
    "array_agg",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "concat",
    "concat_ws",
    "format",
    "overlay",
    "regexp_replace",
    "encode",
    "quote_ident",
    "quote_literal",
    "quote_nullable",
    "array_to_string",
    "array_append",
    "array_prepend",
    "array_cat",
    "jsonb_set",
    "jsonb_insert",
    "jsonb_pretty",
    "to_json",
    "to_jsonb",
    "array_to_json",
    "row_to_json",
    "json_build_object",
    "jsonb_build_object",
    "json_build_array",
    "jsonb_build_array",
];

/// The wrapper a call of `f` with `n` arguments goes through, if any.
fn call_site(f: &pb::FuncCall) -> Option<&'static str> {
    if f.agg_star
        || f.agg_distinct
        || f.func_variadic
        || f.over.is_some()
        || !f.agg_order.is_empty()
        || f.agg_filter.is_some()
    {
        return None;
    }
    let name = own_function(f)?;
    let n = f.args.len();
    // repeat's count is checked by the guard (an integer literal of at most
    // `MAX_SIZE_ARGUMENT`): any other form stays as written, to be refused.
    if name == "repeat" && !f.args.get(1).is_some_and(int_const) {
        return None;
    }
    Some(match (name, n) {
        ("strpos", 2) => "strpos",
        ("position", 2) => "position",
        ("split_part", 3) => "split_part",
        ("replace", 3) => "replace",
        ("translate", 3) => "translate",
        ("string_to_array", 2 | 3) => "string_to_array",
        ("btrim", 2) => "btrim",
        ("ltrim", 2) => "ltrim",
        ("rtrim", 2) => "rtrim",
        ("repeat", 2) => "repeat",
        ("normalize", 1 | 2) => "normalize",
        ("upper", 1) => "upper",
        ("lower", 1) => "lower",
        ("initcap", 1) => "initcap",
        _ => return None,
    })
}

/// The wrapper of an operator expression, and whether its result is negated.
fn op_site(e: &pb::AExpr) -> Result<Option<(&'static str, bool)>> {
    let Some(op) = last_name(&e.name) else {
        return Ok(None);
    };
    let kind = pb::AExprKind::try_from(e.kind).unwrap_or(pb::AExprKind::Undefined);
    use pb::AExprKind as K;
    Ok(Some(match (kind, op) {
        (K::AexprOp | K::AexprLike | K::AexprIlike, "~~") => ("like", false),
        (K::AexprOp | K::AexprLike | K::AexprIlike, "!~~") => ("like", true),
        (K::AexprOp | K::AexprLike | K::AexprIlike, "~~*") => ("ilike", false),
        (K::AexprOp | K::AexprLike | K::AexprIlike, "!~~*") => ("ilike", true),
        (K::AexprOpAny, "~~") => ("like_any", false),
        (K::AexprOpAll, "~~") => ("like_all", false),
        (K::AexprOpAny, "!~~") => ("notlike_any", false),
        (K::AexprOpAll, "!~~") => ("notlike_all", false),
        (K::AexprOpAny, "~~*") => ("ilike_any", false),
        (K::AexprOpAll, "~~*") => ("ilike_all", false),
        (K::AexprOpAny, "!~~*") => ("notilike_any", false),
        (K::AexprOpAll, "!~~*") => ("notilike_all", false),
        (K::AexprOp, "@>") => ("contains", false),
        (K::AexprOp, "<@") => ("contained", false),
        (K::AexprOp, "&&") => ("overlaps", false),
        (K::AexprOp, "?|") => ("exists_any", false),
        (K::AexprOp, "?&") => ("exists_all", false),
        (K::AexprOpAny | K::AexprOpAll, "@>" | "<@" | "&&" | "?|" | "?&") => {
            return Err(refused(
                "containment or overlap with ANY/ALL is not allowed (it cannot be bounded); compare each value on its own",
            ))
        }
        _ => return Ok(None),
    }))
}

fn refused(msg: &str) -> Error {
    Error::plain(REFUSED, format!("registered query refused: {msg}"))
}

/// An integer constant, as the parser gives a literal.
fn int_const(n: &pb::Node) -> bool {
    matches!(n.node.as_ref(), Some(N::AConst(c)) if matches!(c.val, Some(pb::a_const::Val::Ival(_))))
}

fn last_name(list: &[pb::Node]) -> Option<&str> {
    match list.last()?.node.as_ref()? {
        N::String(s) => Some(s.sval.as_str()),
        _ => None,
    }
}

/// What each bounded call of one statement may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Each call of the two comparing classes: its share of [`ROW_WORK`].
    pub work: i64,
    /// The most bytes a built value may hold: [`ROW_WORK`] over the calls
    /// and operators of the statement, at least [`MIN_VALUE_BYTES`].
    pub value: i64,
}

/// The shares of `tree`'s bounded calls; refuses what cannot be bounded.
pub fn shares(tree: &pb::ParseResult) -> Result<Shares> {
    let mut sites = 0i64;
    let mut calls = 0i64;
    for (node, _, _, _) in tree.nodes() {
        match node {
            pg_query::NodeRef::AExpr(e) => {
                calls += 1;
                if op_site(e)?.is_some() {
                    sites += 1;
                }
            }
            pg_query::NodeRef::FuncCall(f) => {
                calls += 1;
                if call_site(f).is_some() {
                    sites += 1;
                }
            }
            pg_query::NodeRef::AArrayExpr(a) if caps_array(a) => calls += 1,
            pg_query::NodeRef::RowExpr(r) if caps_row(r) => calls += 1,
            pg_query::NodeRef::SubLink(s) => {
                let op = last_name(&s.oper_name);
                if matches!(
                    op,
                    Some("~~" | "!~~" | "~~*" | "!~~*" | "@>" | "<@" | "&&" | "?|" | "?&")
                ) {
                    return Err(refused(
                        "LIKE, ILIKE, containment or overlap against a subquery (ANY/ALL) is not allowed (it cannot be bounded); write EXISTS (SELECT … WHERE …)",
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(Shares {
        work: ROW_WORK / sites.max(1),
        value: (ROW_WORK / calls.max(1)).max(MIN_VALUE_BYTES),
    })
}

fn string(s: &str) -> pb::Node {
    pb::Node {
        node: Some(N::String(pb::String { sval: s.to_owned() })),
    }
}

fn int(v: i64) -> pb::Node {
    pb::Node {
        node: Some(N::AConst(pb::AConst {
            isnull: false,
            location: -1,
            val: Some(pb::a_const::Val::Ival(pb::Integer {
                ival: v.clamp(1, i64::from(i32::MAX)) as i32,
            })),
        })),
    }
}

fn wrapper_call(name: &str, mut args: Vec<pb::Node>, share: i64) -> N {
    args.push(int(share));
    N::FuncCall(Box::new(pb::FuncCall {
        funcname: vec![string("pg_temp"), string(&format!("{PREFIX}{name}"))],
        args,
        funcformat: pb::CoercionForm::CoerceExplicitCall as i32,
        location: -1,
        ..Default::default()
    }))
}

/// Whether `f` builds a value from its arguments ([`BUILDERS`]): only
/// PostgreSQL's own functions, as [`call_site`].
fn builds(f: &pb::FuncCall) -> bool {
    own_function(f).is_some_and(|n| BUILDERS.contains(&n))
}

/// The name of a call of PostgreSQL's own function (unqualified, or
/// qualified with `pg_catalog`); `None` for a call qualified with another
/// schema, which is left to the guard, which refuses it.
fn own_function(f: &pb::FuncCall) -> Option<&str> {
    match f.funcname.as_slice() {
        [_] => {}
        [schema, _] if matches!(schema.node.as_ref(), Some(N::String(s)) if s.sval == "pg_catalog") =>
            {}
        _ => return None,
    }
    last_name(&f.funcname)
}

/// Whether `e` is the text, array or `jsonb` concatenation operator.
fn concatenates(e: &pb::AExpr) -> bool {
    e.kind == pb::AExprKind::AexprOp as i32 && last_name(&e.name) == Some("||")
}

/// The value check around `node`.
fn capped(node: N, value: i64) -> N {
    wrapper_call(CAP, vec![pb::Node { node: Some(node) }], value)
}

/// `node` without the value check around it, when what it checks is
/// `inner`: a chain `a || b || c` is checked once, at its end, and an
/// array constructor once, outermost (their parts are never larger than
/// the whole, and an inner bracket list must stay a direct child of its
/// constructor).
fn uncap(node: &mut pb::Node, inner: impl Fn(&N) -> bool) {
    let Some(N::FuncCall(f)) = node.node.as_mut() else {
        return;
    };
    if !is_cap(f)
        || !f
            .args
            .first()
            .and_then(|a| a.node.as_ref())
            .is_some_and(inner)
    {
        return;
    }
    let checked = f.args.swap_remove(0);
    *node = checked;
}

/// Whether `f` is the value check (made by [`capped`]).
fn is_cap(f: &pb::FuncCall) -> bool {
    matches!(f.funcname.as_slice(), [schema, _]
        if matches!(schema.node.as_ref(), Some(N::String(s)) if s.sval == "pg_temp"))
        && last_name(&f.funcname)
            .and_then(|n| n.strip_prefix(PREFIX))
            .is_some_and(|n| n == CAP)
}

/// A value the statement's text or the host's parameters give: its size
/// is bounded by theirs.
fn given(n: &pb::Node) -> bool {
    match n.node.as_ref() {
        Some(N::AConst(_) | N::ParamRef(_)) => true,
        Some(N::TypeCast(c)) => c.arg.as_deref().is_some_and(given),
        Some(N::AArrayExpr(a)) => a.elements.iter().all(given),
        _ => false,
    }
}

/// Whether an array constructor is checked: `ARRAY[…]` builds a value of
/// all its elements (nested, or over subqueries, four copies a level make
/// megabytes in a few levels); one of only literals and parameters, or an
/// empty one (whose type only its cast gives), is not.
fn caps_array(a: &pb::AArrayExpr) -> bool {
    !a.elements.is_empty() && !a.elements.iter().all(given)
}

/// Whether a row constructor is checked: `ROW(…)` (or `(a, b)`) builds
/// a composite of all its fields, which a cast to text, `=`/`ANY` or a
/// function reads whole. One of only literals and parameters is not. Where
/// a row is compared as a row (`(a, b) < (c, d)`, `IN`, a subquery's
/// test) or grouped by its columns (`GROUP BY (a, b)`), its parent takes
/// the check off again: PostgreSQL reads those field by field.
fn caps_row(r: &pb::RowExpr) -> bool {
    !r.args.is_empty() && !r.args.iter().all(given)
}

/// Whether `n` is a row constructor, checked or not.
fn is_row(n: &N) -> bool {
    match n {
        N::RowExpr(_) => true,
        N::FuncCall(f) => {
            is_cap(f)
                && matches!(
                    f.args.first().and_then(|a| a.node.as_ref()),
                    Some(N::RowExpr(_))
                )
        }
        _ => false,
    }
}

/// A `GROUP BY` list's rows without their checks: `GROUP BY (a, b)` groups
/// by `a` and `b` (the guard calls this after walking the list).
pub fn grouped(items: &mut [pb::Node]) {
    uncap_rows(items);
}

fn uncap_rows<'a>(nodes: impl IntoIterator<Item = &'a mut pb::Node>) {
    for n in nodes {
        uncap(n, |n| matches!(n, N::RowExpr(_)));
    }
}

/// The elements of an array constructor, through its inner bracket lists.
fn leaves(a: &pb::AArrayExpr) -> Box<dyn Iterator<Item = &pb::Node> + '_> {
    Box::new(a.elements.iter().flat_map(|e| match e.node.as_ref() {
        Some(N::AArrayExpr(inner)) => leaves(inner),
        _ => Box::new(std::iter::once(e)) as Box<dyn Iterator<Item = &pb::Node>>,
    }))
}

/// Rewrites `node` (whose children are already walked) into its bounded
/// form when it is a call of the comparing classes, or a value check
/// around it when it builds a value.
pub fn bound(node: &mut N, share: Shares) -> Result<()> {
    let builds_value = match node {
        N::FuncCall(f) => builds(f),
        N::AExpr(e) if concatenates(e) => {
            for side in [e.lexpr.as_mut(), e.rexpr.as_mut()].into_iter().flatten() {
                uncap(side, |n| matches!(n, N::AExpr(e) if concatenates(e)));
            }
            true
        }
        N::AArrayExpr(a) => {
            for element in &mut a.elements {
                uncap(element, |n| matches!(n, N::AArrayExpr(_)));
            }
            // PostgreSQL's SQL functions cannot return `record[]`, so an
            // array of anonymous rows cannot pass the check.
            if leaves(a).any(|e| e.node.as_ref().is_some_and(is_row)) {
                return Err(refused(
                    "an array of rows (ARRAY[ROW(…)]) is not allowed (its size cannot be checked); use json_build_array or jsonb_agg",
                ));
            }
            caps_array(a)
        }
        N::RowExpr(r) => caps_row(r),
        N::AExpr(e) => {
            uncap_rows(e.lexpr.as_deref_mut());
            match e.rexpr.as_deref_mut() {
                Some(pb::Node {
                    node: Some(N::List(l)),
                }) => uncap_rows(&mut l.items),
                other => uncap_rows(other),
            }
            false
        }
        N::SubLink(l) => {
            uncap_rows(l.testexpr.as_deref_mut());
            false
        }
        N::GroupingSet(g) => {
            uncap_rows(&mut g.content);
            false
        }
        _ => false,
    };
    if builds_value {
        let call = std::mem::replace(node, N::Integer(pb::Integer { ival: 0 }));
        *node = capped(call, share.value);
        return Ok(());
    }
    let share = share.work;
    let replaced = match node {
        N::FuncCall(f) => call_site(f).map(|w| wrapper_call(w, std::mem::take(&mut f.args), share)),
        N::AExpr(e) => match op_site(e)? {
            Some((w, negate)) => {
                let (Some(l), Some(r)) = (e.lexpr.take(), e.rexpr.take()) else {
                    return Ok(());
                };
                let call = wrapper_call(w, vec![*l, *r], share);
                Some(if negate {
                    N::BoolExpr(Box::new(pb::BoolExpr {
                        xpr: None,
                        boolop: pb::BoolExprType::NotExpr as i32,
                        args: vec![pb::Node { node: Some(call) }],
                        location: -1,
                    }))
                } else {
                    call
                })
            }
            None => None,
        },
        _ => None,
    };
    if let Some(r) = replaced {
        *node = r;
    }
    Ok(())
}
