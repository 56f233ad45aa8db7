//! SQL literals for the text the engine builds: the simple-protocol batches
//! (the lock batch, deferred appends and upserts, the push result sent with
//! `COMMIT`), registered queries' settings, and the close-time cancel. Each
//! reads the same whatever `standard_conforming_strings` says; a value that
//! cannot be a literal (a NUL) gives `None`, and the caller binds it instead.

/// `E'…'`, a string literal that reads the same whatever
/// `standard_conforming_strings` says, or `None` for a value holding a NUL
/// (which PostgreSQL text cannot hold).
pub fn lit(s: &str) -> Option<String> {
    if s.contains('\0') {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 4);
    out.push_str("E'");
    for ch in s.chars() {
        match ch {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out.push('\'');
    Some(out)
}

/// `ARRAY[…]::pg_catalog.ty[]` of elements already written as literals
/// (`None`: one could not be); the type named in `pg_catalog`, whatever an
/// operator's `search_path` puts first.
pub fn array(ty: &str, items: impl Iterator<Item = Option<String>>) -> Option<String> {
    let items: Vec<String> = items.collect::<Option<_>>()?;
    Some(if items.is_empty() {
        format!("'{{}}'::pg_catalog.{ty}[]")
    } else {
        format!("ARRAY[{}]::pg_catalog.{ty}[]", items.join(","))
    })
}

/// A `text[]` of string literals.
pub fn texts<S: AsRef<str>>(items: &[S]) -> Option<String> {
    array("text", items.iter().map(|s| lit(s.as_ref())))
}

/// `E'\\x…'` (hex), or `NULL`.
pub fn bytea(p: Option<&[u8]>) -> String {
    use std::fmt::Write;
    match p {
        None => "NULL".to_owned(),
        Some(b) => {
            let mut out = String::with_capacity(b.len() * 2 + 6);
            out.push_str("E'\\\\x");
            for byte in b {
                let _ = write!(out, "{byte:02x}");
            }
            out.push('\'');
            out
        }
    }
}
