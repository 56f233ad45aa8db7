'use strict';
// Submission order for writes, over either kind of engine.
//
// An engine with one writer (`exclusiveWrites`: SQLite) has one write
// lease: a transaction holds it from begin() to commit/rollback, a
// storage-level write for one call, and they queue here in submission
// order. When nothing is queued, a write takes the lease at once, so
// `touchPartition(...)` fired without await has landed before the
// caller's next read.
//
// An engine with many writers (PostgreSQL) runs transactions side by side
// (the database's row locks serialize pushes); its storage-level writes
// still take effect in submission order, one after another, with lease 0.
//
// Either way a read submitted after a storage-level write waits for it.

const noop = () => {};

class WriteQueue {
  constructor(native) {
    this.native = native;
    this.exclusive = native.exclusiveWrites;
    this.tail = Promise.resolve();
    this.waiting = 0; // leases queued or held (exclusive engines)
    this.writes = 0; // storage-level writes queued or running
    this.writesDone = Promise.resolve();
  }

  /** Resolves with `{ id, release }` once the engine granted a lease. */
  acquire(partition) {
    if (!this.exclusive) {
      try {
        return Promise.resolve(this.native.begin(partition)).then((id) => ({ id, release: noop }));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return this.#queued(partition, undefined);
  }

  /** `started`: a `begin` already issued (a value or a Promise), else none. */
  #queued(partition, started) {
    let open;
    const gate = new Promise((resolve) => {
      open = resolve;
    });
    const previous = this.tail;
    this.tail = gate;
    this.waiting++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.waiting--;
      open();
    };
    const granted = (id) => ({ id, release });
    const failed = (err) => {
      release();
      throw err;
    };
    if (started !== undefined) return Promise.resolve(started).then(granted, failed);
    if (this.waiting === 1) {
      // Nothing queued or held: every earlier gate is open, so ask for the
      // lease now instead of a few promise turns later.
      try {
        return Promise.resolve(this.native.begin(partition)).then(granted, failed);
      } catch (err) {
        release();
        return Promise.reject(err);
      }
    }
    return previous.then(() => this.native.begin(partition)).then(granted, failed);
  }

  /** Runs `fn(leaseId)` as one storage-level write, committing on success. */
  run(fn) {
    if (!this.exclusive) return this.#track(this.writesDone.then(() => fn(0)));
    let pending;
    if (this.waiting === 0) {
      const id = this.native.begin(null);
      if (!(id instanceof Promise)) return this.finish(id, fn);
      // Another process holds the database's write lock: wait off-thread.
      pending = this.#queued(null, id);
    } else {
      pending = this.#queued(null, undefined);
    }
    return this.#track(
      pending.then((lease) => {
        let out;
        try {
          out = this.finish(lease.id, fn);
        } catch (err) {
          lease.release();
          throw err;
        }
        if (out instanceof Promise) return out.finally(lease.release);
        lease.release();
        return out;
      }),
    );
  }

  #track(done) {
    const settled = done.then(noop, noop);
    this.writes++;
    // Exclusive leases already serialize the writes; the others chain here.
    this.writesDone = this.exclusive ? settled : Promise.all([this.writesDone, settled]).then(noop);
    settled.then(() => {
      this.writes--;
    });
    return done;
  }

  /** `fn(id)` under lease `id`, then commit (rollback if it failed). */
  finish(id, fn) {
    let out;
    try {
      out = fn(id);
    } catch (err) {
      this.native.unlock(id, false);
      throw err;
    }
    if (out instanceof Promise) {
      return out.then(
        async (v) => {
          await this.native.unlock(id, true);
          return v;
        },
        async (err) => {
          await this.native.unlock(id, false);
          throw err;
        },
      );
    }
    const committed = this.native.unlock(id, true);
    return committed instanceof Promise ? committed.then(() => out) : out;
  }

  /** Reads wait for storage-level writes submitted before them. */
  get writesPending() {
    return this.writes > 0;
  }
}

module.exports = { WriteQueue };
