//! What a registered query may read and call on SQLite: the rules the
//! connection's authorizer applies while one is bound (see `isolation`):
//! SELECT and recursive CTEs, the functions of an allowlist, the JSON table
//! functions, and app tables only through their partition views.

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

/// The SQL function the views filter on.
pub(super) const PARTITION_FN: &str = "syncular_partition";

/// The authorizer's view of one bounded query run.
pub(super) struct Rules {
    /// (lower-case table name, its view's name) of the declared tables.
    pub(super) views: Vec<(String, String)>,
    /// Set when anything was denied: SQLite reports some denials
    /// (functions) as a plain SQLITE_ERROR.
    pub(super) denied: bool,
    /// Set when the run was stopped at its step budget.
    pub(super) over_budget: bool,
    /// FROM items read without naming a column whose name SQLite could
    /// not place in a database (see [`column_free_read`]); checked once the
    /// statement has compiled or recompiled (`Bounded::verify`).
    pub(super) unresolved: Vec<String>,
}

/// Functions a registered query may call (lower case). Pure functions of
/// their arguments: none reads outside the query, writes, sleeps, loads
/// code or allocates without bound from a small argument (so no
/// `zeroblob`, `randomblob`, `load_extension`, `sqlite_*`, `fts3_*`), and
/// none costs more than linear time in its arguments (so no `json_patch`,
/// whose merge compares every key of one object with every key of the
/// other; `instr`, `replace` and the trims are `super::linear_fns`).
/// `like`/`glob` are what the LIKE and GLOB operators call.
const FUNCTIONS: &[&str] = &[
    // aggregates
    "count",
    "sum",
    "total",
    "avg",
    "min",
    "max",
    "group_concat",
    "string_agg",
    // window functions: crate::core::query::WINDOW_FUNCTIONS
    // scalar
    "abs",
    "coalesce",
    "ifnull",
    "iif",
    "if",
    "nullif",
    "typeof",
    "length",
    "octet_length",
    "lower",
    "upper",
    "trim",
    "ltrim",
    "rtrim",
    "substr",
    "substring",
    "replace",
    "instr",
    "hex",
    "unhex",
    "quote",
    "printf",
    "format",
    "char",
    "unicode",
    "round",
    "sign",
    "like",
    "glob",
    "likely",
    "unlikely",
    "likelihood",
    "concat",
    "concat_ws",
    "random",
    // math
    "ceil",
    "ceiling",
    "floor",
    "trunc",
    "ln",
    "log",
    "log10",
    "log2",
    "exp",
    "pow",
    "power",
    "sqrt",
    "mod",
    "pi",
    "degrees",
    "radians",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    // date and time
    "date",
    "time",
    "datetime",
    "julianday",
    "unixepoch",
    "strftime",
    "timediff",
    // JSON
    "json",
    "jsonb",
    "json_array",
    "jsonb_array",
    "json_array_length",
    "json_extract",
    "jsonb_extract",
    "json_insert",
    "jsonb_insert",
    "json_object",
    "jsonb_object",
    "json_remove",
    "jsonb_remove",
    "json_replace",
    "jsonb_replace",
    "json_set",
    "jsonb_set",
    "json_type",
    "json_valid",
    "json_quote",
    "json_group_array",
    "jsonb_group_array",
    "json_group_object",
    "jsonb_group_object",
    "json_each",
    "json_tree",
    "json_pretty",
    "json_error_position",
    "->",
    "->>",
    // the views' own filter
    PARTITION_FN,
];

/// Table-valued functions a query may read (they read only their
/// arguments).
const TABLE_FUNCTIONS: &[&str] = &["json_each", "json_tree"];

pub(super) fn authorize(ctx: &AuthContext<'_>, rules: &mut Rules) -> Authorization {
    let views = &rules.views;
    match ctx.action {
        AuthAction::Select | AuthAction::Recursive => Authorization::Allow,
        AuthAction::Function { function_name } => allow(
            FUNCTIONS
                .iter()
                .chain(crate::core::query::WINDOW_FUNCTIONS)
                .any(|f| f.eq_ignore_ascii_case(function_name)),
        ),
        AuthAction::Read { table_name, .. } => {
            // SQLite authorizes a read of a real table's column with the
            // database it resolved to, and never asks about a CTE's or
            // subquery's columns. No database: a FROM item none of whose
            // columns is read, named as the query wrote it.
            let Some(db) = ctx.database_name else {
                return column_free_read(table_name, rules);
            };
            if db.eq_ignore_ascii_case("main") {
                if TABLE_FUNCTIONS
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(table_name))
                {
                    return Authorization::Allow;
                }
                // An app table, only from inside its own view (no query
                // can name anything else like a view: see the module doc).
                let table = table_name.to_ascii_lowercase();
                allow(
                    views
                        .iter()
                        .any(|(t, v)| *t == table && ctx.accessor == Some(v.as_str())),
                )
            } else if db.eq_ignore_ascii_case("temp") {
                allow(views.iter().any(|(_, v)| v == table_name))
            } else {
                Authorization::Deny
            }
        }
        _ => Authorization::Deny,
    }
}

/// A FROM item the query reads no column of: a view or a JSON table
/// function is admitted; any other name is admitted for now and checked
/// once the statement has compiled (`Bounded::verify`): it must name
/// nothing outside the query, so it was one of the query's CTEs.
fn column_free_read(name: &str, rules: &mut Rules) -> Authorization {
    let known = rules
        .views
        .iter()
        .any(|(_, v)| v.eq_ignore_ascii_case(name))
        || TABLE_FUNCTIONS.iter().any(|f| f.eq_ignore_ascii_case(name));
    if !known && !rules.unresolved.iter().any(|n| n == name) {
        rules.unresolved.push(name.to_owned());
    }
    Authorization::Allow
}

fn allow(yes: bool) -> Authorization {
    if yes {
        Authorization::Allow
    } else {
        Authorization::Deny
    }
}
