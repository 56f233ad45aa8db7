'use strict';
// Error classes and the translation of native errors into the host's
// classes. The native layer reports errors as a JSON description (kind,
// code, opIndex, details) behind a marker; nothing here inspects SQL text.

const WIRE_PREFIX = '\u0001syncular:';

// Messages for StorageQueryError codes, used only by the package's own
// class; a host class brings its own table.
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
    super(QUERY_MESSAGES[code] ?? code);
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

/** The classes to throw: the host's where given, ours otherwise. */
function resolveErrorClasses(option) {
  const pick = (name) => (option && typeof option[name] === 'function' ? option[name] : OWN[name]);
  return {
    SyncError: pick('SyncError'),
    StorageQueryError: pick('StorageQueryError'),
    StorageConstraintError: pick('StorageConstraintError'),
    DecodeError: pick('DecodeError'),
  };
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

/** The error a wire description names. */
function fromWire(w, classes) {
  switch (w.kind) {
    case 'query':
      return new classes.StorageQueryError(w.code, w.details);
    case 'constraint': {
      const cause = withCode(new Error(w.message), 'SQLITE_CONSTRAINT');
      return new classes.StorageConstraintError(cause, w.opIndex);
    }
    case 'decode': {
      const e = new classes.DecodeError(w.message);
      if (e.code === undefined) e.code = 'sync.invalid_request';
      return e;
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
  translate,
  attachRollbackError,
  invalidArgument,
  withCode,
  WIRE_PREFIX,
};
