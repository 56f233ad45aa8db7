// The benchmark's schema and payloads, shared by every workload and module.
// Payloads are encoded with the Syncular row codec (null bitmap, then
// u32-length strings and an i64), and vary per commit so writes are real.

export const TABLE = 'tasks';

const COLUMNS = [
  { name: 'id', type: 'string', nullable: false },
  { name: 'project_id', type: 'string', nullable: false },
  { name: 'title', type: 'string', nullable: true },
  { name: 'n', type: 'integer', nullable: true },
];

// The same table as a host declares it (the uncompiled schema a sync
// request context carries); the host compiles it into the form below.
export const serverSchema = {
  version: 1,
  tables: [{ name: TABLE, columns: COLUMNS, primaryKey: 'id', scopes: ['project:{project_id}'] }],
};

export const schema = {
  version: 1,
  declaredVariables: new Set(['project_id']),
  tables: new Map([
    [
      TABLE,
      {
        name: TABLE,
        columns: COLUMNS,
        primaryKeyIndex: 0,
        scopePatterns: [{ variable: 'project_id', prefix: 'project', column: 'project_id', columnIndex: 1 }],
        indexes: [],
        materialize: true,
        columnIndex: new Map([
          ['id', 0],
          ['project_id', 1],
          ['title', 2],
          ['n', 3],
        ]),
        declaredVariables: new Set(['project_id']),
        blobRefColumnIndices: [],
        crdtColumns: [],
        encryptedColumnIndices: [],
        references: [],
        referencedBy: [],
      },
    ],
  ]),
};

// The same schema with an index on project_id, for scanRowsByIndex.
export const INDEX = 'tasks_by_project';
export const indexedSchema = {
  ...schema,
  tables: new Map([[TABLE, { ...schema.tables.get(TABLE), indexes: [{ name: INDEX, columns: ['project_id'] }] }]]),
};

const utf8 = new TextEncoder();

export function encodeTask(id, projectId, n) {
  const parts = [id, projectId, `title ${n}`].map((s) => utf8.encode(s));
  const size = 1 + parts.reduce((a, p) => a + 4 + p.length, 0) + 8;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let at = 1;
  for (const p of parts) {
    view.setUint32(at, p.length, true);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  view.setBigInt64(at, BigInt(n), true);
  return out;
}
