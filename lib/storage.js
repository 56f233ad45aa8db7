'use strict';
// NativeStorage: the ServerStorage the host sees. A plain, extensible
// object whose members are own, writable functions bound to it, so hosts
// and tests can wrap it in a Proxy or replace `begin`. Writes queue on the
// engine's write lease in submission order; reads run at once against
// committed state, after any write of their partition submitted before
// them (lib/write-queue.js). The members a request makes, transactions
// and close() are written here; the rest, by area, in lib/members/.

const { resolveErrorClasses, translate, invalidArgument, queryError, syncError, WIRE_PREFIX } = require('./errors');
const { Engine } = require('./engine');
const { NativeTransaction, TX_METHODS, abortHandle } = require('./transaction');
const { guarded, settled, code, checkText, closedError, takeCurrent } = require('./guard');
const ops = require('./ops');
const V = require('./values');
const Q = require('./query');
const { installLogger } = require('./logging');
const { checkOptions } = require('./options');
const { defineDb } = require('./db');
const native = require('./native');
const { installMembers } = require('./members');

/**
 * How long answers given at once may follow one another on the calling
 * thread before one waits for a turn of the event loop.
 */
const SLICE_MS = 2;
/** When the first answer given at once since the event loop last turned came (undefined: none yet). */
let sliceStarted;
function turned() {
  sliceStarted = undefined;
}

/**
 * Whether this slice of the event loop's time is spent: the first answer
 * given at once since the last turn starts a slice (and asks to hear of
 * the next turn), and SLICE_MS later the slice is spent.
 */
function sliceSpent() {
  const now = performance.now();
  if (sliceStarted === undefined) {
    sliceStarted = now;
    setImmediate(turned);
    return false;
  }
  return now - sliceStarted >= SLICE_MS;
}

const METHODS = [
  'ensureSchema',
  'touchPartition',
  'rotatePartitionLogEpoch',
  'listPartitionRegistry',
  'getPartitionLogEpoch',
  'listPartitions',
  'begin',
  'getMaxCommitSeq',
  'getHorizonSeq',
  'setHorizonSeq',
  'pruneCommitsThrough',
  'getCommitSeqBefore',
  'getRow',
  'getPushResult',
  'readCommitWindow',
  'latestScopedChangeSeq',
  'scanRows',
  'queryAuthoritative',
  'scanRowsByIndex',
  'readServeGate',
  'readCheckpoints',
  'writerFenceAllows',
  'declareCheckpoint',
  'claimCheckpoint',
  'advanceCheckpoint',
  'sourceCoverageSeq',
  'hasSourceChangesAbove',
  'activateCheckpoint',
  'getClientRecord',
  'putClientRecord',
  'listClientCursors',
  'advanceClientCursor',
  'updateClientCursor',
  'getActiveClientCursorFloor',
  'claimReactions',
  'completeReaction',
  'extendReactionLease',
  'failReaction',
  'retryReaction',
  'getReaction',
  'listReactions',
  'pruneReactions',
  'listClientRecords',
  'listCommitMetadata',
  'scopeActivity',
  'getRowScopes',
  'listRowsReferencingBlob',
  'listReferencedBlobIds',
  'ping',
  'stats',
  'backup',
  'restoreLayout',
  'copyTo',
  'close',
];

// Members that settle their own promise with coded errors (see guard.js).
// The host calls these on every request: one promise each, no async layers.
const SETTLED = new Set(['getRow', 'getPushResult', 'getClientRecord', 'getMaxCommitSeq', 'putClientRecord', 'touchPartition']);

// Members whose first argument is not a partition; every other member's
// must be a string (ERR_SYNCULAR_INVALID_ARGUMENT otherwise).
const UNPARTITIONED = new Set(['ensureSchema', 'listPartitionRegistry', 'listPartitions', 'ping', 'stats', 'backup', 'restoreLayout', 'copyTo', 'close']);

/** The gate of close() itself, which is never refused. */
const OPEN = Object.freeze({ closed: false });

const DEFAULT_DRAIN_MS = 5000;
/**
 * After the drain: how long calls still running (a transaction's, or on
 * PostgreSQL a storage-level write) may take to end on their own before
 * the engine closes under them.
 */
const CUT_GRACE_MS = 100;
const DEFAULT_TX_WARN_MS = 10_000;

