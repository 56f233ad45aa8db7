'use strict';
// Submission order for writes, over either kind of engine, and group
// commit for the engine with one writer.
//
// An engine with one writer (`exclusiveWrites`: SQLite) has one write
// lease: a transaction holds it from begin() to commit/rollback, a
// storage-level write for one call, and they queue here in submission
// order. When nothing is queued, a storage-level write runs at once, in
// one call that begins, runs and commits it (no lease is handed out), so
// `touchPartition(...)` fired without await has landed before the
// caller's next read.
//
// Group commit: when a lease commits while others wait for it, its work is
// committed into the open database transaction (`hold`) and the next lease
// joins that transaction in a savepoint of its own. The group becomes
// durable with one COMMIT, one sync, when a lease commits with nobody
// waiting, when the group reaches `maxSize` leases or `maxWaitMs` of age,
// or when the last lease in line rolls back. Every held commit settles only
// after that COMMIT, and all of them fail if it fails. A lone write never
// waits: nothing is held unless another lease is already in line.
//
// A storage-level write is held only when the next lease in line is also a
// storage-level write. Reads wait for the storage-level writes submitted
// before them; a transaction holding the lease may await such a read, so a
// transaction must never run while a write it would wait for is held.
//
// An engine with many writers (PostgreSQL) runs transactions side by side
// (the database's row locks serialize pushes); its storage-level writes
// take effect in submission order per partition, with lease 0: a write
// waits for the earlier writes of its partition and the earlier
// unpartitioned ones (ensureSchema), and an unpartitioned write for every
// earlier write. A write blocked on one partition's row lock (by a
// transaction left open there) holds up no other partition.
//
// Either way a read of a partition submitted after a storage-level write of
// that partition (or an unpartitioned one) waits for it, and an
// unpartitioned read waits for every write submitted before it. Pending
// writes are counted per partition, so a read of another partition, or any
// read while nothing is pending, runs at once: a transaction left open, with
// the host's writes queued behind it, stalls no read of other partitions.
//
// With many writers a write may be `hidden`: one whose effect no read of
// its partition but a registry read can see (`touchPartition` of a
// partition already registered, which refreshes only the registry row's
// timestamp). Later writes still wait for it; a read waits for it only when
// it asks for that (`afterRead(p, true)`), so a caller that fires the touch
// without awaiting it does not wait for its round trip on its next reads.

const { attachRollbackError } = require('./errors');

const noop = () => {};

function closedError() {
  const err = new Error('storage is closed');
  err.code = 'ERR_SYNCULAR_CLOSED';
  return err;
}

/** The lease of a write the engine runs in a transaction of its own. */
const OWN_TRANSACTION = 0;
const BLOCKED = Symbol('blocked');
/** The engine's internal answer when the write lock was not free at once. */
const wouldBlock = (err) => typeof err?.message === 'string' && err.message.includes('"ERR_SYNCULAR_WOULD_BLOCK"');

const TX = 'tx';
const WRITE = 'write';
/** The `pending` key of unpartitioned writes (ensureSchema). */
const EVERY = Symbol('every partition');
const RESOLVED = Promise.resolve();

/**
 * A place in the exclusive engine's line, and once granted the lease
 * itself, `{ id, partition, release(), commit() }`: one object per
 * transaction. `previous` (the lease that entered before it, until this
 * one is granted or released) is what a queued lease waits for; its gate,
 * a promise settling at release, is made only when a lease waits on it.
 */
class Lease {
  constructor(queue, kind, previous) {
    this.queue = queue;
    this.kind = kind;
    this.released = false;
    this.previous = previous;
    this.gate = undefined;
    this.open = undefined;
    this.id = 0;
    /** The transaction's partition (storage.js sets it). */
    this.partition = undefined;
  }

  release() {
    this.queue._release(this);
  }

  /** Settles once the work is durable (see WriteQueue.commit). */
  commit() {
    return this.queue.commit(this, this.id);
  }
}

/** A promise settling once `lease` (undefined: none) is released. */
function gateOf(lease) {
  if (lease === undefined || lease.released) return RESOLVED;
  lease.gate ??= new Promise((resolve) => {
    lease.open = resolve;
  });
  return lease.gate;
}

/**
 * Counts `settled` as pending under `key` in `map` (its entry's `done` is
 * the last such write's); returns what uncounts it.
 */
