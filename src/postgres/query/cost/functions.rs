//! The session's bounded functions (`pg_temp._syncular_q_<name>`): for
//! each operator or function of the two comparing classes its overloads,
//! the size of one call and the call; the value check of built values
//! (`cap`); and their DDL, made on the query's connection with the views.

/// The value check's name (after [`PREFIX`]).
pub(super) const CAP: &str = "cap";

/// One overload of a wrapper: argument types, result type, the size of
/// one call (`$n` are the call's arguments), and the call itself.
type Overload = (&'static str, &'static str, &'static str, &'static str);

/// Text: the haystack's length times the needle's (and replacement's).
const T2: &str = "pg_catalog.octet_length($1)::int8 * pg_catalog.octet_length($2)";
const T3: &str = "pg_catalog.octet_length($1)::int8 * (pg_catalog.octet_length($2) + COALESCE(pg_catalog.octet_length($3), 0))";
/// A text and an array of patterns (by the array's text).
const TA: &str = "pg_catalog.octet_length($1)::int8 * pg_catalog.octet_length(CAST($2 AS text))";
/// Arrays: pairs of elements.
const AA: &str = "pg_catalog.cardinality($1)::int8 * pg_catalog.cardinality($2)";
/// jsonb: the two texts' lengths, over 8 (about one comparison per pair
/// of elements, which take several bytes each).
const JJ: &str = "pg_catalog.octet_length(CAST($1 AS text))::int8 * pg_catalog.octet_length(CAST($2 AS text)) / 8";
/// jsonb and an array of keys: the text's length times the keys.
const JK: &str = "pg_catalog.octet_length(CAST($1 AS text))::int8 * pg_catalog.cardinality($2)";

/// `repeat`: the bytes it makes.
const REPEAT: &str = "pg_catalog.octet_length($1)::int8 * GREATEST($2, 0)";
/// `normalize`: measured at about 35 ns a byte (a 200 MB value took 7 s
/// on this machine), some 16 units of `ROW_WORK`'s scale.
const NORMALIZE: &str = "pg_catalog.octet_length($1)::int8 * 16";
/// Case mapping: about 1 ns a byte (the same value, 0.2 s a call), doubled.
const CASE: &str = "pg_catalog.octet_length($1)::int8 * 2";

/// The wrappers: each one operator or function, its overloads.
const WRAPPERS: &[(&str, &[Overload])] = &[
    (
        "like",
        &[
            ("text, text", "boolean", T2, "$1 ~~ $2"),
            ("bytea, bytea", "boolean", T2, "$1 ~~ $2"),
        ],
    ),
    ("ilike", &[("text, text", "boolean", T2, "$1 ~~* $2")]),
    (
        "like_any",
        &[("text, text[]", "boolean", TA, "$1 ~~ ANY ($2)")],
    ),
    (
        "like_all",
        &[("text, text[]", "boolean", TA, "$1 ~~ ALL ($2)")],
    ),
    (
        "notlike_any",
        &[("text, text[]", "boolean", TA, "$1 !~~ ANY ($2)")],
    ),
    (
        "notlike_all",
        &[("text, text[]", "boolean", TA, "$1 !~~ ALL ($2)")],
    ),
    (
        "ilike_any",
        &[("text, text[]", "boolean", TA, "$1 ~~* ANY ($2)")],
    ),
    (
        "ilike_all",
        &[("text, text[]", "boolean", TA, "$1 ~~* ALL ($2)")],
    ),
    (
        "notilike_any",
        &[("text, text[]", "boolean", TA, "$1 !~~* ANY ($2)")],
    ),
    (
        "notilike_all",
        &[("text, text[]", "boolean", TA, "$1 !~~* ALL ($2)")],
    ),
    (
        "strpos",
        &[("text, text", "integer", T2, "pg_catalog.strpos($1, $2)")],
    ),
    (
        "position",
        &[
            ("text, text", "integer", T2, "pg_catalog.position($1, $2)"),
            ("bytea, bytea", "integer", T2, "pg_catalog.position($1, $2)"),
        ],
    ),
    (
        "split_part",
        &[(
            "text, text, integer",
            "text",
            T2,
            "pg_catalog.split_part($1, $2, $3)",
        )],
    ),
    (
        "replace",
        &[(
            "text, text, text",
            "text",
            T3,
            "pg_catalog.replace($1, $2, $3)",
        )],
    ),
    (
        "translate",
        &[(
            "text, text, text",
            "text",
            T3,
            "pg_catalog.translate($1, $2, $3)",
        )],
    ),
    (
        "string_to_array",
        &[
            (
                "text, text",
                "text[]",
                T2,
                "pg_catalog.string_to_array($1, $2)",
            ),
            (
                "text, text, text",
                "text[]",
                T3,
                "pg_catalog.string_to_array($1, $2, $3)",
            ),
        ],
    ),
    (
        "btrim",
        &[
            ("text, text", "text", T2, "pg_catalog.btrim($1, $2)"),
            ("bytea, bytea", "bytea", T2, "pg_catalog.btrim($1, $2)"),
        ],
    ),
    (
        "ltrim",
        &[
            ("text, text", "text", T2, "pg_catalog.ltrim($1, $2)"),
            ("bytea, bytea", "bytea", T2, "pg_catalog.ltrim($1, $2)"),
        ],
    ),
    (
        "rtrim",
        &[
            ("text, text", "text", T2, "pg_catalog.rtrim($1, $2)"),
            ("bytea, bytea", "bytea", T2, "pg_catalog.rtrim($1, $2)"),
        ],
    ),
    // A builder: its cost is the size of what it makes, so nested calls
    // cannot grow a literal into a value that takes seconds to read (the
    // guard bounds each count to a literal of at most 10,000, which bounds
    // `lpad`, `rpad` and `format` widths, not a repeat of a repeat).
    (
        "repeat",
        &[("text, integer", "text", REPEAT, "pg_catalog.repeat($1, $2)")],
    ),
    // Per-character work that does not check for cancellation: Unicode
    // normalization and case mapping, by their input's size.
    (
        "normalize",
        &[
            ("text", "text", NORMALIZE, "pg_catalog.normalize($1)"),
            (
                "text, text",
                "text",
                NORMALIZE,
                "pg_catalog.normalize($1, $2)",
            ),
        ],
    ),
    ("upper", &[("text", "text", CASE, "pg_catalog.upper($1)")]),
    ("lower", &[("text", "text", CASE, "pg_catalog.lower($1)")]),
    (
        "initcap",
        &[("text", "text", CASE, "pg_catalog.initcap($1)")],
    ),
    (
        "contains",
        &[
            ("anyarray, anyarray", "boolean", AA, "$1 @> $2"),
            ("jsonb, jsonb", "boolean", JJ, "$1 @> $2"),
        ],
    ),
    (
        "contained",
        &[
            ("anyarray, anyarray", "boolean", AA, "$1 <@ $2"),
            ("jsonb, jsonb", "boolean", JJ, "$1 <@ $2"),
        ],
    ),
    (
        "overlaps",
        &[("anyarray, anyarray", "boolean", AA, "$1 && $2")],
    ),
    (
        "exists_any",
        &[("jsonb, text[]", "boolean", JK, "$1 ?| $2")],
    ),
    (
        "exists_all",
        &[("jsonb, text[]", "boolean", JK, "$1 ?& $2")],
    ),
];

