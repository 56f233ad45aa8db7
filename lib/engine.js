'use strict';
// The seam between the storage and the addon: one native engine (SQLite or
// PostgreSQL, as the url says) and the queue that orders its writes.
// Native members answer with a value when the engine answered at once and
// with a Promise otherwise; callers accept both.

const native = require('./native');
const { invalidArgument } = require('./errors');
const { WriteQueue } = require('./write-queue');

// A memory database lives in a private temporary directory (docs/behaviour.md).
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

function optionalNumber(options, name) {
  const v = options[name];
  if (v !== undefined && v !== null && typeof v !== 'number') throw invalidArgument(`NativeStorage: ${name} must be a number`);
  return v ?? undefined;
}

function optionalString(options, name) {
  const v = options[name];
  if (v !== undefined && v !== null && typeof v !== 'string') throw invalidArgument(`NativeStorage: ${name} must be a string`);
  return v ?? undefined;
}

function groupCommitOption(v) {
  if (v === undefined || v === null || v === true) return undefined;
  if (v === false) return false;
  if (typeof v !== 'object') throw invalidArgument('NativeStorage: groupCommit must be a boolean or { maxSize, maxWaitMs }');
  const out = {};
  if (v.maxSize !== undefined) {
    if (!Number.isSafeInteger(v.maxSize) || v.maxSize < 1) throw invalidArgument('NativeStorage: groupCommit.maxSize must be a positive integer');
    out.maxSize = v.maxSize;
  }
  if (v.maxWaitMs !== undefined) {
    if (typeof v.maxWaitMs !== 'number' || !(v.maxWaitMs > 0) || !Number.isFinite(v.maxWaitMs)) {
      throw invalidArgument('NativeStorage: groupCommit.maxWaitMs must be a positive number');
    }
    out.maxWaitMs = v.maxWaitMs;
  }
  return out;
}

class Engine {
  constructor(url, options) {
    hookExit();
    const max = options.maxConnections;
    if (max !== undefined && (!Number.isSafeInteger(max) || max < 1)) {
      throw invalidArgument('NativeStorage: maxConnections must be a positive integer');
    }
    this.native = new native.NativeEngine({
      url,
      synchronous: optionalString(options, 'synchronous'),
      busyTimeoutMs: optionalNumber(options, 'busyTimeoutMs'),
      queryTimeoutMs: optionalNumber(options, 'queryTimeoutMs'),
      maxResultRows: optionalNumber(options, 'maxResultRows'),
      maxResultBytes: optionalNumber(options, 'maxResultBytes'),
      maxConnections: max,
      schema: optionalString(options, 'schema'),
      connectTimeoutMs: optionalNumber(options, 'connectTimeoutMs'),
      pooling: optionalString(options, 'pooling'),
    });
    this.queue = new WriteQueue(this.native, groupCommitOption(options.groupCommit));
  }

  /**
   * `fn(native)`, after the storage-level writes of `partition` (undefined:
   * of every partition) submitted before it; never after an open
   * transaction by itself, nor after writes of other partitions. After the
   * hidden ones too (write-queue.js) when `registry`: the read sees the
   * partition's registry row.
   */
  read(fn, partition, registry = false) {
    const q = this.queue;
    if (q.writes === 0) return fn(this.native);
    const prior = q.afterRead(partition, registry);
    return prior === undefined ? fn(this.native) : prior.then(() => fn(this.native));
  }

  /** `fn(native, leaseId)` as one storage-level write of `partition` (undefined: of every partition), committed on success. */
  write(fn, partition) {
    return this.queue.run(fn, partition);
  }

  /** Resolves with `{ id, release }` once the transaction's lease is held. */
  begin(partition) {
    return this.queue.acquire(partition);
  }

  /** Closes once; later calls answer the first's outcome. */
  close() {
    if (this.closed === undefined) {
      this.queue.closing();
      this.closed = this.native.close();
    }
    return this.closed;
  }
}

module.exports = { Engine };