function msOption(name, v, fallback) {
  if (v === undefined) return fallback;
  if (!Number.isSafeInteger(v) || v < 0) throw invalidArgument(`NativeStorage: ${name} must be an integer ≥ 0`);
  return v;
}

function rollbackQuietly(native, lease) {
  const done = () => lease.release();
  try {
    const out = native.unlock(lease.id, false);
    if (out instanceof Promise) return out.then(done, done);
  } catch {
    // the engine has nothing open under this lease any more
  }
  done();
  return undefined;
}

/** A call cut by close()'s end: ERR_SYNCULAR_CLOSED, with what the engine answered as its cause. */
function cutByClose(err) {
  if (err?.code === 'ERR_SYNCULAR_CLOSED') return err;
  const out = new Error('storage closed before the call finished', { cause: err });
  out.code = 'ERR_SYNCULAR_CLOSED';
  return out;
}

/** A rejection with `err` coded, counted on `counter` (see guard.settled). */
function refuse(counter, err) {
  if (counter !== undefined) counter.errors++;
  return Promise.reject(code(err));
}

const same = (v) => v;

function clientOrUndefined(c) {
  return c === null || c === undefined ? undefined : V.clientOut(c);
}

function noValue() {
  return undefined;
}

class NativeStorage {
  #engine;
  #errors;
  #ensuredVersion;
  #host;
  /** `closed` once close() was called: every member refuses from then on. */
  #gate = { closed: false };
  /** The close() in progress or done. */
  #closing;
  #drainMs;
  /** Open transactions (weak handles) and begins not yet answered. */
  #open = new Set();
  #begins = new Set();
  #drainWaiter;
  /** Transaction hygiene: warn after, and roll back after, these ages (0: never). */
  #txWarnMs;
  #txTimeoutMs;
  #watch;
  /** Calls and errors per member (stats()); the transactions' in `_txCounts`. */
  #counts = ops.counters(METHODS);
  /**
   * Partitions this storage saw registered (a registry row is never
   * deleted): touching one again changes only its timestamp, so the
   * touch is a hidden write (write-queue.js), and a read of its epoch
   * need not wait for it.
   */
  #registered = new Set();

