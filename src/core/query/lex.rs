//! A SQL tokenizer for the SQLite family, enough to find relations and
//! placeholders without being fooled by literals, quoted names or comments.
//! Every byte of the input belongs to exactly one token or to the gap
//! (whitespace and comments) before a token, so a rewrite can copy the text
//! it does not touch verbatim.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A bare word: keyword or unquoted identifier (`[A-Za-z_\x80-]…`).
    Word,
    /// `'…'` (a doubled quote escapes). SQLite accepts it as an identifier
    /// where a name is expected, so relation checks treat it as one.
    Str,
    /// `"…"` with doubled quotes.
    DoubleQuoted,
    /// `` `…` `` with doubled backticks.
    Backtick,
    /// `[…]` (no escape).
    Bracket,
    /// A numeric literal.
    Number,
    /// `?` or `?NNN`.
    Param,
    /// `:name`, `@name`, `$name`: a named parameter.
    NamedParam,
    /// One punctuation or operator character (multi-character operators
    /// come out as several tokens, which is enough here).
    Punct,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    /// Byte range in the source.
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'a>(&self, sql: &'a str) -> &'a str {
        &sql[self.start..self.end]
    }

    pub fn is_punct(&self, sql: &str, c: char) -> bool {
        self.kind == Kind::Punct && self.text(sql).starts_with(c)
    }

    /// A bare word equal to `kw`, case-insensitively.
    pub fn is_kw(&self, sql: &str, kw: &str) -> bool {
        self.kind == Kind::Word && self.text(sql).eq_ignore_ascii_case(kw)
    }

    /// Whether SQLite may read this token as a name.
    pub fn is_name(&self) -> bool {
        matches!(
            self.kind,
            Kind::Word | Kind::Str | Kind::DoubleQuoted | Kind::Backtick | Kind::Bracket
        )
    }

    /// The name this token denotes, quotes removed and doubled quotes
    /// collapsed. `None` for tokens that are not names.
    pub fn name(&self, sql: &str) -> Option<String> {
        let t = self.text(sql);
        match self.kind {
            Kind::Word => Some(t.to_owned()),
            Kind::Bracket => Some(strip(t, 1, ']').to_owned()),
            Kind::Str => Some(unquote(t, '\'')),
            Kind::DoubleQuoted => Some(unquote(t, '"')),
            Kind::Backtick => Some(unquote(t, '`')),
            _ => None,
        }
    }
}

/// The body of a quoted token; tolerates a missing closing quote.
fn strip(t: &str, open: usize, close: char) -> &str {
    let body = &t[open..];
    body.strip_suffix(close).unwrap_or(body)
}

fn unquote(t: &str, q: char) -> String {
    let body = strip(t, q.len_utf8(), q);
    let mut doubled = String::with_capacity(2);
    doubled.push(q);
    doubled.push(q);
    body.replace(&doubled, &q.to_string())
}

pub fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

pub fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// End (exclusive) of a protected region (string, quoted name, comment)
/// starting at byte `i`, or `None` when none starts there. An unterminated
/// region runs to the end of the input.
pub fn protected_end(s: &[u8], i: usize) -> Option<usize> {
    let c = s[i];
    let next = s.get(i + 1).copied();
    match c {
        b'\'' | b'"' | b'`' => {
            let mut j = i + 1;
            while j < s.len() {
                if s[j] == c {
                    if s.get(j + 1) == Some(&c) {
                        j += 2;
                        continue;
                    }
                    return Some(j + 1);
                }
                j += 1;
            }
            Some(s.len())
        }
        b'[' => Some(
            s[i + 1..]
                .iter()
                .position(|&b| b == b']')
                .map_or(s.len(), |p| i + 1 + p + 1),
        ),
        b'-' if next == Some(b'-') => Some(
            s[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(s.len(), |p| i + p),
        ),
        b'/' if next == Some(b'*') => Some(
            s[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(s.len(), |p| i + 2 + p + 2),
        ),
        _ => None,
    }
}

/// Splits `sql` into tokens; whitespace and comments are left in the gaps.
pub fn tokenize(sql: &str) -> Vec<Token> {
    let s = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if let Some(end) = protected_end(s, i) {
            let kind = match c {
                b'\'' => Some(Kind::Str),
                b'"' => Some(Kind::DoubleQuoted),
                b'`' => Some(Kind::Backtick),
                b'[' => Some(Kind::Bracket),
                _ => None, // a comment
            };
            if let Some(kind) = kind {
                out.push(Token {
                    kind,
                    start: i,
                    end,
                });
            }
            i = end;
            continue;
        }
        let start = i;
        let kind = if is_ident_start(c) {
            while i < s.len() && is_ident_char(s[i]) {
                i += 1;
            }
            Kind::Word
        } else if c.is_ascii_digit() || (c == b'.' && s.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            i += 1;
            while i < s.len() {
                let b = s[i];
                let exponent_sign = (b == b'+' || b == b'-') && matches!(s[i - 1], b'e' | b'E');
                if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            Kind::Number
        } else if c == b'?' {
            i += 1;
            while i < s.len() && s[i].is_ascii_digit() {
                i += 1;
            }
            Kind::Param
        } else if matches!(c, b':' | b'@' | b'$') && s.get(i + 1).is_some_and(|&b| is_ident_char(b))
        {
            i += 1;
            while i < s.len() && is_ident_char(s[i]) {
                i += 1;
            }
            Kind::NamedParam
        } else {
            i += 1;
            Kind::Punct
        };
        out.push(Token {
            kind,
            start,
            end: i,
        });
    }
    out
}
