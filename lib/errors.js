'use strict';
// Error classes and the translation of native errors into the host's
// classes. The native layer reports errors as a JSON description (kind,
// code, opIndex, details) behind a marker; nothing here inspects SQL text.

const WIRE_PREFIX = '\u0001syncular:';

// Messages for StorageQueryError codes: the package's own class, and a host
// class whose table has none for the code (see `keep`).
const QUERY_MESSAGES = {
  'sync.storage.scan_requires_scope': 'scan requires at least one scope variable',
  'sync.storage.invalid_limit': 'limit must be an integer from 1 to 1000',
  'sync.storage.index_not_materialized': 'index lookups need a materialized table',
  'sync.storage.index_not_found': 'no declared index with that name',
  'sync.storage.index_value_count_mismatch': 'value count does not match the index columns',
  'sync.storage.invalid_prune_cursor': 'prune cursor must be a safe integer ≥ 0 with a non-empty log epoch',
  'sync.storage.prune_epoch_mismatch': 'log epoch changed or partition unregistered; prune refused',
  'sync.storage.checkpoint_incomplete': 'an incomplete backfill checkpoint is not declared by this process',
  'sync.storage.checkpoint_not_declared': 'checkpoint is not declared or already activated',
  'sync.storage.checkpoint_fence_missing': 'writer fence is not raised to the checkpoint version',
  'sync.storage.stored_layout_mismatch': 'stored column layout differs from the schema at the same version',
  'sync.storage.physical_layout_mismatch': 'physical table layout differs from the schema at the same version',
};

/**
 * The message of a StorageQueryError: what was refused, its code, and its
 * details (table, column, reason), so `String(err)` alone tells an operator
 * what is wrong.
 */
function queryMessage(code, details) {
  let text = `${QUERY_MESSAGES[code] ?? 'storage refused the call'} [${code}]`;
  if (details !== null && typeof details === 'object') {
    const parts = Object.entries(details).map(([k, v]) => `${k}=${v}`);
    if (parts.length > 0) text += ` (${parts.join(', ')})`;
  }
  return text;
}

class SyncError extends Error {
  constructor(code, message, details) {
    super(message ?? code);
    this.name = 'SyncError';
    this.code = code;
    if (details !== undefined) this.details = details;
  }
}

class StorageQueryError extends Error {
  constructor(code, details) {
    super(queryMessage(code, details));
    this.name = 'StorageQueryError';
    this.code = code;
    if (details !== undefined) this.details = details;
  }
}

class StorageConstraintError extends Error {
  constructor(cause, opIndex) {
    super('storage constraint violated', { cause });
    this.name = 'StorageConstraintError';
    this.opIndex = opIndex;
  }
}

class DecodeError extends Error {
  constructor(message) {
    super(message);
    this.name = 'DecodeError';
    this.code = 'sync.invalid_request';
  }
}

const OWN = { SyncError, StorageQueryError, StorageConstraintError, DecodeError };

/**
 * The classes to throw: the host's where given, ours otherwise. A host
 * module without `StorageConstraintError` (@syncular/server's root exports
 * none, 0.15.48 to 0.31) gets the class found by `findConstraintClass`;
 * until that search ends, `ready` is its promise.
 */
function resolveErrorClasses(option) {
  const pick = (name) => (option && typeof option[name] === 'function' ? option[name] : OWN[name]);
  const classes = {
    SyncError: pick('SyncError'),
    StorageQueryError: pick('StorageQueryError'),
    StorageConstraintError: pick('StorageConstraintError'),
    DecodeError: pick('DecodeError'),
    ready: undefined,
  };
  if (option && typeof option === 'object' && typeof option.StorageConstraintError !== 'function') {
    classes.ready = hostConstraintClass(option).then((found) => {
      if (found !== undefined) classes.StorageConstraintError = found;
      classes.ready = undefined;
    });
  }
  return classes;
}

// One search per host module.
const searched = new WeakMap();

// The search takes microtasks; a module whose storage never answers must not
// hold every begin() back.
const SEARCH_LIMIT_MS = 1000;