function count(map, key, settled) {
  let entry = map.get(key);
  if (entry === undefined) {
    entry = { count: 0, done: settled };
    map.set(key, entry);
  }
  entry.count++;
  entry.done = settled;
  return () => {
    if (--entry.count === 0) map.delete(key);
  };
}

class WriteQueue {
  constructor(native, groupCommit) {
    this.native = native;
    this.exclusive = native.exclusiveWrites;
    /** The lease that entered the line last (undefined: none yet). */
    this.tail = undefined;
    /** Leases queued or held, oldest (the holder) first. */
    this.line = [];
    this.writes = 0; // storage-level writes queued or running
    /** Settles once every storage-level write submitted so far has. */
    this.writesDone = RESOLVED;
    /** Per partition (EVERY: unpartitioned) with writes pending: `{ count, done }`, `done` settling once they all have. */
    this.pending = new Map();
    /** The same for the writes every read must see (all but the hidden ones). */
    this.visible = new Map();
    this.grouping = this.exclusive && groupCommit !== false;
    this.maxSize = groupCommit?.maxSize ?? 64;
    this.maxWaitMs = groupCommit?.maxWaitMs ?? 5;
    /** The open group: `{ acks, started, timer }`, or null. */
    this.group = null;
    /** close()'s drain is over: a write still in line is refused, not run. */
    this.killed = false;
    /** For stats(): leases that waited in line, and physical commits. */
    this.waits = { count: 0, totalMs: 0 };
    this.commits = { count: 0, sum: 0, max: 0 };
  }

