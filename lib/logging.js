'use strict';
// The `logger` option: native diagnostics (storage calls, slow statements,
// lock and pool waits, busy retries; see docs/logging.md) handed to a JS
// logger instead of stderr.
//
// The native side keeps ONE sink per process (every storage, every worker
// thread of the addon shares it), and its events do not say which storage
// they came from. So the logger of the storage constructed last wins: a
// storage with a `logger` replaces the sink, a storage without one leaves
// it alone, and closing a storage does not remove it. Records reach the
// logger asynchronously, on the JS thread that installed it, and never keep
// the process alive (records still queued at exit are dropped).

const { invalidArgument, translate, resolveErrorClasses } = require('./errors');

const METHODS = ['debug', 'info', 'warn', 'error'];

function describe(value) {
  return value === null ? 'null' : typeof value;
}

/**
 * Checks the `logger` and `logFilter` options. Returns the function that
 * delivers one record (`{ level, target, message, fields }`), or undefined
 * when there is no logger. Throws a TypeError with code
 * ERR_SYNCULAR_INVALID_ARGUMENT for anything else.
 */
function validateLogger(logger, logFilter) {
  if (logFilter !== undefined && logFilter !== null && typeof logFilter !== 'string') {
    throw invalidArgument(`NativeStorage: logFilter must be a string of filter directives, got ${describe(logFilter)}`);
  }
  if (logger === undefined || logger === null) return undefined;
  if (typeof logger === 'function') return (record) => logger(record);
  if (typeof logger === 'object') {
    const missing = METHODS.filter((m) => typeof logger[m] !== 'function');
    if (missing.length === 0) {
      // console / pino / winston style: logger[level](message, fields).
      return (record) => {
        let method = record.level;
        if (method === 'trace' && typeof logger.trace !== 'function') method = 'debug';
        logger[method](record.message, { target: record.target, ...record.fields });
      };
    }
    throw invalidArgument(`NativeStorage: logger must be a function or an object with ${METHODS.join('/')} methods; missing ${missing.join(', ')}`);
  }
  throw invalidArgument(`NativeStorage: logger must be a function (record) => void or an object with ${METHODS.join('/')} methods, got ${describe(logger)}`);
}

/** A logger that throws must not take the process down: warn once, go on. */
function shielded(deliver) {
  let warned = false;
  return (record) => {
    try {
      deliver(record);
    } catch (err) {
      if (!warned) {
        warned = true;
        process.emitWarning(`syncular-native-storage: the logger threw (${err?.message ?? err}); further errors are ignored`, {
          code: 'SYNCULAR_LOGGER_THREW',
        });
      }
    }
  };
}

/**
 * Installs `logger` (the `logger` option of `new NativeStorage`) as the
 * process's native log sink, with `logFilter` (env-filter directives such
 * as `warn` or `syncular=warn,syncular::call=debug`; default
 * SYNCULAR_NATIVE_LOG when set, else `warn`). No logger: nothing changes.
 * Returns whether a sink was installed.
 */
function installLogger(native, logger, logFilter) {
  const deliver = validateLogger(logger, logFilter);
  if (deliver === undefined) return false;
  try {
    native.setLogSink(shielded(deliver), logFilter ?? undefined);
  } catch (err) {
    // An invalid filter: the native wire error, as a coded TypeError.
    throw translate(err, resolveErrorClasses());
  }
  return true;
}

/** Removes the process's native log sink (stderr logging resumes if SYNCULAR_NATIVE_LOG is set). */
function removeLogger(native) {
  native.setLogSink(null);
}

module.exports = { installLogger, removeLogger, validateLogger };
