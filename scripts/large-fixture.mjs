// A large database as the in-tree 0.15.48 SqliteServerStorage leaves it
// after upstream's handler applied N pushes over P partitions (issue 48),
// written fast: the pushes are modelled here (versions, scopes, push
// results as the handler computes them) and their end state is written by
// direct SQL (prepared statements through node:sqlite where the runtime has
// it, Node 22.13 and later; SQL text piped to the sqlite3 shell otherwise:
// the same file either way), instead of one handler request each (which
// takes hours at a million commits). Tests and the bench use it
// to exercise swap-in on files of that size; __test__/host/large-fixture.ts
// checks it against the in-tree storage driven with the same pushes.
// Nothing of upstream is copied: the layout below is the database's own
// (the DDL text each object's sqlite_master entry holds in a 0.15.48 file,
// see __test__/fixtures/intree-0.15.48.db), the row codec is written from
// the wire format (storage-layout.md).
//
//   node scripts/large-fixture.mjs OUT.db [--commits N] [--partitions P] [--seed S] [--rows R] [--boot-rows B]
//     [--engine auto|node:sqlite|sqlite3] [--cache-mib M] [--progress 1]
//
// Deterministic: the same options give the same rows and schema, in the
// same order (byte for byte as SQL text, whichever engine wrote them).
import { spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const BASE_MS = 1_750_000_000_000;
export const UPSTREAM_VERSION = '0.15.48';
/** The wire version of the requests (and so of the client records). */
export const WIRE_VERSION = 2;

// ---------------------------------------------------------------------------
// The host's schema (ServerSchema form, what a host hands compileSchema).

const s = (name, nullable = false) => ({ name, type: 'string', nullable });
export const serverSchema = {
  version: 1,
  tables: [
    {
      name: 'tasks',
      columns: [s('id'), s('project_id'), s('owner_id'), s('slug'), s('title'), { name: 'n', type: 'integer', nullable: false }, { name: 'done', type: 'boolean', nullable: false }, s('note', true)],
      primaryKey: 'id',
      scopes: ['project:{project_id}', 'user:{owner_id}'],
      indexes: [
        { name: 'tasks_by_owner', columns: ['owner_id'] },
        // Unique, and (as 0.15.48 creates it) across partitions.
        { name: 'tasks_slug_unique', columns: ['slug'], unique: true },
        { name: 'tasks_by_project_n', columns: ['project_id', 'n'] },
      ],
      materialize: true,
    },
    {
      name: 'notes',
      columns: [s('id'), s('project_id'), s('body', true)],
      primaryKey: 'id',
      scopes: ['project:{project_id}'],
      indexes: [{ name: 'notes_by_project', columns: ['project_id'] }],
      materialize: true,
    },
    {
      name: 'audit',
      columns: [s('id'), s('project_id'), s('kind')],
      primaryKey: 'id',
      scopes: ['project:{project_id}'],
      materialize: false,
    },
  ],
};

/** Scope variable → column, per table, in the order of its scope patterns. */
const SCOPES = {
  tasks: [['project_id', 1], ['owner_id', 2]],
  notes: [['project_id', 1]],
  audit: [['project_id', 1]],
};
export const PROJECTS = 4;

// ---------------------------------------------------------------------------
// Row codec (null bitmap, then each non-null value: strings u32 LE length
// + UTF-8, integers i64 LE, booleans one byte).

export function encodeRow(columns, values) {
  const parts = [];
  const bitmap = Buffer.alloc(Math.ceil(columns.length / 8));
  columns.forEach((c, i) => {
    const v = values[i];
    if (v === null) {
      bitmap[i >> 3] |= 1 << (i & 7);
      return;
    }
    if (c.type === 'string') {
      const b = Buffer.from(v, 'utf8');
      const len = Buffer.alloc(4);
      len.writeUInt32LE(b.length);
      parts.push(len, b);
    } else if (c.type === 'integer') {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(BigInt(v));
      parts.push(b);
    } else if (c.type === 'boolean') {
      parts.push(Buffer.from([v ? 1 : 0]));
    } else throw new Error(`no codec for ${c.type}`);
  });
  return Buffer.concat([bitmap, ...parts]);
}

const columnsOf = Object.fromEntries(serverSchema.tables.map((t) => [t.name, t.columns]));

// ---------------------------------------------------------------------------
// The pushes, and what the handler makes of them.

/** mulberry32: a small seeded generator, the same sequence everywhere. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function partitionName(i) {
  return `part-${String(i).padStart(3, '0')}`;
}

function uuid(rand) {
  const hex = () => Math.floor(rand() * 0x10000).toString(16).padStart(4, '0');
  return `${hex()}${hex()}-${hex()}-4${hex().slice(1)}-a${hex().slice(1)}-${hex()}${hex()}${hex()}`;
}

/**
 * The logical history, commit by commit in the order the host received
 * them (partitions interleaved): for each, the request a client sent
 * (`clientId`, `clientCommitId`, `actorId`, `ops` as PUSH_COMMIT
 * operations), the handler's clock and cacheIdentity for it, and what the
 * handler writes (`seq`, `changes` with versions and scopes). Returns
 * every partition's state at the end (its rows, clients, counter).
 *
 * `bootRows` > 0 adds one more partition, `BOOT_PARTITION`, after the
 * others: that many new tasks of project proj1 in commits of 100 (what
 * bench/scale.mjs bootstraps).
 */
export function* history({ commits, partitions, seed = 1, rows = 500, bootRows = 0 }) {
  const rand = prng(seed);
  const newPart = (name) => ({ name, seq: 0, live: { tasks: new Map(), notes: new Map(), audit: new Map() }, notesQueue: [], notesHead: 0, clients: new Map() });
  const parts = Array.from({ length: partitions }, (_, i) => newPart(partitionName(i)));
  const task = (p, t, project, seq, g) => ({ table: 'tasks', rowId: `t${t}`, op: 'upsert', values: taskValues(p.name, t, project, seq, g) });
  for (let g = 0; g < commits; g++) {
    const p = parts[g % partitions];
    const seq = p.seq + 1;
    const ops = [];
    const upsert = (table, rowId, values) => ops.push({ table, rowId, op: 'upsert', values });
    const first = Math.floor(rand() * rows);
    const picks = [first];
    if (rand() < 0.25) picks.push((first + 1 + Math.floor(rand() * (rows - 1))) % rows);
    for (const t of picks) ops.push(task(p, t, undefined, seq, g));
    if (rand() < 0.5) {
      upsert('notes', `n${seq}`, noteValues(seq));
    }
    // A queue by index: Array#shift on a queue this long copies it whole
    // each time (quadratic over ten million commits).
    if (seq % 5 === 0 && p.notesHead < p.notesQueue.length) ops.push({ table: 'notes', rowId: `n${p.notesQueue[p.notesHead++]}`, op: 'delete' });
    if (rand() < 0.2) {
      // Scope values never change on update (the handler would put the
      // stored ones back into the payload).
      const a = Math.floor(rand() * rows);
      upsert('audit', `a${a}`, auditValues(a, seq));
    }
    yield applied(p, ops, g, rand);
  }
  if (bootRows > 0) {
    const p = newPart(BOOT_PARTITION);
    parts.push(p);
    for (let at = 0, g = commits; at < bootRows; at += 100, g++) {
      const seq = p.seq + 1;
      const ops = [];
      for (let t = at; t < Math.min(bootRows, at + 100); t++) ops.push(task(p, t, 'proj1', seq, g));
      yield applied(p, ops, g, rand);
    }
  }
  return parts;
}

/** Partition of `history`'s `bootRows`. */
export const BOOT_PARTITION = 'boot';

// A row's values, from what its last write was made of. The end state keeps
// only that (version, commit seq, commit index) per live row and rebuilds
// values, payload and scopes when it writes the row: ten million commits
// over 100,000 partitions leave some 16M live rows, too many to hold whole.
function taskValues(partition, t, project, seq, g) {
  return [`t${t}`, project ?? `proj${t % PROJECTS}`, `u${t % 7}`, `${partition}/t${t}`, `title ${seq}`, seq, seq % 2 === 0, seq % 3 === 0 ? null : `note ${g}`];
}
function noteValues(seq) {
  return [`n${seq}`, `proj${seq % PROJECTS}`, seq % 4 === 0 ? null : `body ${seq} ✓`];
}
function auditValues(a, seq) {
  return [`a${a}`, `proj${a % PROJECTS}`, `kind-${seq % 3}`];
}
/** The values of live row `rowId` of `table` in partition `p`, last written by commit `seq` (the `g`-th). */
function liveValues(p, table, rowId, seq, g) {
  const n = Number(rowId.slice(1));
  if (table === 'tasks') return taskValues(p.name, n, p.name === BOOT_PARTITION ? 'proj1' : undefined, seq, g);
  if (table === 'notes') return noteValues(n);
  return auditValues(n, seq);
}
/** A row's scopes: fixed by its first write, and no write changes the columns they come from. */
const scopesOf = (table, values) => Object.fromEntries(SCOPES[table].map(([v, i]) => [v, values[i]]));

/** What the handler makes of `ops` as partition `p`'s next commit (the `g`-th in all). */
function applied(p, ops, g, rand) {
  const seq = ++p.seq;
  const changes = [];
  for (const op of ops) {
    const live = p.live[op.table];
    const stored = live.get(op.rowId);
    if (op.op === 'delete') {
      live.delete(op.rowId);
      const scopes = scopesOf(op.table, liveValues(p, op.table, op.rowId, stored.seq, stored.g));
      changes.push({ table: op.table, rowId: op.rowId, op: 'delete', rowVersion: null, scopes, payload: null });
      continue;
    }
    op.payload = encodeRow(columnsOf[op.table], op.values);
    const version = stored ? stored.version + 1 : 1;
    const scopes = scopesOf(op.table, op.values);
    live.set(op.rowId, { version, seq, g });
    if (!stored && op.table === 'notes') p.notesQueue.push(seq);
    changes.push({ table: op.table, rowId: op.rowId, op: 'upsert', rowVersion: version, scopes, payload: op.payload });
  }
  const createdAtMs = BASE_MS + g;
  // A client id stays bound to one actor (the handler refuses another).
  const clientId = `client-${seq % 3}`;
  const actorId = `actor-${seq % 3}`;
  // Each request leaves the client's record: no pull yet, so cursor -1
  // and no subscriptions, stamped with the handler's clock.
  p.clients.set(clientId, { actorId, updatedAtMs: createdAtMs });
  return {
    g,
    partition: p.name,
    seq,
    clientId,
    clientCommitId: `cc-${seq}`,
    actorId,
    createdAtMs,
    cacheIdentity: uuid(rand),
    ops: ops.map(({ table, rowId, op, payload }) => (op === 'delete' ? { table, rowId, op } : { table, rowId, op, payload })),
    changes,
  };
}

// ---------------------------------------------------------------------------
// The layout, as 0.15.48 creates it: the storage's constructor runs its meta
// DDL, ensureSchema creates sync_schema_meta, then each declared table and
// its indexes, then records the schema version and the column layouts.

const META_DDL = `
CREATE TABLE IF NOT EXISTS sync_partitions(
  partition TEXT PRIMARY KEY,
  max_commit_seq INTEGER NOT NULL DEFAULT 0,
  horizon_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sync_partition_registry(
  partition TEXT PRIMARY KEY,
  log_epoch TEXT NOT NULL,
  epoch_required INTEGER NOT NULL DEFAULT 0,
  last_authenticated_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sync_row_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, row_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, row_id)
);
CREATE TABLE IF NOT EXISTS sync_commits(
  partition TEXT NOT NULL, commit_seq INTEGER NOT NULL,
  client_id TEXT NOT NULL, client_commit_id TEXT NOT NULL,
  actor_id TEXT NOT NULL, created_at_ms INTEGER NOT NULL,
  PRIMARY KEY(partition, commit_seq)
);
CREATE INDEX IF NOT EXISTS sync_commits_by_time
  ON sync_commits(partition, created_at_ms);
CREATE TABLE IF NOT EXISTS sync_changes(
  partition TEXT NOT NULL, commit_seq INTEGER NOT NULL, idx INTEGER NOT NULL,
  tbl TEXT NOT NULL, row_id TEXT NOT NULL, op INTEGER NOT NULL,
  row_version INTEGER, scopes TEXT NOT NULL, payload BLOB,
  PRIMARY KEY(partition, commit_seq, idx)
);
CREATE INDEX IF NOT EXISTS sync_changes_by_table
  ON sync_changes(partition, commit_seq, tbl, idx);
CREATE TABLE IF NOT EXISTS sync_change_scopes(
  partition TEXT NOT NULL, tbl TEXT NOT NULL,
  var TEXT NOT NULL, value TEXT NOT NULL, commit_seq INTEGER NOT NULL,
  PRIMARY KEY(partition, tbl, var, value, commit_seq)
);
CREATE TABLE IF NOT EXISTS sync_push_results(
  partition TEXT NOT NULL, client_id TEXT NOT NULL,
  client_commit_id TEXT NOT NULL, result TEXT NOT NULL,
  PRIMARY KEY(partition, client_id, client_commit_id)
);
CREATE TABLE IF NOT EXISTS sync_reactions(
  partition TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  type TEXT NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL,
  source_client_id TEXT NOT NULL, source_client_commit_id TEXT NOT NULL,
  source_commit_seq INTEGER NOT NULL, created_at_ms INTEGER NOT NULL,
  available_at_ms INTEGER NOT NULL, status TEXT NOT NULL,
  attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL,
  lease_owner TEXT, lease_expires_at_ms INTEGER, completed_at_ms INTEGER,
  last_failure TEXT,
  PRIMARY KEY(partition, idempotency_key),
  CHECK(status IN ('pending', 'leased', 'completed', 'dead-letter'))
);
CREATE INDEX IF NOT EXISTS sync_reactions_due
  ON sync_reactions(partition, status, available_at_ms, created_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_lease
  ON sync_reactions(partition, status, lease_expires_at_ms);
CREATE INDEX IF NOT EXISTS sync_reactions_completed
  ON sync_reactions(partition, status, completed_at_ms, idempotency_key);
CREATE INDEX IF NOT EXISTS sync_reactions_dead_letter
  ON sync_reactions(partition, status, available_at_ms, idempotency_key);
CREATE TABLE IF NOT EXISTS sync_clients(
  partition TEXT NOT NULL, client_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  wire_version INTEGER NOT NULL DEFAULT 1,
  cursor INTEGER NOT NULL, subscriptions TEXT NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  PRIMARY KEY(partition, client_id)
);
CREATE TABLE IF NOT EXISTS sync_blob_refs(
  partition TEXT NOT NULL, tbl TEXT NOT NULL, row_id TEXT NOT NULL,
  blob_id TEXT NOT NULL,
  PRIMARY KEY(partition, tbl, row_id, blob_id)
);
CREATE INDEX IF NOT EXISTS sync_blob_refs_by_blob
  ON sync_blob_refs(partition, blob_id);
`;

const SCHEMA_META_DDL = `CREATE TABLE IF NOT EXISTS sync_schema_meta(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  layouts TEXT NOT NULL DEFAULT '{}'
)`;

const q = (name) => `"${name.replaceAll('"', '""')}"`;
const sqlType = (c) => ({ string: 'TEXT', integer: 'INTEGER', boolean: 'INTEGER' })[c.type];

function appTableDdl(t) {
  const defs = [
    `${q('_sync_partition')} TEXT NOT NULL`,
    `${q('_sync_row_id')} TEXT NOT NULL`,
    ...(t.materialize ? t.columns.map((c) => `${q(c.name)} ${sqlType(c)}${c.nullable ? '' : ' NOT NULL'}`) : []),
    `${q('_sync_server_version')} INTEGER NOT NULL`,
    `${q('_sync_scopes')} TEXT NOT NULL`,
    `${q('_sync_payload')} BLOB NOT NULL`,
    `PRIMARY KEY (${q('_sync_partition')}, ${q('_sync_row_id')})`,
  ];
  const out = [`CREATE TABLE IF NOT EXISTS ${q(t.name)} (${defs.join(', ')})`];
  if (t.materialize) {
    for (const ix of t.indexes ?? []) {
      out.push(`CREATE ${ix.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${q(`sync_ix_${ix.name}`)} ON ${q(t.name)} (${ix.columns.map(q).join(', ')})`);
    }
  }
  return out;
}

function layoutsJson() {
  return JSON.stringify(Object.fromEntries(serverSchema.tables.map((t) => [t.name, t.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable }))])));
}