/// The prefix of the wrappers' names in `pg_temp`.
pub const PREFIX: &str = "_syncular_q_";

/// Whether `name` is one of the wrappers (for the guard's allowlist).
pub fn is_wrapper(name: &str) -> bool {
    name.strip_prefix(PREFIX)
        .is_some_and(|n| n == CAP || WRAPPERS.iter().any(|(w, _)| *w == n))
}

/// `CREATE OR REPLACE FUNCTION` statements of every wrapper and of the
/// check they share, `;`-separated (made with the views).
///
/// Every one is IMMUTABLE (as the operator it wraps, and the refusal), so
/// PostgreSQL folds a call whose arguments are all constants at planning,
/// and folding checks the size first: the operator of a call over the
/// bound is never evaluated, not even by the planner.
pub fn ddl() -> String {
    ddl_where(|_| true)
}

/// [`ddl`] of only the wrappers `sql` calls (with the check they share
/// when it calls any): what a transaction that makes them for one query
/// needs (transaction pooling, where nothing is kept on a session).
pub fn ddl_for(sql: &str) -> String {
    let calls = |name: &str| sql.contains(&format!("pg_temp.{PREFIX}{name}("));
    if !calls(CAP) && !WRAPPERS.iter().any(|(name, _)| calls(name)) {
        return String::new();
    }
    ddl_where(calls)
}

fn ddl_where(wanted: impl Fn(&str) -> bool) -> String {
    let mut out = format!(
        "CREATE OR REPLACE FUNCTION pg_temp.{PREFIX}fits(cost bigint, bound bigint, what text) RETURNS boolean \
         LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $syncular$SELECT CASE WHEN $1 <= $2 THEN true \
         ELSE pg_temp.{PREFIX}refuse('{}', $3, $1, $2) END$syncular$;",
        super::super::bounds::TOO_COSTLY,
    );
    if wanted(CAP) {
        // STABLE, as pg_column_size: then PostgreSQL inlines it into the
        // statement (an IMMUTABLE function calling a STABLE one is never
        // inlined, and a call through the SQL-function executor costs
        // about 10 µs).
        out.push_str(&format!(
            "CREATE OR REPLACE FUNCTION pg_temp.{PREFIX}{CAP}(anyelement, bigint) RETURNS anyelement \
             LANGUAGE sql STABLE PARALLEL SAFE AS $syncular$SELECT CASE WHEN \
             pg_temp.{PREFIX}fits(pg_catalog.pg_column_size($1)::int8, $2, '{}') THEN $1 END$syncular$;",
            "one value built by an aggregate, ||, a building function (concat, format, …) or an array or row constructor would hold this many bytes",
        ));
    }
    for (name, overloads) in WRAPPERS.iter().filter(|(name, _)| wanted(name)) {
        for (args, result, cost, body) in *overloads {
            let n = args.split(',').count() + 1;
            out.push_str(&format!(
                "CREATE OR REPLACE FUNCTION pg_temp.{PREFIX}{name}({args}, bigint) RETURNS {result} \
                 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $syncular$SELECT CASE WHEN \
                 pg_temp.{PREFIX}fits({cost}, ${n}, '{}') THEN {body} END$syncular$;",
                describe(name),
            ));
        }
    }
    out
}

/// What the refusal names, for a wrapper.
fn describe(name: &str) -> &'static str {
    match name {
        "like" | "ilike" | "like_any" | "like_all" | "notlike_any" | "notlike_all" | "ilike_any"
        | "ilike_all" | "notilike_any" | "notilike_all" => {
            "one LIKE/ILIKE would compare haystack × pattern bytes"
        }
        "contains" | "contained" | "overlaps" | "exists_any" | "exists_all" => {
            "one containment or overlap (@>, <@, &&, ?|, ?&) would compare left × right elements"
        }
        "repeat" => "one repeat would make a value of this many bytes",
        "normalize" | "upper" | "lower" | "initcap" => {
            "one normalize or case mapping (upper, lower, initcap) would work through a value this large"
        }
        _ => "one substring search (strpos, position, split_part, replace, translate, string_to_array, trim) would compare haystack × needle bytes",
    }
}
