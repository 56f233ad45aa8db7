//! What a registered query may read: the app tables of the loaded schema,
//! each through the session's partition-bound security-barrier view (its
//! name and its DDL, made on the query's connection).

use crate::core::schema::Table;

/// What a query may read: the app tables of the loaded schema, stored in
/// `schema`.
pub struct Scope<'a> {
    pub schema: &'a str,
    pub tables: &'a [Table],
}

impl Scope<'_> {
    pub(super) fn materialized(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.materialize && t.name == name)
    }

    /// Whether `name` is the view [`view_name`] gives a materialized table.
    pub(super) fn is_view(&self, name: &str) -> bool {
        self.tables
            .iter()
            .any(|t| t.materialize && view_name(self.schema, t) == name)
    }

    pub(super) fn names_app_table(&self, name: &str) -> bool {
        self.tables
            .iter()
            .any(|t| t.name.eq_ignore_ascii_case(name))
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
    let mut out = String::from(super::super::bounds::REFUSE_DDL);
    out.push_str(&super::super::cost::ddl());
    push_views(&mut out, schema, tables, |_| true);
    out
}

/// [`view_ddl`] of only what the guarded `sql` reads and calls: made in
/// each query's own transaction under transaction pooling, where a few
/// statements cost less than every view and wrapper.
pub fn view_ddl_for(schema: &str, tables: &[Table], sql: &str) -> String {
    // The refusal always: the result-size check that wraps every query
    // when it runs (`bounds`) calls it too.
    let mut out = String::from(super::super::bounds::REFUSE_DDL);
    out.push_str(&super::super::cost::ddl_for(sql));
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
            .map(|c| crate::core::schema::quote_ident(&c.name))
            .collect();
        out.push_str(&format!(
            "CREATE OR REPLACE TEMP VIEW {} WITH (security_barrier = true) AS SELECT {} FROM {}.{} \
             WHERE \"_sync_partition\" OPERATOR(pg_catalog.=) pg_catalog.current_setting('{PARTITION_SETTING}', true);",
            crate::core::schema::quote_ident(&view_name(schema, t)),
            cols.join(", "),
            crate::core::schema::quote_ident(schema),
            crate::core::schema::quote_ident(&t.name),
        ));
    }
}