/** The push result as the storage stores it (sync_push_results.result). */
export function pushResultJson(c) {
  return JSON.stringify({
    status: 'applied',
    commitSeq: c.seq,
    recordedAtMs: c.createdAtMs,
    cacheIdentity: c.cacheIdentity,
    results: c.ops.map((_, opIndex) => ({ opIndex, status: 'applied' })),
  });
}

// ---------------------------------------------------------------------------
// SQL text.

const lit = (v) => {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (Buffer.isBuffer(v)) return `x'${v.toString('hex')}'`;
  return `'${String(v).replaceAll("'", "''")}'`;
};

/** Multi-row INSERTs as SQL text (for the shell), flushed every `size` rows. */
class Batch {
  constructor(head, write, size = 400) {
    this.head = head;
    this.write = write;
    this.size = size;
    this.rows = [];
  }
  add(values) {
    this.rows.push(`(${values.map(lit).join(',')})`);
    if (this.rows.length >= this.size) this.flush();
  }
  flush() {
    if (this.rows.length === 0) return;
    this.write(`${this.head} VALUES ${this.rows.join(',')};\n`);
    this.rows = [];
  }
}

/**
 * The same INSERTs through prepared statements (node:sqlite): `size` rows
 * a call, bound, nothing parsed per row. Booleans bind as 0/1 (what `lit`
 * writes); integers bind as numbers into INTEGER columns, which store them
 * as integers, the same values the text gives.
 */
