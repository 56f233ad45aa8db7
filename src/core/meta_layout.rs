//! The meta tables of the in-tree layout (storage-layout §2, §4), described
//! once for both engines: each table's columns in order with a logical
//! type, its keys, checks and indexes, and the few places where the two
//! dialects' layouts differ, as data. Each engine's `sql.rs` renders its
//! DDL from [`TABLES`] with its own type map ([`Dialect`]); a tool that
//! copies the meta tables from one engine to the other reads the same list.
//!
//! The text matters, not only the shape: SQLite keeps a table's `CREATE`
//! statement as written, and files the in-tree storage wrote hold that text,
//! so [`Table::lines`] keeps the in-tree storage's line breaks, and a check
//! is kept as written ([`Column::check`]).

/// What a column holds. Each engine maps it to a column type of its own;
/// a copier converts values by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// Text: TEXT on both.
    Text,
    /// A 32-bit integer: INTEGER on both (SQLite's is 64-bit, PostgreSQL's
    /// is not: a copier binds these as 32-bit values).
    Integer,
    /// A 64-bit integer (sequence numbers, milliseconds, versions):
    /// INTEGER in SQLite, BIGINT in PostgreSQL.
    BigInteger,
    /// A small code (`sync_changes.op`): INTEGER / SMALLINT.
    SmallInteger,
    /// A flag: INTEGER 0 or 1 in SQLite, BOOLEAN in PostgreSQL.
    Boolean,
    /// JSON: TEXT in SQLite, JSONB in PostgreSQL.
    Json,
    /// Bytes: BLOB in SQLite, BYTEA in PostgreSQL.
    Bytes,
}

/// A column's `DEFAULT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    Integer(i64),
    /// `false` (0 in SQLite, FALSE in PostgreSQL).
    False,
    /// A text literal.
    Text(&'static str),
}

/// A column older versions' tables lack. Every engine adds it to such a
/// table with `ALTER TABLE … ADD COLUMN` (so there it is the last column);
/// SQLite's `CREATE TABLE` declares it in its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Late {
    /// PostgreSQL's `CREATE TABLE` declares it in its place too.
    Declared,
    /// PostgreSQL's `CREATE TABLE` leaves it out: the `ALTER` after the
    /// table adds it, so in PostgreSQL it is always the table's last column
    /// (as the in-tree PostgreSQL storage makes it).
    PgAltered,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: Type,
    pub not_null: bool,
    pub default: Option<DefaultValue>,
    /// A column constraint as the in-tree text writes it (`CHECK (id = 1)`,
    /// `CHECK(state IN (…))`: spacing and all, see the module header).
    pub check: Option<&'static str>,
    pub late: Option<Late>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Index {
    pub name: &'static str,
    pub columns: &'static [&'static str],
    /// Not made with its table: older versions' files have the table and
    /// its entries without the index, and building it over them takes a
    /// while, so each engine builds it apart (see [`ROW_SCOPES_BY_ROW`]).
    pub late: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: &'static str,
    /// The columns in order, grouped in the lines the in-tree DDL writes
    /// them on (see the module header); [`Table::columns`] flattens them.
    pub lines: &'static [&'static [Column]],
    /// One column: declared on that column (`partition TEXT PRIMARY KEY`);
    /// more: a `PRIMARY KEY(…)` line.
    pub primary_key: &'static [&'static str],
    /// Table constraints, as written.
    pub checks: &'static [&'static str],
    pub indexes: &'static [Index],
}

