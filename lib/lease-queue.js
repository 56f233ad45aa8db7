'use strict';
// Submission-order queue for the engine's single write lease. A
// transaction holds the lease from begin() to commit/rollback; a
// storage-level write holds it for one call. When nothing is queued, a
// write takes the lease synchronously, so `touchPartition(...)` fired
// without await has landed before the caller's next read.

class LeaseQueue {
  constructor(native) {
    this.native = native;
    this.tail = Promise.resolve();
    this.waiting = 0; // leases queued or held
    this.writes = 0; // storage-level writes queued or running
    this.writesDone = Promise.resolve();
  }

  /** Resolves with `{ id, release }` once every earlier lease is released. */
  acquire(partition) {
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
    if (this.waiting === 1) {
      // Nothing queued or held: every earlier gate is open, so take the
      // lease now instead of a few promise turns later.
      try {
        const id = this.native.tryLock(partition);
        if (id !== null) return Promise.resolve({ id, release });
      } catch (err) {
        release();
        return Promise.reject(err);
      }
    }
    return previous.then(async () => {
      try {
        let id = this.native.tryLock(partition);
        if (id === null) id = await this.native.lockAsync(partition);
        return { id, release };
      } catch (err) {
        release();
        throw err;
      }
    });
  }

  /** Runs `fn(leaseId)` under the lease, committing on success. */
  run(fn) {
    if (this.waiting === 0) {
      const id = this.native.tryLock(null);
      if (id !== null) return this.finish(id, fn);
    }
    this.writes++;
    const done = this.acquire(null).then((lease) => {
      try {
        return this.finish(lease.id, fn);
      } finally {
        lease.release();
      }
    });
    const settled = done.then(
      () => {},
      () => {},
    );
    this.writesDone = settled;
    settled.then(() => {
      this.writes--;
    });
    return done;
  }

  finish(id, fn) {
    let out;
    try {
      out = fn(id);
    } catch (err) {
      this.native.unlock(id, false);
      throw err;
    }
    this.native.unlock(id, true);
    return out;
  }

  /** Reads wait for storage-level writes submitted before them. */
  get writesPending() {
    return this.writes > 0;
  }
}

module.exports = { LeaseQueue };