class Prepared {
  constructor(db, head, width, size = 32) {
    const one = `(${new Array(width).fill('?').join(',')})`;
    this.one = db.prepare(`${head} VALUES ${one}`);
    this.many = db.prepare(`${head} VALUES ${new Array(size).fill(one).join(',')}`);
    this.width = width;
    this.full = width * size;
    this.args = [];
  }
  add(values) {
    if (values.length !== this.width) throw new Error(`${values.length} values for ${this.width} columns`);
    for (const v of values) this.args.push(v === undefined ? null : typeof v === 'boolean' ? (v ? 1 : 0) : v);
    if (this.args.length === this.full) {
      this.many.run(...this.args);
      this.args = [];
    }
  }
  flush() {
    for (let at = 0; at < this.args.length; at += this.width) this.one.run(...this.args.slice(at, at + this.width));
    this.args = [];
  }
}

/**
 * Where the SQL goes. `node:sqlite` (Node 22.13 and later; not bun)
 * writes in this process through prepared statements; otherwise the
 * sqlite3 shell reads SQL text from a pipe. At ten million commits the
 * shell spent a third of its time in malloc parsing the multi-row INSERTs
 * and the two processes took turns; in-process there is nothing to parse
 * or pipe.
 */
async function openSink(path, { sqlite3, engine }) {
  if (engine !== 'sqlite3' && !process.versions.bun) {
    let DatabaseSync;
    try {
      ({ DatabaseSync } = await import('node:sqlite'));
    } catch (e) {
      if (engine === 'node:sqlite') throw e;
    }
    if (DatabaseSync) {
      const db = new DatabaseSync(path);
      return {
        engine: 'node:sqlite',
        exec: (sql) => db.exec(sql),
        inserter: (head, width) => new Prepared(db, head, width),
        pace: async () => {},
        close: async () => db.close(),
      };
    }
  }
  if (engine === 'node:sqlite') throw new Error('node:sqlite is not available here');
  const child = spawn(sqlite3, ['-bail', path], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  // A shell that stops early closes the pipe: its exit says why.
  child.stdin.on('error', () => {});
  const exited = new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => (code === 0 && stderr === '' ? resolve() : reject(new Error(`sqlite3 exited ${code}: ${stderr}`))));
  });
  // Backpressure, loose enough that this process and sqlite3 work at the
  // same time: wait for the pipe only when 64 MiB are queued (waiting on
  // every write left one of the two idle while the other worked).
  let pending = [];
  let pendingBytes = 0;
  const write = (text) => {
    pending.push(text);
    pendingBytes += text.length;
  };
  const drain = async () => {
    if (pending.length === 0) return;
    const chunk = pending.join('');
    pending = [];
    pendingBytes = 0;
    child.stdin.write(chunk);
    if (child.stdin.writableLength > 64 << 20) await new Promise((resolve) => child.stdin.once('drain', resolve));
  };
  return {
    engine: 'sqlite3',
    exec: (sql) => write(`${sql};\n`),
    inserter: (head) => new Batch(head, write),
    pace: async () => {
      if (pendingBytes > 1 << 20) await drain();
    },
    close: async () => {
      await drain();
      child.stdin.end();
      await exited;
    },
  };
}

