'use strict';
// storage.db: upstream's synchronous `SqliteDatabase` (exec, run,
// query(sql).run/get/all, close) on the storage's own SQLite connection, so
// upstream's SqliteSegmentStore, SqliteBlobStore and SqliteLeaseStore share
// the storage's file through one copy of SQLite (docs/shared-file.md).
// Every call runs at once on this thread, as the surface is synchronous.

const { translate, resolveErrorClasses, invalidArgument, withCode } = require('./errors');

const CLASSES = resolveErrorClasses(undefined);
// Statements handed out by query(), by text (as bun:sqlite's query() caches
// them): the stores call query(sql) on every operation.
const MAX_STATEMENTS = 256;

function text(sql, member) {
  if (typeof sql !== 'string') throw invalidArgument(`db.${member}: sql must be a string`);
  return sql;
}

class SharedDatabase {
  #native;
  #closed = false;
  #statements = new Map();

  constructor(native) {
    this.#native = native;
  }

  #call(fn) {
    if (this.#closed) throw withCode(new Error('storage.db is closed'), 'ERR_SYNCULAR_CLOSED');
    try {
      return fn(this.#native);
    } catch (err) {
      throw translate(err, CLASSES);
    }
  }

  exec(sql) {
    text(sql, 'exec');
    this.#call((n) => n.exec(sql));
  }

  run(sql, bindings = []) {
    text(sql, 'run');
    if (!Array.isArray(bindings)) throw invalidArgument('db.run: bindings must be an array');
    return this.#call((n) => n.run(sql, bindings));
  }

  query(sql) {
    text(sql, 'query');
    const cached = this.#statements.get(sql);
    if (cached !== undefined && !this.#closed) return cached;
    this.#call((n) => n.prepare(sql));
    const statement = Object.freeze({
      run: (...params) => this.#call((n) => n.run(sql, params)),
      get: (...params) => this.#call((n) => n.get(sql, params)),
      all: (...params) => this.#call((n) => n.all(sql, params)),
    });
    if (this.#statements.size >= MAX_STATEMENTS) this.#statements.clear();
    this.#statements.set(sql, statement);
    return statement;
  }

  /**
   * Ends this handle: later calls fail with ERR_SYNCULAR_CLOSED. The
   * connection is the storage's, and closes with `storage.close()`.
   */
  close() {
    this.#closed = true;
    this.#statements.clear();
  }
}

/**
 * Defines `storage.db`: non-enumerable, made on first read. `open()` gives
 * the native handle (a PostgreSQL storage throws its coded refusal there,
 * on every read).
 */
function defineDb(storage, open, translateError) {
  let db;
  Object.defineProperty(storage, 'db', {
    configurable: true,
    enumerable: false,
    get() {
      if (db === undefined) {
        try {
          db = new SharedDatabase(open());
        } catch (err) {
          throw translateError(err);
        }
      }
      return db;
    },
  });
}

module.exports = { SharedDatabase, defineDb };