impl Table {
    /// The columns in the order `CREATE TABLE` declares them in SQLite (a
    /// table an older version wrote has its late columns last; PostgreSQL
    /// has [`Late::PgAltered`] ones last always): copy by name.
    pub fn columns(&self) -> impl Iterator<Item = &'static Column> {
        self.lines.iter().flat_map(|line| line.iter())
    }

    /// `CREATE TABLE IF NOT EXISTS` for `dialect`, declaring the columns
    /// `declare` admits.
    pub fn create(&self, dialect: &Dialect, declare: impl Fn(&Column) -> bool) -> String {
        let mut lines: Vec<String> = self
            .lines
            .iter()
            .map(|line| {
                let defs: Vec<String> = line
                    .iter()
                    .filter(|c| declare(c))
                    .map(|c| self.column_sql(c, dialect))
                    .collect();
                defs.join(", ")
            })
            .filter(|l| !l.is_empty())
            .collect();
        if self.primary_key.len() > 1 {
            lines.push(format!("PRIMARY KEY({})", self.primary_key.join(", ")));
        }
        lines.extend(self.checks.iter().map(|c| c.to_string()));
        format!(
            "CREATE TABLE IF NOT EXISTS {}(\n  {}\n)",
            self.name,
            lines.join(",\n  ")
        )
    }

    /// A column's definition, as `CREATE TABLE` and `ADD COLUMN` write it.
    pub fn column_sql(&self, c: &Column, dialect: &Dialect) -> String {
        let mut s = format!("{} {}", c.name, (dialect.type_name)(c.ty));
        if self.primary_key == [c.name] {
            s.push_str(" PRIMARY KEY");
        }
        if c.not_null {
            s.push_str(" NOT NULL");
        }
        match c.default {
            Some(DefaultValue::Integer(n)) => s.push_str(&format!(" DEFAULT {n}")),
            Some(DefaultValue::False) => s.push_str(&format!(" DEFAULT {}", dialect.false_literal)),
            Some(DefaultValue::Text(t)) => {
                s.push_str(&format!(" DEFAULT '{}'", t.replace('\'', "''")))
            }
            None => {}
        }
        if let Some(check) = c.check {
            s.push(' ');
            s.push_str(check);
        }
        s
    }

    /// `ALTER TABLE … ADD COLUMN` of a late column; `if_missing` adds
    /// PostgreSQL's `IF NOT EXISTS` (SQLite has none: its caller checks).
    pub fn add_column(&self, c: &Column, dialect: &Dialect, if_missing: bool) -> String {
        let guard = if if_missing { "IF NOT EXISTS " } else { "" };
        format!(
            "ALTER TABLE {} ADD COLUMN {guard}{}",
            self.name,
            self.column_sql(c, dialect)
        )
    }

    /// `CREATE INDEX IF NOT EXISTS` of one of its indexes, the `ON` clause
    /// after `sep` (the in-tree text breaks the line there).
    pub fn create_index(&self, ix: &Index, sep: &str) -> String {
        format!(
            "CREATE INDEX IF NOT EXISTS {}{sep}ON {}",
            ix.name,
            self.index_target(ix)
        )
    }

    /// `table(col, …)` of one of its indexes.
    pub fn index_target(&self, ix: &Index) -> String {
        format!("{}({})", self.name, ix.columns.join(", "))
    }
}

/// An engine's column types and literals.
pub struct Dialect {
    pub type_name: fn(Type) -> &'static str,
    pub false_literal: &'static str,
}

/// Every late column, with its table.
pub fn late_columns() -> impl Iterator<Item = (&'static Table, &'static Column)> {
    TABLES.iter().flat_map(|t| {
        t.columns()
            .filter(|c| c.late.is_some())
            .map(move |c| (t, c))
    })
}

/// The table named `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// The index `name`, with its table.
pub fn index(name: &str) -> Option<(&'static Table, &'static Index)> {
    TABLES.iter().find_map(|t| {
        t.indexes
            .iter()
            .find(|ix| ix.name == name)
            .map(|ix| (t, ix))
    })
}

/// The one late index: row scopes by row, which speeds up deleting a row's
/// scope entries (issue 48).
pub const ROW_SCOPES_BY_ROW: &str = "sync_row_scopes_by_row";
/// Where `ensureSchema` keeps the stored schema version (made at open too).
pub const SCHEMA_META: &str = "sync_schema_meta";

