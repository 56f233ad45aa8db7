'use strict';
// The PostgreSQL driver: no storage-wide lease. Storage-level writes run
// in submission order, each in its own database transaction, beside any
// open transactions; a read submitted
// after a storage-level write still waits for it (as LeaseQueue's
// writesPending does on SQLite). `begin` pins a pool connection natively
// and returns its transaction id; the database's partition row lock
// serializes pushes.

const native = require('../native');
const { invalidArgument } = require('../errors');

function settle(fn) {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}

class PostgresDriver {
  constructor(url, options) {
    const max = options.maxConnections;
    if (max !== undefined && (!Number.isSafeInteger(max) || max < 1)) {
      throw invalidArgument('NativeStorage: maxConnections must be a positive integer');
    }
    if (options.schema !== undefined && typeof options.schema !== 'string') {
      throw invalidArgument('NativeStorage: schema must be a string');
    }
    this.native = new native.PgHandle(url, max, options.schema, options.queryTimeoutMs);
    /** Native calls are async: transactions chain their calls. */
    this.ordered = false;
    this.writes = 0;
    this.writesDone = Promise.resolve();
  }

  read(fn) {
    if (this.writes > 0) return this.writesDone.then(() => fn(this.native));
    return settle(() => fn(this.native));
  }

  /** The lease argument is unused on PostgreSQL; 0 keeps the native signature. */
  write(fn) {
    // Storage-level writes of one storage take effect in submission order.
    const done = this.writesDone.then(() => fn(this.native, 0));
    const settled = done.then(
      () => {},
      () => {},
    );
    this.writes++;
    this.writesDone = Promise.all([this.writesDone, settled]).then(() => {});
    settled.then(() => {
      this.writes--;
    });
    return done;
  }

  async begin(partition) {
    const id = await this.native.begin(partition);
    return { id, release: () => {} };
  }

  close() {
    return this.native.close();
  }
}

module.exports = { PostgresDriver };
