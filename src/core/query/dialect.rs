//! Placeholder renumbering for PostgreSQL (storage-layout §13.5): the
//! rewritten SQL keeps SQLite-family text, and only each `?` outside
//! protected regions (strings, quoted names, comments) becomes `$1`, `$2`,
//! … in textual order.

use super::lex::{tokenize, Kind};

/// `sql` with every bare `?` placeholder numbered `$n`. Expects flattened
/// SQL ([`super::Prepared::sql`]): a `?NNN` is refused by the caller's
/// bind count check, never renumbered here.
pub fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut copied = 0;
    let mut n = 0;
    for t in tokenize(sql) {
        if t.kind == Kind::Param && t.end - t.start == 1 {
            n += 1;
            out.push_str(&sql[copied..t.start]);
            out.push('$');
            out.push_str(&n.to_string());
            copied = t.end;
        }
    }
    out.push_str(&sql[copied..]);
    out
}

/// How many `?` placeholders [`dollar_params`] numbers.
pub fn count_params(sql: &str) -> usize {
    tokenize(sql)
        .iter()
        .filter(|t| t.kind == Kind::Param)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_only_bare_placeholders_outside_protected_regions() {
        assert_eq!(
            dollar_params("SELECT '?', \"a?\" FROM t -- ?\n WHERE a = ? AND /* ? */ b IN (?, ?)"),
            "SELECT '?', \"a?\" FROM t -- ?\n WHERE a = $1 AND /* ? */ b IN ($2, $3)"
        );
        assert_eq!(dollar_params("SELECT 1"), "SELECT 1");
        assert_eq!(count_params("SELECT ? , '?' , ?"), 2);
    }
}
