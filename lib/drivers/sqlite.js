'use strict';
// The SQLite driver: one write lease per storage, queued in submission
// order (LeaseQueue); native calls are synchronous, so calls issued
// without await still run in order.

const native = require('../native');
const { LeaseQueue } = require('../lease-queue');

// A memory database lives in a private temporary directory (see README).
// The addon removes it at close, on collection and at env teardown, but
// process.exit() skips env teardown: remove this thread's directories on
// 'exit' as well.
let exitHooked = false;
function hookExit() {
  if (exitHooked) return;
  exitHooked = true;
  process.once('exit', () => {
    try {
      native.releaseScratch();
    } catch {
      // best effort while exiting
    }
  });
}

class SqliteDriver {
  constructor(url, options) {
    hookExit();
    this.native = new native.SqliteHandle(url, options.synchronous, options.busyTimeoutMs, options.queryTimeoutMs);
    this.queue = new LeaseQueue(this.native);
    /** Native calls complete before they return: no per-transaction chaining. */
    this.ordered = true;
  }

  /** `fn(native)`, after storage-level writes submitted before it. */
  read(fn) {
    if (this.queue.writesPending) return this.queue.writesDone.then(() => fn(this.native));
    return fn(this.native);
  }

  /** `fn(native, leaseId)` under the write lease, committed on success. */
  write(fn) {
    return this.queue.run((id) => fn(this.native, id));
  }

  /** Resolves with `{ id, release }` once the lease is held. */
  begin(partition) {
    return this.queue.acquire(partition);
  }

  close() {
    this.native.close();
  }
}

module.exports = { SqliteDriver };