const fn col(name: &'static str, ty: Type) -> Column {
    Column {
        name,
        ty,
        not_null: true,
        default: None,
        check: None,
        late: None,
    }
}
const fn text(name: &'static str) -> Column {
    col(name, Type::Text)
}
const fn int(name: &'static str) -> Column {
    col(name, Type::Integer)
}
const fn big(name: &'static str) -> Column {
    col(name, Type::BigInteger)
}
const fn json(name: &'static str) -> Column {
    col(name, Type::Json)
}

impl Column {
    const fn null(self) -> Column {
        Column {
            not_null: false,
            ..self
        }
    }
    const fn default(self, d: DefaultValue) -> Column {
        Column {
            default: Some(d),
            ..self
        }
    }
    const fn check(self, c: &'static str) -> Column {
        Column {
            check: Some(c),
            ..self
        }
    }
    const fn late(self, l: Late) -> Column {
        Column {
            late: Some(l),
            ..self
        }
    }
}

const fn index_on(name: &'static str, columns: &'static [&'static str]) -> Index {
    Index {
        name,
        columns,
        late: false,
    }
}

use DefaultValue::Integer as Int;

/// The meta tables in the order they are made, each with its indexes.
/// Columns are `NOT NULL` unless `.null()`; a one-column primary key
/// declares none (as written).
pub const TABLES: &[Table] = &[
    Table {
        name: "sync_partitions",
        lines: &[
            &[text("partition").null()],
            &[big("max_commit_seq").default(Int(0))],
            &[big("horizon_seq").default(Int(0))],
        ],
        primary_key: &["partition"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_partition_registry",
        lines: &[
            &[text("partition").null()],
            &[text("log_epoch")],
            &[col("epoch_required", Type::Boolean).default(DefaultValue::False)],
            &[big("last_authenticated_at_ms")],
        ],
        primary_key: &["partition"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_row_scopes",
        lines: &[
            &[text("partition"), text("tbl")],
            &[text("var"), text("value"), text("row_id")],
        ],
        primary_key: &["partition", "tbl", "var", "value", "row_id"],
        checks: &[],
        indexes: &[Index {
            name: ROW_SCOPES_BY_ROW,
            columns: &["partition", "tbl", "row_id"],
            late: true,
        }],
    },
    Table {
        name: "sync_commits",
        lines: &[
            &[text("partition"), big("commit_seq")],
            &[text("client_id"), text("client_commit_id")],
            &[text("actor_id"), big("created_at_ms")],
            &[big("writer_version").null().late(Late::Declared)],
        ],
        primary_key: &["partition", "commit_seq"],
        checks: &[],
        indexes: &[index_on(
            "sync_commits_by_time",
            &["partition", "created_at_ms"],
        )],
    },
    Table {
        name: "sync_changes",
        lines: &[
            &[text("partition"), big("commit_seq"), int("idx")],
            &[text("tbl"), text("row_id"), col("op", Type::SmallInteger)],
            &[
                big("row_version").null(),
                json("scopes"),
                col("payload", Type::Bytes).null(),
            ],
        ],
        primary_key: &["partition", "commit_seq", "idx"],
        checks: &[],
        indexes: &[index_on(
            "sync_changes_by_table",
            &["partition", "commit_seq", "tbl", "idx"],
        )],
    },
    Table {
        name: "sync_change_scopes",
        lines: &[
            &[text("partition"), text("tbl")],
            &[text("var"), text("value"), big("commit_seq")],
        ],
        primary_key: &["partition", "tbl", "var", "value", "commit_seq"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_push_results",
        lines: &[
            &[text("partition"), text("client_id")],
            &[text("client_commit_id"), json("result")],
        ],
        primary_key: &["partition", "client_id", "client_commit_id"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_reactions",
        lines: &[
            &[text("partition"), text("idempotency_key")],
            &[text("type"), int("version"), json("payload")],
            &[text("source_client_id"), text("source_client_commit_id")],
            &[big("source_commit_seq"), big("created_at_ms")],
            &[big("available_at_ms"), text("status")],
            &[int("attempts"), int("max_attempts")],
            &[
                text("lease_owner").null(),
                big("lease_expires_at_ms").null(),
                big("completed_at_ms").null(),
            ],
            &[json("last_failure").null()],
        ],
        primary_key: &["partition", "idempotency_key"],
        checks: &["CHECK(status IN ('pending', 'leased', 'completed', 'dead-letter'))"],
        indexes: &[
            index_on(
                "sync_reactions_due",
                &[
                    "partition",
                    "status",
                    "available_at_ms",
                    "created_at_ms",
                    "idempotency_key",
                ],
            ),
            index_on(
                "sync_reactions_lease",
                &["partition", "status", "lease_expires_at_ms"],
            ),
            index_on(
                "sync_reactions_completed",
                &["partition", "status", "completed_at_ms", "idempotency_key"],
            ),
            index_on(
                "sync_reactions_dead_letter",
                &["partition", "status", "available_at_ms", "idempotency_key"],
            ),
        ],
    },
    Table {
        name: "sync_clients",
        lines: &[
            &[text("partition"), text("client_id"), text("actor_id")],
            &[int("wire_version").default(Int(1)).late(Late::PgAltered)],
            &[big("cursor"), json("subscriptions")],
            &[big("updated_at_ms")],
        ],
        primary_key: &["partition", "client_id"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_blob_refs",
        lines: &[
            &[text("partition"), text("tbl"), text("row_id")],
            &[text("blob_id")],
        ],
        primary_key: &["partition", "tbl", "row_id", "blob_id"],
        checks: &[],
        indexes: &[index_on(
            "sync_blob_refs_by_blob",
            &["partition", "blob_id"],
        )],
    },
    Table {
        name: "sync_tombstones",
        lines: &[
            &[text("partition"), text("tbl"), text("row_id")],
            &[big("commit_seq")],
        ],
        primary_key: &["partition", "tbl", "row_id"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_backfill_checkpoints",
        lines: &[
            &[text("partition"), text("name")],
            &[int("schema_version")],
            &[text("state").check("CHECK(state IN ('declared', 'backfilling', 'activated'))")],
            &[big("watermark").default(Int(0))],
            &[big("owner_epoch").default(Int(0))],
            &[big("observed_rows").default(Int(0))],
            &[big("updated_at_ms")],
        ],
        primary_key: &["partition", "name"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: "sync_writer_fence",
        lines: &[
            &[text("partition").null()],
            &[int("required_writer_version")],
        ],
        primary_key: &["partition"],
        checks: &[],
        indexes: &[],
    },
    Table {
        name: SCHEMA_META,
        lines: &[
            &[int("id").null().check("CHECK (id = 1)")],
            // BIGINT in PostgreSQL, where the checkpoints' is INTEGER.
            &[big("schema_version")],
            // TEXT, not JSON, on both.
            &[text("layouts").default(DefaultValue::Text("{}"))],
        ],
        primary_key: &["id"],
        checks: &[],
        indexes: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_keys_name_columns() {
        let mut names: Vec<&str> = TABLES
            .iter()
            .flat_map(|t| std::iter::once(t.name).chain(t.indexes.iter().map(|ix| ix.name)))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        for t in TABLES {
            let cols: Vec<&str> = t.columns().map(|c| c.name).collect();
            for k in t
                .primary_key
                .iter()
                .chain(t.indexes.iter().flat_map(|ix| ix.columns))
            {
                assert!(cols.contains(k), "{}.{k}", t.name);
            }
        }
    }

    #[test]
    fn the_late_pieces() {
        let late: Vec<(&str, &str)> = late_columns().map(|(t, c)| (t.name, c.name)).collect();
        assert_eq!(
            late,
            [
                ("sync_commits", "writer_version"),
                ("sync_clients", "wire_version")
            ]
        );
        let (t, ix) = index(ROW_SCOPES_BY_ROW).unwrap();
        assert!(ix.late && t.name == "sync_row_scopes");
        assert_eq!(
            TABLES
                .iter()
                .flat_map(|t| t.indexes)
                .filter(|ix| ix.late)
                .count(),
            1
        );
        assert!(table(SCHEMA_META).is_some());
    }
}
