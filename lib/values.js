'use strict';
// Value adaptation between the host's shapes and the native layer's:
// schema flattening (Maps/Sets cannot cross), stored JSON text written with
// JSON.stringify so it is byte-identical to the in-tree storages, and the
// exact undefined/omitted-field conventions of the contract.

const { invalidArgument } = require('./errors');

function tablesOf(schema) {
  const t = schema?.tables;
  if (t instanceof Map) return [...t.values()];
  if (Array.isArray(t)) return t;
  if (t && typeof t === 'object') return Object.values(t);
  throw invalidArgument('ensureSchema: schema.tables must be a Map of compiled tables');
}

// Materialization default of the host's schema compiler, for hosts whose
// compiled tables do not carry `materialize`.
function defaultMaterialize(t) {
  const encrypted = new Set(t.encryptedColumnIndices ?? []);
  if (encrypted.size === 0) return true;
  const scopeColumns = new Set((t.scopePatterns ?? []).map((p) => p.columnIndex));
  for (let i = 0; i < t.columns.length; i++) {
    if (i === (t.primaryKeyIndex ?? 0) || scopeColumns.has(i)) continue;
    if (!encrypted.has(i)) return true;
  }
  return false;
}

/** CompiledSchema → the JSON text the native layer parses. */
function flattenSchema(schema) {
  if (!schema || typeof schema !== 'object') throw invalidArgument('ensureSchema: schema must be a CompiledSchema');
  if (!Number.isSafeInteger(schema.version) || schema.version < 0) {
    throw invalidArgument('ensureSchema: schema.version must be a non-negative safe integer');
  }
  const tables = tablesOf(schema).map((t) => {
    if (!t || typeof t.name !== 'string' || !Array.isArray(t.columns)) {
      throw invalidArgument('ensureSchema: every table needs a name and columns');
    }
    if (t.primaryKeyIndex === undefined && (t.primaryKey !== undefined || t.scopes !== undefined)) {
      // A ServerSchema as the host declares it: its primaryKey and scopes
      // would be ignored (the first column taken as the key).
      throw invalidArgument(
        `ensureSchema: table ${JSON.stringify(t.name)} is uncompiled (it has primaryKey/scopes, no primaryKeyIndex/scopePatterns): pass compileSchema(schema) from @syncular/server`,
      );
    }
    return {
      name: t.name,
      columns: t.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable === true })),
      primaryKeyIndex: t.primaryKeyIndex ?? 0,
      materialize: typeof t.materialize === 'boolean' ? t.materialize : defaultMaterialize(t),
      indexes: (t.indexes ?? []).map((i) => ({ name: i.name, columns: [...i.columns], unique: i.unique === true })),
    };
  });
  const layouts = {};
  for (const t of tables) layouts[t.name] = t.columns;
  return JSON.stringify({ version: schema.version, tables, layouts: JSON.stringify(layouts) });
}

function declarationsOf(checkpoints) {
  if (checkpoints == null) return [];
  if (!Array.isArray(checkpoints)) throw invalidArgument('checkpoints must be an array of declarations');
  return checkpoints.map((d) => ({ partition: d.partition, name: d.name, schemaVersion: d.schemaVersion }));
}

// ---- rows and commits --------------------------------------------------------

/** `[rowId, serverVersion, scopesJson, payload, columnVersions|null]`. */
function rowFromTuple(t) {
  const row = { rowId: t[0], serverVersion: t[1], scopes: JSON.parse(t[2]), payload: t[3] };
  if (t[4] !== null) row.columnVersions = t[4];
  return row;
}

/** A getRow result: the tuple, or null for no row → undefined. */
function rowOut(t) {
  return t === null ? undefined : rowFromTuple(t);
}

/**
 * An answer of records (src/core/records.rs): `text` holds every string,
 * `nums` every number, `bytes` every payload. Reads the dictionary, which
 * ends the text; `at` is the first record number, `pos` the next inline
 * string (inline strings start the text).
 */
class Records {
  constructor([text, nums, bytes]) {
    this.text = text;
    this.nums = nums;
    this.bytes = bytes;
    const n = nums[0] | 0;
    let size = 0;
    for (let k = 0; k < n; k++) size += nums[1 + k] | 0;
    const dictionary = new Array(n);
    let pos = text.length - size;
    for (let k = 0; k < n; k++) {
      const len = nums[1 + k] | 0;
      dictionary[k] = text.slice(pos, pos + len);
      pos += len;
    }
    this.dictionary = dictionary;
    /** Per scopes entry: its parsed object when every value is a primitive (copied per record), else false. */
    this.templates = new Array(n);
    /** Per scopes entry with a template: its one key, when it has exactly one. */
    this.soleKeys = new Array(n);
    this.at = 1 + n;
    this.pos = 0;
  }

  /** The next inline string. */
  string(len) {
    // Lengths, offsets and indices are made int32 before use: JSC takes a
    // slow path for slice and subarray given doubles (as Float64Array
    // elements are), about 4x the cost per call.
    const s = this.text.slice(this.pos, this.pos + len);
    this.pos += len;
    return s;
  }