function withinLimit(promise) {
  let timer;
  // Not unref'd: a begin() waiting on the search keeps the process alive.
  const limit = new Promise((resolve) => {
    timer = setTimeout(resolve, SEARCH_LIMIT_MS, undefined);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function hostConstraintClass(host) {
  let found = searched.get(host);
  if (found === undefined) {
    found = withinLimit(findConstraintClass(host)).then((cls) => {
      if (cls === undefined) {
        process.emitWarning(
          'syncular-native-storage: the `errors` module has no StorageConstraintError, and none could be found through its ' +
            'SqliteServerStorage; a push violating a unique index will throw instead of being rejected. ' +
            'Pass { ...server, StorageConstraintError } (README, "Errors through the host\'s classes").',
          { code: 'SYNCULAR_NO_CONSTRAINT_CLASS' },
        );
      }
      return cls;
    });
    searched.set(host, found);
  }
  return found;
}

/**
 * A host push turns a storage error into a durable rejection only when it
 * is an `instanceof` its own module's StorageConstraintError, a class no
 * root export of @syncular/server names. Its in-tree SQLite storage throws
 * one when a row write fails with SQLITE_CONSTRAINT: run over an inert
 * stand-in database (no file, no SQL engine) whose row write fails so, its
 * transaction throws an instance, and that instance's constructor is the
 * class. Undefined when the module does not behave so.
 */
async function findConstraintClass(host) {
  let Storage;
  try {
    Storage = host.SqliteServerStorage;
  } catch {
    return undefined;
  }
  if (typeof Storage !== 'function') return undefined;
  const statement = { run: () => ({ changes: 0, lastInsertRowid: 0 }), get: () => null, all: () => [] };
  const db = { exec() {}, run: () => statement.run(), query: () => statement, close() {} };
  let tx;
  try {
    const storage = new Storage(db);
    storage.writeRow = () => {
      throw withCode(new Error('constraint probe'), 'SQLITE_CONSTRAINT');
    };
    tx = await storage.begin('syncular-native-probe');
    const row = { rowId: 'probe', serverVersion: 1, scopes: {}, payload: new Uint8Array(0) };
    await tx.upsertRow('probe', row, { opIndex: 0 });
  } catch (err) {
    return isConstraintInstance(err) ? err.constructor : undefined;
  } finally {
    try {
      await tx?.rollback();
    } catch {
      // the stand-in has nothing to roll back
    }
  }
  return undefined;
}

/** `err` is an instance of a StorageConstraintError class taking (cause, opIndex). */
function isConstraintInstance(err) {
  if (err === null || typeof err !== 'object' || err.name !== 'StorageConstraintError' || err.opIndex !== 0) return false;
  const cls = err.constructor;
  if (typeof cls !== 'function' || Object.getPrototypeOf(err) !== cls.prototype || cls === StorageConstraintError) return false;
  try {
    const probe = new cls(new Error('probe'), 3);
    return probe instanceof cls && probe.opIndex === 3;
  } catch {
    return false;
  }
}

function withCode(err, code) {
  if (code !== undefined) err.code = code;
  return err;
}

function invalidArgument(message) {
  return withCode(new TypeError(message), 'ERR_SYNCULAR_INVALID_ARGUMENT');
}

/** Rebuilds a thrown native error as the error the host expects. */
function translate(err, classes) {
  const message = err?.message;
  if (typeof message !== 'string') return err;
  if (!message.startsWith(WIRE_PREFIX)) {
    // napi-rs argument conversion failures ("Failed to convert ...").
    if (err.code === 'InvalidArg' || /Expected|convert/i.test(String(err.code) + message)) {
      return invalidArgument(`invalid argument: ${message}`);
    }
    return err;
  }
  let w;
  try {
    w = JSON.parse(message.slice(WIRE_PREFIX.length));
  } catch {
    return err;
  }
  const out = fromWire(w, classes);
  if (w.rollbackError !== null && typeof w.rollbackError === 'object') {
    attachRollbackError(out, fromWire(w.rollbackError, classes));
  } else if (Object.hasOwn(err, 'rollbackError')) {
    // attached on the JS side (lib/write-queue.js) before translation
    attachRollbackError(out, translate(err.rollbackError, classes));
  }
  return out;
}

/**
 * 0.30.7: the ROLLBACK after a failure failed too. The first error stays
 * the error; the rollback's rides on it, non-enumerable (a host that logs
 * or serializes the error sees it unchanged). A first rollback error is
 * kept.
 */
function attachRollbackError(err, rollbackError) {
  if (err === null || typeof err !== 'object' || Object.hasOwn(err, 'rollbackError')) return err;
  try {
    Object.defineProperty(err, 'rollbackError', {
      value: rollbackError,
      enumerable: false,
      writable: true,
      configurable: true,
    });
  } catch {
    // a frozen error: it stays as it is
  }
  return err;
}

/** `new Class(...args)`, or ours when the host's class refuses the arguments. */
function build(Class, Own, args) {
  if (Class !== Own) {
    try {
      return new Class(...args);
    } catch {
      // e.g. a host SyncError refusing a code its catalog lacks
    }
  }
  return new Own(...args);
}

function define(err, key, value, enumerable) {
  try {
    Object.defineProperty(err, key, { value, writable: true, configurable: true, enumerable });
  } catch {
    // a frozen error: it stays as it is
  }
}

/**
 * A host's class may drop what we hand it: 0.15.48's StorageQueryError takes
 * a code only and builds its message from its own table, empty for a code
 * newer than the host. What it dropped goes back on the error as own
 * properties (code and details enumerable, as the host's fields are; the
 * message not, as Error's is, with the stack's first line to match), so
 * `String(err)`, `err.message`, `err.details` and a logger show it. What the
 * host did keep stays as the host made it.
 */
function keep(err, { code, message, details, fields }) {
  if (err === null || typeof err !== 'object') return err;
  if (code !== undefined && err.code !== code) define(err, 'code', code, true);
  if (details !== undefined && err.details === undefined) define(err, 'details', details, true);
  for (const [key, value] of Object.entries(fields ?? {})) {
    if (value !== undefined && err[key] === undefined) define(err, key, value, key !== 'cause');
  }
  const old = err.message;
  if (message !== undefined && (typeof old !== 'string' || old === '')) {
    define(err, 'message', message, false);
    restack(err, old);
  }
  return err;
}

/** The stack's first line, `Name` or `Name: old`, rewritten for the new message. */
function restack(err, old) {
  let stack;
  let name;
  try {
    stack = err.stack;
    name = String(err.name);
  } catch {
    return;
  }
  if (typeof stack !== 'string') return;
  const end = stack.indexOf('\n');
  const head = end < 0 ? stack : stack.slice(0, end);
  if (head !== name && head !== `${name}: ${old ?? ''}`) return;
  define(err, 'stack', `${name}: ${err.message}${end < 0 ? '' : stack.slice(end)}`, false);
}

/** A StorageQueryError of the host's class (ours when none), with its code, message and details. */
function queryError(classes, code, details) {
  const err = build(classes.StorageQueryError, StorageQueryError, [code, details]);
  return keep(err, { code, message: queryMessage(code, details), details });
}

/** A SyncError of the host's class (ours when none, or when the host's refuses the code). */
function syncError(classes, code, message, details) {
  const err = build(classes.SyncError, SyncError, [code, message, details]);
  return keep(err, { code, message: message ?? code, details });
}

/** The error a wire description names. */
function fromWire(w, classes) {
  switch (w.kind) {
    case 'query':
      return queryError(classes, w.code, w.details);
    case 'constraint': {
      const cause = withCode(new Error(w.message), 'SQLITE_CONSTRAINT');
      const err = build(classes.StorageConstraintError, StorageConstraintError, [cause, w.opIndex]);
      return keep(err, { message: 'storage constraint violated', fields: { cause, opIndex: w.opIndex } });
    }
    case 'decode': {
      const e = build(classes.DecodeError, DecodeError, [w.message]);
      return keep(e, { code: e.code === undefined ? 'sync.invalid_request' : undefined, message: w.message });
    }
    case 'argument':
      return withCode(new TypeError(w.message), w.code);
    default:
      return withCode(new Error(w.message), w.code);
  }
}

module.exports = {
  ...OWN,
  resolveErrorClasses,
  findConstraintClass,
  keep,
  queryMessage,
  queryError,
  syncError,
  translate,
  attachRollbackError,
  invalidArgument,
  withCode,
  WIRE_PREFIX,
};