  /** A physical commit made `n` acknowledged leases durable. */
  #durable(n) {
    const c = this.commits;
    c.count++;
    c.sum += n;
    if (n > c.max) c.max = n;
  }

  /**
   * A transaction's lease, `{ id, release, commit }`: the lease itself when
   * nothing is queued or held and the engine grants it at once (no promise
   * turn), else a promise of it. Throws what the engine's begin throws.
   */
  acquire(partition) {
    if (!this.exclusive) {
      const lease = (id) => ({ id, partition: undefined, release: noop, commit: () => this.native.unlock(id, true) });
      const id = this.native.begin(partition);
      return id instanceof Promise ? id.then(lease) : lease(id);
    }
    if (this.line.length > 0) return this.#queued(partition, undefined, TX);
    return this.#beginNow(this.#enter(TX), partition);
  }

  /**
   * Nothing queued or held: asks the engine for `entry`'s lease now. The
   * lease when granted at once, else a promise of it; throws what the
   * engine's begin throws, with `entry` released.
   */
  #beginNow(entry, partition) {
    let id;
    try {
      id = this.native.begin(partition);
    } catch (err) {
      entry.release();
      throw err;
    }
    if (!(id instanceof Promise)) return this.#lease(entry, id);
    return id.then(
      (id) => this.#lease(entry, id),
      (err) => {
        entry.release();
        throw err;
      },
    );
  }

  /** Puts a lease of `kind` in line, behind the one that entered last. */
  #enter(kind) {
    const entry = new Lease(this, kind, this.tail);
    this.tail = entry;
    this.line.push(entry);
    return entry;
  }

  /** `entry` leaves the line; the lease after it may begin. */
  _release(entry) {
    if (entry.released) return;
    entry.released = true;
    entry.previous = undefined;
    const line = this.line;
    if (line[0] === entry) line.shift();
    else {
      const at = line.indexOf(entry);
      if (at >= 0) line.splice(at, 1);
    }
    if (entry.open !== undefined) entry.open();
    // The last lease in line is gone: nobody can join the group.
    if (this.group !== null && line.length === 0) this.#flush();
  }

  /** The entry, granted lease `id`, is the lease. */
  #lease(entry, id) {
    entry.id = id;
    entry.previous = undefined;
    return entry;
  }

  /** `started`: a `begin` already issued (a Promise), else none. */
  #queued(partition, started, kind) {
    const entry = this.#enter(kind);
    const granted = (id) => this.#lease(entry, id);
    const failed = (err) => {
      entry.release();
      throw err;
    };
    if (started !== undefined) return started.then(granted, failed);
    if (this.line.length === 1) {
      // Nothing queued or held: every earlier gate is open, so ask for the
      // lease now instead of a few promise turns later.
      try {
        return Promise.resolve(this.#beginNow(entry, partition));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const queuedAt = performance.now();
    const begin = () => {
      this.waits.count++;
      this.waits.totalMs += performance.now() - queuedAt;
      return this.native.begin(partition);
    };
    return gateOf(entry.previous).then(begin).then(granted, failed);
  }

  /**
   * Commits lease `id` (queue entry `entry`) and releases it. Settles once
   * the work is durable: at once for a plain commit, or when its group is.
   */
  commit(entry, id) {
    if (this.#mayHold(entry)) {
      try {
        this.native.hold(id);
      } catch (err) {
        // The engine rolled the whole group back.
        this.#settleGroup(this.#takeGroup(), err);
        entry.release();
        throw err;
      }
      const group = this.group ?? this.#openGroup();
      const ack = new Promise((resolve, reject) => group.acks.push({ resolve, reject }));
      entry.release();
      return ack;
    }
    // A plain COMMIT also makes the open group durable.
    const group = this.#takeGroup();
    let out;
    try {
      out = this.native.unlock(id, true);
    } catch (err) {
      this.#settleGroup(group, err);
      entry.release();
      throw err;
    }
    const size = group === null ? 1 : group.acks.length + 1;
    if (out instanceof Promise) {
      return out.then(
        (v) => {
          this.#durable(size);
          this.#settleGroup(group);
          entry.release();
          return v;
        },
        (err) => {
          this.#settleGroup(group, err);
          entry.release();
          throw err;
        },
      );
    }
    this.#durable(size);
    this.#settleGroup(group);
    entry.release();
    return out;
  }

  #mayHold(entry) {
    if (!this.grouping || this.line[0] !== entry) return false;
    const next = this.line[1];
    if (next === undefined) return false;
    if (entry.kind === WRITE && next.kind !== WRITE) return false;
    const g = this.group;
    return g === null || (g.acks.length + 1 < this.maxSize && performance.now() - g.started < this.maxWaitMs);
  }

  #openGroup() {
    const group = { acks: [], started: performance.now(), timer: undefined };
    this.group = group;
    this.#arm(group);
    return group;
  }

  // A caller may await a held commit while it holds a later lease that has
  // not run anything yet (it began, then awaited the earlier commit): the
  // group would wait for that lease and the lease for the group. The timer
  // flushes such a group; the engine declines while the lease has run work.
  #arm(group) {
    group.timer = setTimeout(() => {
      if (this.group === group) this.#flush();
    }, this.maxWaitMs);
  }

  #takeGroup() {
    const group = this.group;
    if (group !== null) {
      clearTimeout(group.timer);
      this.group = null;
    }
    return group;
  }

  #flush() {
    const group = this.group;
    let done;
    try {
      done = this.native.flush();
    } catch (err) {
      this.#settleGroup(this.#takeGroup(), err);
      return;
    }
    if (done instanceof Promise) {
      // Not an engine with groups today; settle when it answers.
      this.#takeGroup();
      done.then(
        () => {
          if (group !== null && group.acks.length > 0) this.#durable(group.acks.length);
          this.#settleGroup(group);
        },
        (err) => this.#settleGroup(group, err),
      );
      return;
    }
    if (done) {
      if (group !== null && group.acks.length > 0) this.#durable(group.acks.length);
      this.#settleGroup(this.#takeGroup());
    } else this.#arm(group);
  }

  #settleGroup(group, err) {
    if (group === null) return;
    for (const ack of group.acks) {
      if (err === undefined) ack.resolve();
      else ack.reject(err);
    }
  }

  /**
   * Runs `fn(native, leaseId)` as one storage-level write of `partition`
   * (undefined: of every partition), committing on success.
   */
  run(fn, partition, hidden = false) {
    if (!this.exclusive) {
      // Still waiting for earlier writes when close()'s drain ended: refused, never run.
      const start = () => (this.killed ? Promise.reject(closedError()) : fn(this.native, 0));
      return this.#track((this.after(partition) ?? RESOLVED).then(start), partition, hidden);
    }
    if (this.line.length === 0) {
      if (!this.killed) {
        const out = this.#own(fn, partition);
        if (out !== BLOCKED) return out;
      }
      const id = this.native.begin(null);
      if (!(id instanceof Promise)) {
        // Granted at once: the write runs now, before the caller resumes.
        const out = this.#finish(this.#lease(this.#enter(WRITE), id), fn);
        return out instanceof Promise ? this.#track(out, partition) : out;
      }
      // Another process holds the database's write lock: wait off-thread.
      return this.#track(
        this.#queued(null, id, WRITE).then((lease) => this.#finish(lease, fn)),
        partition,
      );
    }
    return this.#track(
      this.#queued(null, undefined, WRITE).then((lease) => this.#finish(lease, fn)),
      partition,
    );
  }

  /**
   * What a call of `partition` (undefined: of every partition) must come
   * after: a promise settling once the storage-level writes it must see
   * have, or undefined when none is pending.
   */
  after(partition) {
    return this.#after(partition, this.pending);
  }

  /**
   * What a read of `partition` must come after: as after(), less the
   * hidden writes unless `registry` (the read sees the registry row).
   */
  afterRead(partition, registry) {
    return this.#after(partition, registry ? this.pending : this.visible);
  }

  #after(partition, pending) {
    if (this.writes === 0) return undefined;
    if (partition === undefined) return this.writesDone;
    const own = pending.get(partition);
    const every = pending.get(EVERY);
    if (every === undefined) return own?.done;
    if (own === undefined) return every.done;
    return Promise.all([own.done, every.done]);
  }

  /**
   * Nothing is queued or held: the engine begins, runs and commits the
   * write in one call (lease 0, `OWN_TRANSACTION` in src/sqlite/mod.rs),
   * with no lease to hand out or end. BLOCKED when another connection
   * holds the database's write lock: nothing ran, and the write takes a
   * lease instead, waiting off the calling thread.
   */
  #own(fn, partition) {
    let out;
    try {
      out = fn(this.native, OWN_TRANSACTION);
    } catch (err) {
      if (wouldBlock(err)) return BLOCKED;
      throw err;
    }
    // SQLite answers these writes at once; were one to answer later, reads
    // after it still wait for it.
    if (out instanceof Promise) return this.#track(out.then((v) => (this.#durable(1), v)), partition);
    this.#durable(1);
    return out;
  }

  /**
   * Counts `done`, a storage-level write of `partition`, as pending until it
   * settles. The last write of a partition settles after the earlier ones
   * of that partition (one write lease serializes them all; with many
   * writers each waits for the earlier ones of its partition), so its
   * settling stands for them all.
   */
  #track(done, partition, hidden = false) {
    const settled = done.then(noop, noop);
    this.writes++;
    this.writesDone = this.exclusive || this.writes === 1 ? settled : Promise.all([this.writesDone, settled]).then(noop);
    const key = partition ?? EVERY;
    const uncount = count(this.pending, key, settled);
    const uncountVisible = hidden ? noop : count(this.visible, key, settled);
    settled.then(() => {
      this.writes--;
      uncount();
      uncountVisible();
    });
    return done;
  }

  /**
   * `fn(native, id)` under `lease`, then commit (roll back if it failed; a failed
   * rollback rides on `fn`'s error as its `rollbackError`, never replaces it).
   */
  #finish(lease, fn) {
    const rollback = (err) => {
      try {
        this.native.unlock(lease.id, false);
      } catch (rollbackError) {
        attachRollbackError(err, rollbackError);
      } finally {
        lease.release();
      }
    };
    if (this.killed) {
      const err = closedError();
      rollback(err);
      throw err;
    }
    let out;
    try {
      out = fn(this.native, lease.id);
    } catch (err) {
      rollback(err);
      throw err;
    }
    if (out instanceof Promise) {
      return out.then(
        (v) => Promise.resolve(lease.commit()).then(() => v),
        (err) => {
          rollback(err);
          throw err;
        },
      );
    }
    const committed = lease.commit();
    return committed instanceof Promise ? committed.then(() => out) : out;
  }

  /**
   * The storage is closing: make a group durable if no lease is running,
   * else its held commits are rolled back with that lease and fail.
   */
  closing() {
    if (this.group === null) return;
    this.#flush();
    const group = this.#takeGroup();
    if (group !== null) {
      const err = closedError();
      err.message = 'storage closed before the commit group was durable';
      this.#settleGroup(group, err);
    }
  }

  /** Storage-level writes are queued or running (of any partition). */
  get writesPending() {
    return this.writes > 0;
  }
}

module.exports = { WriteQueue };