  /** Dictionary entry `k` as a fresh scopes object (never shared between records). */
  scopes(k) {
    let t = this.templates[k];
    if (t === undefined) {
      t = JSON.parse(this.dictionary[k]);
      const keys = Object.keys(t);
      for (const key of keys) {
        const v = t[key];
        if (v !== null && typeof v === 'object') {
          t = false;
          break;
        }
      }
      this.templates[k] = t;
      if (t !== false && keys.length === 1) this.soleKeys[k] = keys[0];
    }
    if (t === false) return JSON.parse(this.dictionary[k]);
    // One key (the common case) is a literal with a computed key: under
    // bun about a third of a spread's cost, under Node a little under.
    // A computed key defines its property, so "__proto__" stays data.
    const key = this.soleKeys[k];
    return key === undefined ? { ...t } : { [key]: t[key] };
  }

  /** A view of `len` payload bytes at `offset`. */
  view(offset, len) {
    return this.bytes.subarray(offset, offset + len);
  }
}

/**
 * A row batch → StoredRow[]: seven numbers a row; byte fields become views
 * of the batch's one buffer (one ArrayBuffer per batch, not one per row);
 * `columnVersions` only when present.
 */
function unpackRows(answer) {
  const r = new Records(answer);
  const nums = r.nums;
  let i = r.at;
  const count = nums[i++] | 0;
  const out = new Array(count);
  for (let j = 0; j < count; j++, i += 7) {
    const row = {
      rowId: r.string(nums[i] | 0),
      serverVersion: nums[i + 1],
      scopes: r.scopes(nums[i + 2] | 0),
      payload: r.view(nums[i + 3] | 0, nums[i + 4] | 0),
    };
    if (nums[i + 5] >= 0) row.columnVersions = r.view(nums[i + 5] | 0, nums[i + 6] | 0);
    out[j] = row;
  }
  return out;
}

/**
 * prefetchRows' `[json, bytes]` (src/napi/packed.rs, eight values an id) →
 * `{ rowId, row, tomb, tombKnown }`, `row` and `tomb` undefined when absent.
 */
/** `{ stable, entries }`; see `packed::prefetched` in the addon. */
function unpackPrefetched([json, bytes]) {
  const a = JSON.parse(json);
  const out = new Array((a.length - 1) / 8);
  for (let i = 1, j = 0; i < a.length; i += 8, j++) {
    let row;
    if (a[i + 2] >= 0) {
      row = {
        rowId: a[i],
        serverVersion: a[i + 2],
        scopes: a[i + 3],
        payload: bytes.slice(a[i + 4], a[i + 4] + a[i + 5]),
      };
      if (a[i + 6] >= 0) row.columnVersions = bytes.slice(a[i + 6], a[i + 6] + a[i + 7]);
    }
    // tomb: a commitSeq, null (none), or -1 (not read: the row exists).
    const t = a[i + 1];
    out[j] = { rowId: a[i], tombKnown: t !== -1, tomb: t === null || t === -1 ? undefined : t, row };
  }
  return { stable: a[0] === 1, entries: out };
}

/** A commit window → StoredCommit[] (rowVersion and payload only when present). */
function unpackCommits(answer) {
  const r = new Records(answer);
  const { nums, dictionary } = r;
  let i = r.at;
  const count = nums[i++] | 0;
  const commits = new Array(count);
  for (let c = 0; c < count; c++) {
    const n = nums[i + 3] | 0;
    const changes = new Array(n);
    commits[c] = { commitSeq: nums[i], createdAtMs: nums[i + 1], actorId: dictionary[nums[i + 2] | 0], changes };
    i += 4;
    for (let k = 0; k < n; k++, i += 7) {
      const change = { table: dictionary[nums[i] | 0], rowId: r.string(nums[i + 1] | 0), op: nums[i + 2] === 1 ? 'upsert' : 'delete' };
      const version = nums[i + 3];
      if (version === version) change.rowVersion = version;
      change.scopes = r.scopes(nums[i + 4] | 0);
      if (nums[i + 5] >= 0) change.payload = r.view(nums[i + 5] | 0, nums[i + 6] | 0);
      changes[k] = change;
    }
  }
  return commits;
}

const NO_BYTES = new Uint8Array(0);

/**
 * NewChange[] → the two packed arguments of the native appendCommit: one
 * JSON array of `[table, rowId, op, rowVersion|null, payloadLength|-1,
 * scopes]` and the payloads concatenated. One JSON.stringify and one copy
 * cost less than reading six properties per change across N-API.
 */
function packChanges(changes) {
  const n = changes.length;
  const rows = new Array(n);
  const payloads = [];
  let total = 0;
  for (let i = 0; i < n; i++) {
    const c = changes[i];
    if (!c || typeof c !== 'object') throw invalidArgument(`changes[${i}] must be an object`);
    let op;
    if (c.op === 'upsert') op = 1;
    else if (c.op === 'delete') op = 2;
    else throw invalidArgument(`changes[${i}].op must be 'upsert' or 'delete'`);
    if (c.rowVersion != null && !Number.isFinite(c.rowVersion)) {
      throw invalidArgument(`changes[${i}].rowVersion must be a safe integer`);
    }
    let length = -1;
    if (c.payload != null) {
      if (!(c.payload instanceof Uint8Array)) throw invalidArgument(`changes[${i}].payload must be a Uint8Array`);
      length = c.payload.byteLength;
      total += length;
      payloads.push(c.payload);
    }
    rows[i] = [c.table, c.rowId, op, c.rowVersion ?? null, length, c.scopes ?? {}];
  }
  let joined = NO_BYTES;
  if (payloads.length === 1) joined = payloads[0];
  else if (payloads.length > 1) joined = Buffer.concat(payloads, total);
  return [JSON.stringify(rows), joined];
}