  constructor(options) {
    const url = checkOptions(options);
    options ??= {};
    checkText(url, options.schema);
    installLogger(native, options.logger, options.logFilter);
    this.#errors = resolveErrorClasses(options.errors);
    this.#host = options.errors;
    this.#drainMs = msOption('closeDrainMs', options.closeDrainMs, DEFAULT_DRAIN_MS);
    this.#txWarnMs = msOption('transactionWarnMs', options.transactionWarnMs, DEFAULT_TX_WARN_MS);
    this.#txTimeoutMs = msOption('transactionTimeoutMs', options.transactionTimeoutMs, 0);
    this._txCounts = ops.counters(TX_METHODS);
    /** The same counters in TX_METHODS' order, for each transaction's wrappers. */
    this._txCountList = TX_METHODS.map((name) => this._txCounts[name]);
    // _pushResultOut bound to this storage, made once (every push's reads
    // pass it on); not enumerable, as it is no member.
    Object.defineProperty(this, '_pushOut', { value: (text) => this._pushResultOut(text) });
    try {
      this.#engine = new Engine(url, options);
    } catch (err) {
      // Bad options (synchronous, busyTimeoutMs, url): a coded error, not the wire text.
      throw this._translate(err);
    }
    // The SQLite connection for upstream's SQLite stores (lib/db.js).
    defineDb(this, () => this.#engine.native.sharedDb(), (err) => this._translate(err));
    for (const name of METHODS) {
      const wrap = SETTLED.has(name) ? settled : guarded;
      const gate = name === 'close' ? OPEN : this.#gate;
      this[name] = wrap(NativeStorage.prototype[name], this, name, !UNPARTITIONED.has(name), gate, this.#counts[name]);
    }
    // The host ensures the schema on every request: once this version is
    // in place, answer before the argument check walks the whole schema.
    const ensure = this.ensureSchema;
    const ensureCount = this.#counts.ensureSchema;
    this.ensureSchema = (schema, checkpoints) => {
      if (this.#ensuredVersion !== undefined && !this.#gate.closed && schema !== null && typeof schema === 'object') {
        let version;
        try {
          version = schema.version;
        } catch {
          // a hostile getter: the full path reports it
        }
        if (version === this.#ensuredVersion) {
          ensureCount.calls++;
          return Promise.resolve();
        }
      }
      return ensure(schema, checkpoints);
    };
  }

  // ---- internals shared with transactions ------------------------------------

  _translate(err) {
    return translate(err, this.#errors);
  }

  _pushResultOut(text) {
    if (text === null || text === undefined) return undefined;
    const parsed = V.parsePushResult(text);
    if (parsed === undefined) {
      throw syncError(this.#errors, 'sync.idempotency_cache_miss', 'persisted push result unreadable (§6.3)');
    }
    return parsed;
  }

  /**
   * The engine's answer, a value or a promise, with errors translated; a
   * call that fails after close()'s drain ended was cut by it (a cancelled
   * statement, a closed pool) and says ERR_SYNCULAR_CLOSED.
   */
  #settle(run) {
    try {
      const out = run();
      return out instanceof Promise ? out.catch((err) => Promise.reject(this.#failed(err))) : out;
    } catch (err) {
      throw this.#failed(err);
    }
  }

  #failed(err) {
    const t = this._translate(err);
    return this.#gate.killed ? cutByClose(t) : t;
  }

  /**
   * A read of `partition` (undefined: of every partition), ordered after
   * the storage-level writes of that partition submitted before it (and
   * after unpartitioned ones, such as ensureSchema).
   */
  #read(partition, fn) {
    return this.#settle(() => this.#engine.read(fn, partition));
  }

  /** A read that sees `partition`'s registry epoch: after its touches too, until it is known registered. */
  #readEpoch(partition, fn) {
    return this.#settle(() => this.#engine.read(fn, partition, !this.#registered.has(partition)));
  }

  /** Notes that `partition`'s registry row exists (bounded: forgetting only makes reads wait). */
  #sawRegistered(partition, entry) {
    if (this.#registered.size >= 100_000) this.#registered.clear();
    this.#registered.add(partition);
    return entry;
  }

  /**
   * A read settled as a promise of `out(result)` (#settle inlined: the
   * host makes these reads on every request).
   */
  #readThen(partition, fn, out) {
    const counter = takeCurrent();
    const engine = this.#engine;
    let v;
    try {
      v = engine.queue.writes === 0 ? fn(engine.native) : engine.read(fn, partition);
    } catch (err) {
      return refuse(counter, this.#failed(err));
    }
    if (v instanceof Promise) {
      return v
        .catch((err) => Promise.reject(this.#failed(err)))
        .then(out)
        .catch((err) => refuse(counter, err));
    }
    try {
      return Promise.resolve(out(v));
    } catch (err) {
      return refuse(counter, err);
    }
  }

  /**
   * A read that may answer on the calling thread with a page of rows
   * (SQLite's small windows, scans and cheap registered queries, each held
   * to the engine's calling-thread budget): an answer that came at once is
   * handed back at once while the event loop turned within the last
   * SLICE_MS, and after one turn otherwise (`sliceSpent`), so a host's loop
   * of such reads holds the loop for at most about SLICE_MS plus one read.
   * Waiting for a turn on every read cost a window pull 230 us of wall
   * time under Node 24 (bench/README.md, "One turn per slice").
   */
  async #readYielding(partition, fn) {
    const out = this.#settle(() => this.#engine.read(fn, partition));
    if (out instanceof Promise || !sliceSpent()) return out;
    await new Promise(setImmediate);
    return out;
  }

  /** A storage-level write of `partition` (undefined: of every partition), in submission order (see write-queue.js). */
  #write(partition, fn) {
    return this.#settle(() => this.#engine.write(fn, partition));
  }

  /** A storage-level write settled as one promise of `out(result)` (or the result); #settle inlined. */
  #writeThen(partition, fn, out, hidden = false) {
    const counter = takeCurrent();
    let v;
    try {
      v = this.#engine.queue.run(fn, partition, hidden);
    } catch (err) {
      return refuse(counter, this.#failed(err));
    }
    if (v instanceof Promise) {
      const failed = v.catch((err) => Promise.reject(this.#failed(err)));
      return (out === undefined ? failed : failed.then(out)).catch((err) => refuse(counter, err));
    }
    try {
      return Promise.resolve(out === undefined ? v : out(v));
    } catch (err) {
      return refuse(counter, err);
    }
  }

  // ---- schema ----------------------------------------------------------------

  async ensureSchema(schema, checkpoints) {
    if (this.#ensuredVersion !== undefined && this.#ensuredVersion === schema?.version) return;
    const json = V.flattenSchema(schema);
    const declarations = V.declarationsOf(checkpoints);
    await this.#write(undefined, (n, id) => n.ensureSchema(id, json, declarations, Date.now()));
    this.#ensuredVersion = schema.version;
  }

  // ---- partitions --------------------------------------------------------------

  touchPartition(partition, authenticatedAtMs, initialLogEpoch) {
    const hidden = this.#registered.has(partition);
    return this.#writeThen(
      partition,
      (n, id) => n.touchPartition(id, partition, initialLogEpoch, authenticatedAtMs, false),
      (v) => this.#sawRegistered(partition, V.registryOut(v)),
      hidden,
    );
  }

  async rotatePartitionLogEpoch(partition, logEpoch, authenticatedAtMs) {
    const v = await this.#write(partition, (n, id) => n.touchPartition(id, partition, logEpoch, authenticatedAtMs, true));
    return this.#sawRegistered(partition, V.registryOut(v));
  }

  async listPartitionRegistry() {
    return (await this.#read(undefined, (n) => n.listPartitionRegistry())).map(V.registryOut);
  }

  async getPartitionLogEpoch(partition) {
    return (await this.#readEpoch(partition, (n) => n.getPartitionLogEpoch(partition))) ?? undefined;
  }

  async listPartitions() {
    return (await this.listPartitionRegistry()).map((e) => e.partition);
  }

  // ---- transactions --------------------------------------------------------------

  begin(partition) {
    if (typeof partition !== 'string') return Promise.reject(invalidArgument('begin: partition must be a string'));
    // The host's StorageConstraintError is known before a write can violate a constraint.
    const ready = this.#errors.ready;
    let lease;
    try {
      lease = ready === undefined ? this.#engine.begin(partition) : ready.then(() => this.#engine.begin(partition));
    } catch (err) {
      return Promise.reject(this.#beginFailed(err));
    }
    if (!(lease instanceof Promise)) {
      // Granted at once (nothing queued or held): one settled promise.
      try {
        return Promise.resolve(this.#granted(lease, partition));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const begun = lease.then(
      (lease) => {
        this.#begins.delete(begun);
        return this.#granted(lease, partition);
      },
      (err) => {
        this.#begins.delete(begun);
        throw this.#beginFailed(err);
      },
    );
    this.#begins.add(begun);
    return begun;
  }

  /** A granted lease → its transaction (or, granted after close()'s drain ended, handed back). */
  #granted(lease, partition) {
    if (this.#gate.killed) {
      rollbackQuietly(this.#engine.native, lease);
      throw closedError('begin');
    }
    lease.partition = partition;
    return new NativeTransaction(this, this.#engine, lease);
  }

  #beginFailed(err) {
    this._drained();
    return this.#gate.killed ? cutByClose(this._translate(err)) : this._translate(err);
  }

  /** A transaction began: `handle` is its openHandle (transaction.js), which a dropped one leaves collectable. */
  _opened(handle) {
    this.#open.add(handle);
    if (this.#watch === undefined && (this.#txWarnMs > 0 || this.#txTimeoutMs > 0)) {
      const limits = [this.#txWarnMs, this.#txTimeoutMs].filter((ms) => ms > 0);
      const every = Math.max(10, Math.min(1000, Math.floor(Math.min(...limits) / 4)));
      // Weakly held: the timer must not keep a storage its host dropped
      // (and that storage's pool) alive.
      const self = new WeakRef(this);
      const watch = setInterval(() => {
        const storage = self.deref();
        if (storage === undefined) clearInterval(watch);
        else storage._sweep();
      }, every);
      watch.unref?.();
      this.#watch = watch;
    }
  }

  /** Warns about transactions left open, and rolls back those past the limit (the hygiene timer). */
  _sweep() {
    const now = performance.now();
    const postgres = !this.#engine.native.exclusiveWrites;
    for (const h of this.#open) {
      const age = now - h.started;
      if (h.aborted !== undefined) continue;
      if (this.#txTimeoutMs > 0 && age >= this.#txTimeoutMs) {
        native.logTransactionOpen(postgres, h.lease.partition ?? '', age, h.last, true);
        abortHandle(h, 'ERR_SYNCULAR_TX_TIMEOUT');
      } else if (this.#txWarnMs > 0 && age >= this.#txWarnMs && !h.warned) {
        h.warned = true;
        native.logTransactionOpen(postgres, h.lease.partition ?? '', age, h.last, false);
      }
    }
  }

  /** A transaction finished: committed, rolled back, collected, or aborted at close. */
  _ended(handle) {
    this.#open.delete(handle);
    this._drained();
  }

  /** Wakes close() when nothing it waits for is left. */
  _drained() {
    if (this.#drainWaiter !== undefined && this.#open.size === 0 && this.#begins.size === 0) this.#drainWaiter();
  }

  // ---- the log --------------------------------------------------------------------

  getMaxCommitSeq(partition) {
    return this.#readThen(partition, (n) => n.getMaxCommitSeq(partition), same);
  }

  async getHorizonSeq(partition) {
    return this.#read(partition, (n) => n.getHorizonSeq(partition));
  }

  async setHorizonSeq(partition, seq) {
    await this.#write(partition, (n, id) => n.setHorizonSeq(id, partition, seq));
  }

  async pruneCommitsThrough(partition, query) {
    if (typeof query === 'number') {
      const r = await this.#write(partition, (n, id) => n.pruneCommitsThrough(id, partition, query, undefined));
      return r.removedCommits;
    }
    // Only what cannot cross as arguments is refused here; the values
    // (a safe non-negative integer, a non-empty epoch) are checked once,
    // in the binding (`prune_target`), with the same code.
    const ok = query !== null && typeof query === 'object' && typeof query.throughSeq === 'number' && typeof query.logEpoch === 'string';
    if (!ok) throw queryError(this.#errors, 'sync.storage.invalid_prune_cursor');
    return this.#write(partition, (n, id) => n.pruneCommitsThrough(id, partition, query.throughSeq, query.logEpoch));
  }

  async getCommitSeqBefore(partition, createdBeforeMs) {
    return this.#read(partition, (n) => n.getCommitSeqBefore(partition, createdBeforeMs));
  }

  // ---- reads -----------------------------------------------------------------------

  // The two point reads every push makes: plain functions, not async ones.
  getRow(partition, table, rowId) {
    return this.#readThen(partition, (n) => n.getRow(partition, table, rowId), V.rowOut);
  }

  getPushResult(partition, clientId, clientCommitId) {
    return this.#readThen(partition, (n) => n.getPushResult(partition, clientId, clientCommitId), this._pushOut);
  }

  async readCommitWindow(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('readCommitWindow: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    const commits = await this.#readYielding(partition, (n) =>
      n.readCommitWindow(partition, query.table, filter, query.afterSeq, query.throughSeq, query.limitChanges),
    );
    return V.unpackCommits(commits);
  }

  async latestScopedChangeSeq(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('latestScopedChangeSeq: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    return this.#read(partition, (n) => n.latestScopedChangeSeq(partition, query.table, filter));
  }

  async scanRows(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('scanRows: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    const rows = await this.#readYielding(partition, (n) =>
      n.scanRows(partition, query.table, filter, query.afterRowId ?? '', query.limit),
    );
    return V.unpackRows(rows);
  }

  // ---- registered queries and index lookups (storage-layout §13, §7.6) ---------

  async queryAuthoritative(partition, query, checkpoints) {
    const { request, params } = Q.requestIn(query);
    const gate = Q.gateHooks(this.#host);
    const running = this.#ensuredVersion ?? 0;
    const out = await this.#readYielding(partition, (n) =>
      n.queryAuthoritative(partition, request, params, gate === undefined ? undefined : running),
    );
    if (gate !== undefined && out.gate !== undefined) {
      // Read in the query's own snapshot; evaluated by the host's functions.
      const refusal = gate.refusal(V.gateOut(out.gate), running, checkpoints);
      if (refusal !== undefined) throw gate.notReady(refusal);
    }
    if (out.error !== undefined) throw this._translate(new Error(WIRE_PREFIX + out.error));
    return Q.queryResult(out);
  }

  async scanRowsByIndex(partition, query) {
    const q = Q.indexArgs('scanRowsByIndex', query);
    const rows = await this.#read(partition, (n) =>
      n.scanRowsByIndex(partition, q.table, q.index, q.values, q.afterRowId, q.limit),
    );
    return V.unpackRows(rows);
  }

  // ---- clients ------------------------------------------------------------------------

  getClientRecord(partition, clientId) {
    return this.#readThen(partition, (n) => n.getClientRecord(partition, clientId), clientOrUndefined);
  }

  putClientRecord(partition, record) {
    if (!record || typeof record !== 'object') throw invalidArgument('putClientRecord: record must be a ClientRecord');
    if (record.subscriptions !== undefined && !Array.isArray(record.subscriptions)) {
      throw invalidArgument('putClientRecord: subscriptions must be an array');
    }
    const subscriptions = JSON.stringify(record.subscriptions ?? []);
    return this.#writeThen(
      partition,
      (n, id) =>
        n.putClientRecord(
          id,
          partition,
          record.clientId,
          record.actorId,
          record.wireVersion ?? 1,
          record.cursor,
          record.updatedAtMs,
          subscriptions,
        ),
      noValue,
    );
  }

  // ---- lifecycle --------------------------------------------------------------------

  /**
   * Shutdown (README "Shutdown"): refuses new calls at once; transactions
   * already begun, begins already asked for and writes already submitted
   * get `closeDrainMs` to finish; then what is still open is rolled back
   * (its calls reject with ERR_SYNCULAR_CLOSED), and the engine closes.
   * Resolves once nothing is left running; idempotent.
   */
  close() {
    this.#gate.closed = true;
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown() {
    const drained = new Promise((resolve) => {
      this.#drainWaiter = resolve;
    });
    this._drained();
    let timer;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(resolve, this.#drainMs);
    });
    const queue = this.#engine.queue;
    await Promise.race([Promise.all([drained, queue.writesDone]), deadline]);
    clearTimeout(timer);
    clearInterval(this.#watch);
    this.#gate.killed = true;
    queue.killed = true;
    // Open or collected with its finalizer not run yet: rolled back below.
    // From here their calls answer ERR_SYNCULAR_CLOSED, running ones too;
    // a commit already asked for finishes (SQLite: a group's held commit
    // becomes durable once the leases after it end).
    const open = [...this.#open];
    for (const h of open) if (!h.committing) h.aborted ??= 'ERR_SYNCULAR_CLOSED';
    // Other work still running gets CUT_GRACE_MS, then the engine closes
    // under it (PostgreSQL cancels its statements, SQLite interrupts a
    // running query) before any transaction is rolled back, so a write
    // waiting on a transaction's lock is refused, not let through by the
    // rollback.
    const running = open.filter((h) => h.busy !== undefined && !h.committing).map((h) => h.busy);
    if (!queue.exclusive && queue.writes > 0) running.push(queue.writesDone);
    if (running.length > 0) {
      let graceTimer;
      const ended = await Promise.race([
        Promise.all(running).then(() => true),
        new Promise((resolve) => {
          graceTimer = setTimeout(resolve, CUT_GRACE_MS, false);
        }),
      ]);
      clearTimeout(graceTimer);
      if (!ended) await this.#engine.close();
    }
    await Promise.all(open.map((h) => abortHandle(h, 'ERR_SYNCULAR_CLOSED')));
    await Promise.allSettled([...this.#begins]);
    // Writes still queued are refused now (the queue is killed); they
    // settle before close() resolves.
    await queue.writesDone;
    await this.#engine.close();
    // Those refusals reach the callers' promises through a few more promise
    // turns; one macrotask lets them all run, so close() resolves after.
    await new Promise(setImmediate);
  }

  // What the member modules (lib/members/) may use of a storage's private
  // state: handed to them alone, so the object the host holds shows none of it.
  static {
    installMembers(
      NativeStorage.prototype,
      Object.freeze({
        engine: (s) => s.#engine,
        counts: (s) => s.#counts,
        settle: (s, run) => s.#settle(run),
        read: (s, partition, fn) => s.#read(partition, fn),
        readEpoch: (s, partition, fn) => s.#readEpoch(partition, fn),
        write: (s, partition, fn) => s.#write(partition, fn),
      }),
    );
  }
}

module.exports = { NativeStorage };
