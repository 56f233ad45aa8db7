//! The checker: the whole tree, serialized so that every field of every
//! node is visible, is walked against the allowlist (`allowlist`), with the
//! rules no field type can say: names in `pg_catalog` or unqualified,
//! relations that are the binder's views or CTEs in scope, parameters that
//! exist, and the size arguments of calls whose cost an argument sets.

use super::allowlist::{fields, internal_name, F, FUNCTIONS, SYSTEM_COLUMNS, TYPES};
use super::scope::Scope;
use super::tree::{is_default, name_list, refused, unwrap};
use crate::core::error::Result;
use pg_query::protobuf as pb;
use serde_json::{Map, Value as Json};

use F::*;

/// The largest size argument of a function whose cost its argument sets
/// (`lpad`, `rpad`, `repeat`, a `format()` width): PostgreSQL does not
/// check for cancellation inside one such call, so its size is bounded
/// here, as an integer literal.
pub const MAX_SIZE_ARGUMENT: i64 = 10_000;

/// Functions whose output size (and time) one argument sets, and the index
/// of that argument.
const SIZED: &[(&str, usize)] = &[("lpad", 1), ("rpad", 1), ("repeat", 1)];

/// Whether a function's name list is `pg_temp` and one of the bounded
/// forms of `super::cost` (the binder's own calls).
fn is_bounded_call(list: &Json) -> bool {
    matches!(name_list(list).as_deref(), Some(["pg_temp", n]) if super::super::cost::is_wrapper(n))
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

pub(super) fn check(tree: &pb::ParseResult, scope: &Scope, params: i32) -> Result<()> {
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
                if !FUNCTIONS.contains(&name)
                    && !crate::core::query::WINDOW_FUNCTIONS.contains(&name)
                {
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