function filterJson(filter) {
  if (filter == null) return '{}';
  if (typeof filter !== 'object' || Array.isArray(filter)) throw invalidArgument('scopeFilter must be an object');
  return JSON.stringify(filter);
}

// ---- push results (storage-layout §5.1) --------------------------------------

function toBase64(bytes) {
  if (bytes == null) return '';
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function fromBase64(text) {
  // atob, as the in-tree SQLite storage decodes: an invalid character makes
  // the record unreadable.
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function serializeOpResult(r) {
  if (r.status === 'conflict') {
    const o = {
      opIndex: r.opIndex,
      status: r.status,
      code: r.code,
      message: r.message,
      serverVersion: r.serverVersion,
      serverRow: toBase64(r.serverRow),
    };
    if (r.conflictColumns !== undefined) o.conflictColumns = toBase64(r.conflictColumns);
    return o;
  }
  if (r.status === 'error') {
    const o = { opIndex: r.opIndex, status: r.status, code: r.code, message: r.message, retryable: r.retryable };
    if (r.details !== undefined) o.details = r.details;
    return o;
  }
  return { opIndex: r.opIndex, status: r.status };
}

function serializePushResult(result) {
  if (!result || typeof result !== 'object' || !Array.isArray(result.results)) {
    throw invalidArgument('push result must be an object with a results array');
  }
  const o = { status: result.status };
  if (result.commitSeq !== undefined) o.commitSeq = result.commitSeq;
  if (result.recordedAtMs !== undefined) o.recordedAtMs = result.recordedAtMs;
  if (result.cacheIdentity !== undefined) o.cacheIdentity = result.cacheIdentity;
  o.results = result.results.map(serializeOpResult);
  return JSON.stringify(o);
}

function parseOpResult(r) {
  if (r.status === 'conflict') {
    return {
      opIndex: r.opIndex,
      status: 'conflict',
      code: r.code ?? '',
      message: r.message ?? '',
      serverVersion: r.serverVersion ?? 0,
      serverRow: fromBase64(r.serverRow ?? ''),
      conflictColumns: fromBase64(r.conflictColumns ?? ''),
    };
  }
  if (r.status === 'error') {
    const o = {
      opIndex: r.opIndex,
      status: 'error',
      code: r.code ?? '',
      message: r.message ?? '',
      retryable: r.retryable ?? false,
    };
    if (r.details !== undefined) o.details = r.details;
    return o;
  }
  return { opIndex: r.opIndex, status: 'applied' };
}

/** Stored text → StoredPushResult; `undefined` when unreadable. */
function parsePushResult(text) {
  try {
    const v = JSON.parse(text);
    if (!v || typeof v !== 'object' || !Array.isArray(v.results)) return undefined;
    const o = { status: v.status };
    if (v.commitSeq !== undefined) o.commitSeq = v.commitSeq;
    if (v.recordedAtMs !== undefined) o.recordedAtMs = v.recordedAtMs;
    if (v.cacheIdentity !== undefined) o.cacheIdentity = v.cacheIdentity;
    o.results = v.results.map(parseOpResult);
    return o;
  } catch {
    return undefined;
  }
}

// ---- clients and the gate ----------------------------------------------------

// The addon hands these records over as one JSON text each, the fields in
// a fixed order (src/napi/compact.rs).

/** `text` parsed: an array of exactly `n` values, or a SyntaxError naming `what`. */
function compact(text, n, what) {
  const a = JSON.parse(text);
  if (!Array.isArray(a) || a.length !== n) throw new SyntaxError(`${what}: the stored record is not readable`);
  return a;
}

function clientOut(text) {
  const a = compact(text, 6, 'client record (its subscriptions are not one JSON value)');
  return { clientId: a[0], actorId: a[1], wireVersion: a[2], cursor: a[3], updatedAtMs: a[4], subscriptions: a[5] };
}

function registryOut(text) {
  const a = compact(text, 4, 'partition registry entry');
  return { partition: a[0], logEpoch: a[1], epochRequired: a[2], lastAuthenticatedAtMs: a[3] };
}

function gateOut(g) {
  return { storedSchemaVersion: g.storedSchemaVersion, logEpoch: g.logEpoch ?? undefined, pending: g.pending };
}

module.exports = {
  flattenSchema,
  declarationsOf,
  rowOut,
  unpackRows,
  unpackCommits,
  unpackPrefetched,
  packChanges,
  filterJson,
  serializePushResult,
  parsePushResult,
  clientOut,
  registryOut,
  gateOut,
};
