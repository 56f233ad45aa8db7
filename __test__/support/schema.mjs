// Builders for a CompiledSchema shaped exactly as the @syncular/server host
// passes it to ServerStorage.ensureSchema: Maps and Sets included.

/** A column descriptor: { name, type, nullable }. */
export function col(name, type, nullable = false) {
  return { name, type, nullable };
}

/**
 * Build a CompiledTable.
 * @param {string} name
 * @param {{name:string,type:string,nullable:boolean}[]} columns
 * @param {object} [opts]
 * @param {string} [opts.primaryKey] column name of the primary key (default: first column)
 * @param {{variable:string,column:string,prefix?:string}[]} [opts.scopes]
 * @param {{name:string,columns:string[],unique?:boolean}[]} [opts.indexes]
 * @param {boolean} [opts.materialize] default true
 */
export function table(name, columns, opts = {}) {
  const cols = columns.map((c) => ({ ...c }));
  const columnIndex = new Map(cols.map((c, i) => [c.name, i]));
  const pkName = opts.primaryKey ?? cols[0].name;
  if (!columnIndex.has(pkName)) throw new Error(`primary key ${pkName} is not a column of ${name}`);
  const scopePatterns = (opts.scopes ?? []).map((s) => {
    const columnName = s.column ?? s.variable;
    if (!columnIndex.has(columnName)) {
      throw new Error(`scope column ${columnName} is not a column of ${name}`);
    }
    return {
      variable: s.variable,
      prefix: s.prefix ?? s.variable,
      column: columnName,
      columnIndex: columnIndex.get(columnName),
    };
  });
  const indexes = (opts.indexes ?? []).map((ix) => {
    const out = { name: ix.name, columns: [...ix.columns] };
    if (ix.unique !== undefined) out.unique = ix.unique;
    return out;
  });
  const blobRefColumnIndices = [];
  const crdtColumns = [];
  const encryptedColumnIndices = [];
  cols.forEach((c, i) => {
    if (c.type === 'blob_ref') blobRefColumnIndices.push(i);
    if (c.type === 'crdt') crdtColumns.push({ index: i, crdtType: c.crdtType ?? 'yjs' });
    if (c.encrypted) encryptedColumnIndices.push(i);
  });
  return {
    name,
    columns: cols,
    primaryKeyIndex: columnIndex.get(pkName),
    scopePatterns,
    indexes,
    materialize: opts.materialize ?? true,
    columnIndex,
    declaredVariables: new Set(scopePatterns.map((s) => s.variable)),
    blobRefColumnIndices,
    crdtColumns,
    encryptedColumnIndices,
    references: [],
    referencedBy: [],
  };
}

/** Build a CompiledSchema from a version and a list of CompiledTables. */
export function schema(version, tables) {
  const map = new Map();
  const vars = new Set();
  for (const t of tables) {
    map.set(t.name, t);
    for (const v of t.declaredVariables) vars.add(v);
  }
  return { version, tables: map, declaredVariables: vars };
}

// ---------------------------------------------------------------------------
// The fixture schema shared by the contract cases.

export const TASK_COLUMNS = [
  col('id', 'string'),
  col('project_id', 'string'),
  col('owner_id', 'string'),
  col('title', 'string'),
  col('done', 'boolean'),
  col('count', 'integer', true),
  col('score', 'float', true),
  col('meta', 'json', true),
  col('data', 'bytes', true),
  col('file', 'blob_ref', true),
];

export const ACCOUNT_COLUMNS = [col('id', 'string'), col('org_id', 'string'), col('email', 'string')];

export const NOTE_COLUMNS = [col('id', 'string'), col('project_id', 'string'), col('body', 'string')];

export function tasksTable(extra = {}) {
  return table('tasks', TASK_COLUMNS, {
    scopes: [
      { variable: 'project_id', prefix: 'project' },
      { variable: 'owner_id', prefix: 'user' },
    ],
    indexes: [{ name: 'tasks_by_title', columns: ['title'] }],
    ...extra,
  });
}

export function accountsTable(extra = {}) {
  return table('accounts', ACCOUNT_COLUMNS, {
    scopes: [{ variable: 'org_id', prefix: 'org' }],
    indexes: [{ name: 'accounts_email', columns: ['email'], unique: true }],
    ...extra,
  });
}

/** Not materialized: only meta columns exist, payloads are not validated. */
export function notesTable(extra = {}) {
  return table('notes', NOTE_COLUMNS, {
    scopes: [{ variable: 'project_id', prefix: 'project' }],
    indexes: [{ name: 'notes_body', columns: ['body'], unique: true }],
    materialize: false,
    ...extra,
  });
}

export function fixtureSchema(version = 1) {
  return schema(version, [tasksTable(), accountsTable(), notesTable()]);
}