/**
 * Writes the file. Resolves with what it wrote:
 * `{ commits, changes, rows, partitions, bootRows, engine, ms }`.
 *
 * `engine`: 'auto' (node:sqlite where there is one, else the shell),
 * 'node:sqlite' or 'sqlite3'. Either writes the same rows in the same
 * order and the same schema, in the storage's order (sqlite_master's rows
 * too: __test__/host/large-fixture.ts compares them in order, so the
 * indexes are not deferred to after the rows).
 */
export async function writeLargeFixture(path, { commits, partitions = 50, seed = 1, rows = 500, bootRows = 0, sqlite3 = 'sqlite3', engine = 'auto', cacheMiB = 1024, progress = false } = {}) {
  if (!Number.isInteger(commits) || commits < 1) throw new Error('commits must be a positive integer');
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(path + suffix, { force: true });
  const started = performance.now();
  const say = progress ? (what) => console.error(`${((performance.now() - started) / 1000).toFixed(0)} s ${what}`) : () => {};
  const sink = await openSink(path, { sqlite3, engine });

  // Only for the writing itself, none persists in the file (journal_mode
  // OFF is not recorded; the file stays in rollback-journal mode, `delete`,
  // as a bun:sqlite Database leaves it).
  sink.exec(`PRAGMA journal_mode=OFF;\nPRAGMA synchronous=OFF;\nPRAGMA cache_size=${-1024 * cacheMiB}`);
  sink.exec(META_DDL.trim().replace(/;$/, ''));
  sink.exec(SCHEMA_META_DDL);
  sink.exec('BEGIN');
  for (const t of serverSchema.tables) for (const stmt of appTableDdl(t)) sink.exec(stmt);
  sink.exec(`INSERT INTO sync_schema_meta(id, schema_version, layouts) VALUES (1, ${serverSchema.version}, ${lit(layoutsJson())})`);
  const commitsB = sink.inserter('INSERT INTO sync_commits(partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms)', 6);
  const changesB = sink.inserter('INSERT INTO sync_changes(partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload)', 9);
  const scopesB = sink.inserter('INSERT OR IGNORE INTO sync_change_scopes(partition, tbl, var, value, commit_seq)', 5);
  const resultsB = sink.inserter('INSERT INTO sync_push_results(partition, client_id, client_commit_id, result)', 4);
  let changes = 0;
  const it = history({ commits, partitions, seed, rows, bootRows });
  let step;
  while (!(step = it.next()).done) {
    const c = step.value;
    commitsB.add([c.partition, c.seq, c.clientId, c.clientCommitId, c.actorId, c.createdAtMs]);
    c.changes.forEach((ch, idx) => {
      changesB.add([c.partition, c.seq, idx, ch.table, ch.rowId, ch.op === 'upsert' ? 1 : 2, ch.rowVersion, JSON.stringify(ch.scopes), ch.payload]);
      for (const [v, value] of Object.entries(ch.scopes)) scopesB.add([c.partition, ch.table, v, value, c.seq]);
    });
    changes += c.changes.length;
    resultsB.add([c.partition, c.clientId, c.clientCommitId, pushResultJson(c)]);
    await sink.pace();
    if ((c.g + 1) % 1_000_000 === 0) say(`${c.g + 1} commits`);
  }
  for (const b of [commitsB, changesB, scopesB, resultsB]) b.flush();
  say('commit log written');
  // The end state: each partition's counter, its rows and their scope entries.
  const parts = step.value;
  let rowCount = 0;
  const rowScopesB = sink.inserter('INSERT OR IGNORE INTO sync_row_scopes(partition, tbl, var, value, row_id)', 5);
  const registryB = sink.inserter('INSERT INTO sync_partition_registry(partition, log_epoch, last_authenticated_at_ms)', 3);
  const partitionsB = sink.inserter('INSERT INTO sync_partitions(partition, max_commit_seq)', 2);
  const clientsB = sink.inserter('INSERT INTO sync_clients(partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms)', 7);
  const tableB = new Map();
  for (const t of serverSchema.tables) {
    const cols = ['_sync_partition', '_sync_row_id', ...(t.materialize ? t.columns.map((c) => c.name) : []), '_sync_server_version', '_sync_scopes', '_sync_payload'];
    tableB.set(t.name, sink.inserter(`INSERT INTO ${q(t.name)} (${cols.map(q).join(', ')})`, cols.length));
  }
  for (const [i, p] of parts.entries()) {
    // The host touched each partition before its first request (at
    // BASE_MS); the handler touches it again with every request.
    const lastMs = p.seq === 0 ? BASE_MS : Math.max(...[...p.clients.values()].map((c) => c.updatedAtMs));
    registryB.add([p.name, `epoch-${p.name}`, lastMs]);
    partitionsB.add([p.name, p.seq]);
    for (const [clientId, c] of p.clients) clientsB.add([p.name, clientId, c.actorId, WIRE_VERSION, -1, '[]', c.updatedAtMs]);
    for (const t of serverSchema.tables) {
      const b = tableB.get(t.name);
      for (const [rowId, r] of p.live[t.name]) {
        const values = liveValues(p, t.name, rowId, r.seq, r.g);
        const scopes = scopesOf(t.name, values);
        b.add([p.name, rowId, ...(t.materialize ? values : []), r.version, JSON.stringify(scopes), encodeRow(t.columns, values)]);
        for (const [v, value] of Object.entries(scopes)) rowScopesB.add([p.name, t.name, v, value, rowId]);
        rowCount += 1;
        // Within the table too: one partition of 10M commits holds 3M
        // notes, more text than one string can.
        await sink.pace();
      }
    }
    if ((i + 1) % 10_000 === 0) say(`end state: ${i + 1} of ${parts.length} partitions`);
  }
  for (const b of [registryB, partitionsB, clientsB, ...tableB.values(), rowScopesB]) b.flush();
  sink.exec('COMMIT');
  await sink.close();
  say('end state written');
  if (existsSync(`${path}-journal`) || existsSync(`${path}-wal`)) throw new Error(`left-over journal beside ${path}`);
  return { commits, changes, rows: rowCount, partitions, bootRows, engine: sink.engine, ms: Math.round(performance.now() - started) };
}

// ---------------------------------------------------------------------------

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [out, ...rest] = process.argv.slice(2);
  const opts = { commits: 200_000, partitions: 50, seed: 1, rows: 500, bootRows: 0, cacheMib: 1024, engine: 'auto', progress: 0 };
  for (let i = 0; i < rest.length; i += 2) {
    const key = rest[i].replace(/^--/, '').replace(/-(\w)/g, (_, c) => c.toUpperCase());
    if (!(key in opts)) throw new Error(`unknown option ${rest[i]}`);
    opts[key] = key === 'engine' ? rest[i + 1] : Number(rest[i + 1]);
  }
  opts.cacheMiB = opts.cacheMib;
  delete opts.cacheMib;
  if (!out) {
    console.error('usage: node scripts/large-fixture.mjs OUT.db [--commits N] [--partitions P] [--seed S] [--rows R] [--boot-rows B] [--engine auto|node:sqlite|sqlite3] [--cache-mib M] [--progress 1]');
    process.exit(2);
  }
  console.log(JSON.stringify(await writeLargeFixture(out, opts)));
}
