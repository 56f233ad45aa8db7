'use strict';
// StorageTransaction over a lease from `begin` (SQLite: the write lease;
// PostgreSQL: a pinned pool connection). A native call that answers at
// once settles the member's promise at once; one that answers later makes
// the transaction's next calls wait for it, so they run in submission
// order. Members are plain functions returning promises (not async
// functions): a push makes dozens of these calls and each async layer
// costs a promise and a tick.

const { invalidArgument, withCode } = require('./errors');
const { enterTx, code, closedError, takeCurrent } = require('./guard');
const { RowCache, MISS } = require('./row-cache');
const V = require('./values');
const Q = require('./query');
const R = require('./reactions');

// What the storage keeps of an open transaction (storage._opened): its
// lease, its age and last member, and whether it ended or the storage
// rolled it back. It never references the transaction, so a dropped one
// stays collectable and the finalizer below rolls it back. (Not a WeakRef
// to it: V8 keeps a WeakRef's target alive until the current job ends, and
// a host's loop of settled calls is one job, so every transaction of the
// loop stayed alive and GC took a third of a push under Node.)
// `busy`: settles once the calls of the transaction still running have
// (undefined when none is); `committing`: its commit was asked for.
function openHandle(storage, native, lease) {
  return { storage, native, lease, started: performance.now(), last: 'begin', warned: false, ended: false, aborted: undefined, busy: undefined, committing: false };
}

/** The transaction is over: its lease goes back and the storage forgets it. */
function endHandle(h) {
  if (h.ended) return;
  h.ended = true;
  abandoned.unregister(h);
  h.lease.release();
  h.storage._ended(h);
}

/**
 * The storage rolls the transaction back: close()'s drain is over
 * (`ERR_SYNCULAR_CLOSED`), or it outlived `transactionTimeoutMs`
 * (`ERR_SYNCULAR_TX_TIMEOUT`). Its later calls, and calls still running
 * (whatever they answer), reject with that code; rollback() resolves (it
 * has happened). The rollback waits for the calls still running: issued
 * under them it would wait for them anyway, on the JS thread (SQLite's
 * writer) or behind them (PostgreSQL's connection). close() cuts calls
 * that run on past its drain (storage.js).
 */
async function abortHandle(h, code) {
  if (h.ended) return;
  h.aborted ??= code;
  while (h.busy !== undefined) await h.busy;
  if (h.ended) return;
  try {
    await h.native.unlock(h.lease.id, false);
  } catch {
    // the engine already let go of it
  } finally {
    endHandle(h);
  }
}

// A transaction dropped without commit or rollback must not hold the write
// lease forever: roll it back when it is collected.
const abandoned = new FinalizationRegistry((h) => {
  if (h.ended) return;
  let out;
  try {
    out = h.native.unlock(h.lease.id, false);
  } catch {
    // The storage was closed meanwhile; nothing is held any more.
  }
  const done = () => endHandle(h);
  // An engine that answers later rolls back in the background.
  if (out instanceof Promise) out.then(done, done);
  else done();
});

const METHODS = [
  'getRow',
  'getTombstoneSeq',
  'clearTombstone',
  'getPushResult',
  'scanRows',
  'scanRowsByIndex',
  'queryAuthoritative',
  'lockPartitionForPush',
  'lockPartitionForCommitValidation',
  'commitRejectedPushResult',
  'upsertRow',
  'deleteRow',
  'appendCommit',
  'putPushResult',
  'setBlobRefs',
  'readServeGate',
  'advanceCheckpoint',
  'enqueueReactions',
  'prefetchRows',
  'commit',
  'rollback',
];

const noop = () => {};

/** A transaction's own member `fn`, bound to it (see enterTx). */
function memberOf(fn, t, counter, h) {
  return function (a, b, c, d, e, f) {
    return enterTx(fn, t, counter, h, a, b, c, d, e, f);
  };
}
const RESOLVED = Promise.resolve();

class NativeTransaction {
  #native;
  #id;
  /** The lease from begin: its commit() ends the transaction. */
  #lease;
  #storage;
  /** See openHandle: `ended`, and `aborted` (the code its calls answer once the storage rolled it back). */
  #handle;
  /** Native calls still running; later calls wait for `#tail`. */
  #pending = 0;
  /** Read only while #pending > 0, when #later has set it. */
  #tail = RESOLVED;
  /** prefetchRows' answers (made by the first prefetchRows). */
  #cache = undefined;

  /** `engine.native` runs the calls under `lease`. */
  constructor(storage, engine, lease) {
    const native = engine.native;
    this.#storage = storage;
    this.#native = native;
    this.#id = lease.id;
    this.#lease = lease;
    const handle = openHandle(storage, native, lease);
    this.#handle = handle;
    storage._opened(handle);
    abandoned.register(this, handle, handle);
    // Own, writable methods bound to this transaction: hosts and tests wrap
    // or replace them. Each notes its name on the handle, for the storage's
    // warning about a transaction left open. (Written out in the
    // constructor, all 21 sharing its scope, they cost Node 24 about 11k
    // more instructions a push than made by memberOf: not kept.)
    const counts = storage._txCountList;
    for (let i = 0; i < METHODS.length; i++) this[METHODS[i]] = memberOf(PROTO[i], this, counts[i], handle);
  }

  #end() {
    endHandle(this.#handle);
  }

  #abortError() {
    const code = this.#handle.aborted;
    if (code === 'ERR_SYNCULAR_CLOSED') return closedError('transaction');
    return withCode(new Error('transaction rolled back: open longer than transactionTimeoutMs'), code);
  }

  #fail(err) {
    // A call cut by the storage's rollback (close, age limit) says so, not
    // what the engine answered the cut statement (57014, GenericFailure).
    if (this.#handle.aborted !== undefined) return this.#abortError();
    return code(this.#storage._translate(err));
  }

  /**
   * Runs `fn(native, id)` after this transaction's earlier calls and
   * settles with `out(result)` (or the result); errors translated and coded.
   */
  #call(fn, out, durable) {
    // The member's counter (see guard.settled); undefined in internal calls.
    const counter = takeCurrent();
    if (this.#handle.aborted !== undefined) return this.#refuse(counter, this.#abortError());
    if (this.#handle.ended) {
      return this.#refuse(counter, withCode(new Error('transaction already finished'), 'ERR_SYNCULAR_TX_FINISHED'));
    }
    if (this.#pending === 0) {
      let v;
      try {
        v = fn(this.#native, this.#id);
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      return this.#answer(v, out, counter, durable);
    }
    const h = this.#handle;
    return this.#later(
      // Rolled back by the storage meanwhile: it does not run (#fail answers the abort).
      this.#tail.then(() => (h.aborted === undefined ? fn(this.#native, this.#id) : Promise.reject(undefined))),
      out,
      counter,
      durable,
    );
  }

  #refuse(counter, err) {
    if (counter !== undefined) counter.errors++;
    return Promise.reject(err);
  }

  /**
   * True when a call may run now, as #call would run it at once: nothing
   * of this transaction is running and it is neither over nor rolled back.
   * The push path's members then call the addon directly (no closure).
   */
  #idle() {
    const h = this.#handle;
    return this.#pending === 0 && h.aborted === undefined && !h.ended;
  }

  /** #call's settling of `v`, the engine's answer to a call made at once. */
  #answer(v, out, counter, durable) {
    if (v instanceof Promise) return this.#later(v, out, counter, durable);
    if (out === undefined) return Promise.resolve(v);
    try {
      return Promise.resolve(out(v));
    } catch (err) {
      return this.#refuse(counter, code(err));
    }
  }

  /**
   * A call answering later: the next calls wait until it settles. An
   * answer that comes after the storage rolled the transaction back is
   * refused with the abort's code (the work was rolled back), unless the
   * call is `durable` (a commit that completed: it is acknowledged).
   */
  #later(run, out, counter, durable) {
    const h = this.#handle;
    this.#pending++;
    const settled = run.then(noop, noop);
    this.#tail = settled;
    h.busy = settled;
    settled.then(() => {
      this.#pending--;
      if (h.busy === settled) h.busy = undefined;
    });
    if (out === undefined) {
      return run.then(
        (v) => (h.aborted === undefined || durable ? v : this.#refuse(counter, this.#abortError())),
        (err) => this.#refuse(counter, this.#fail(err)),
      );
    }
    const answered = (v) => {
      if (h.aborted !== undefined && !durable) throw this.#abortError();
      return out(v);
    };
    return run
      .then(answered, (err) => {
        throw this.#fail(err);
      })
      .catch((err) => this.#refuse(counter, code(err)));
  }

  getRow(table, rowId) {
    const cache = this.#cache;
    if (cache !== undefined && !this.#handle.ended) {
      const hit = cache.takeRow(table, rowId);
      if (hit !== MISS) return Promise.resolve(hit);
    }
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#native.txGetRow(this.#id, table, rowId);
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      return this.#answer(v, V.rowOut, counter, false);
    }
    return this.#call((n, id) => n.txGetRow(id, table, rowId), V.rowOut);
  }

  getTombstoneSeq(table, rowId) {
    const cache = this.#cache;
    if (cache !== undefined && !this.#handle.ended) {
      const hit = cache.tomb(table, rowId);
      if (hit !== MISS) return Promise.resolve(hit);
    }
    return this.#call((n, id) => n.txGetTombstoneSeq(id, table, rowId), orUndefined);
  }

  clearTombstone(table, rowId) {
    const cache = this.#cache;
    // Deleting a tombstone known not to exist changes nothing.
    if (cache !== undefined && !this.#handle.ended && cache.knownNoTomb(table, rowId)) return Promise.resolve();
    return this.#call((n, id) => {
      const out = n.txClearTombstone(id, table, rowId);
      this.#cache?.tombCleared(table, rowId);
      return out;
    });
  }

  getPushResult(clientId, clientCommitId) {
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#native.txGetPushResult(this.#id, clientId, clientCommitId);
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      // No stored result (the usual answer): nothing to parse.
      if (v === null || v === undefined) return Promise.resolve(undefined);
      return this.#answer(v, this.#storage._pushOut, counter, false);
    }
    return this.#call((n, id) => n.txGetPushResult(id, clientId, clientCommitId), this.#storage._pushOut);
  }

  scanRows(query) {
    if (!query || typeof query !== 'object') throw invalidArgument('scanRows: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    return this.#call(
      (n, id) => n.txScanRows(id, query.table, filter, query.afterRowId ?? '', query.limit),
      V.unpackRows,
    );
  }

  scanRowsByIndex(query) {
    const q = Q.indexArgs('scanRowsByIndex', query);
    return this.#call(
      (n, id) => n.txScanRowsByIndex(id, q.table, q.index, q.values, q.afterRowId, q.limit),
      V.unpackRows,
    );
  }

  /** Bound to this transaction: its connection, its staged writes, no gate. */
  queryAuthoritative(query) {
    const { request, params } = Q.requestIn(query);
    return this.#call((n, id) => n.txQueryAuthoritative(id, request, params), Q.queryResult);
  }

  lockPartitionForPush() {
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#native.txLockPartitionForPush(this.#id);
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      return this.#answer(v, noop, counter, false);
    }
    return this.#call((n, id) => n.txLockPartitionForPush(id), noop);
  }

  /** @deprecated alias kept for 0.15.x hosts. */
  lockPartitionForCommitValidation() {
    return this.#call((n, id) => n.txLockPartitionForPush(id), noop);
  }

  commitRejectedPushResult(clientId, clientCommitId, result) {
    const json = V.serializePushResult(result);
    // The savepoint rollback undoes this transaction's row writes.
    this.#cache?.clear();
    this.#handle.committing = true;
    return this.#ending(
      this.#call((n, id) => n.txCommitRejectedPushResult(id, clientId, clientCommitId, json), noop, true),
    );
  }

  upsertRow(table, row, context) {
    if (!row || typeof row !== 'object') throw invalidArgument('upsertRow: row must be a StoredRow');
    const scopes = JSON.stringify(row.scopes ?? {});
    const rowId = row.rowId;
    this.#cache?.forgetRow(table, rowId);
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#native.txUpsertRow(
          this.#id,
          table,
          rowId,
          row.serverVersion,
          scopes,
          row.payload,
          row.columnVersions ?? undefined,
          context?.opIndex,
        );
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      return this.#answer(v, undefined, counter, false);
    }
    return this.#call((n, id) =>
      n.txUpsertRow(
        id,
        table,
        rowId,
        row.serverVersion,
        scopes,
        row.payload,
        row.columnVersions ?? undefined,
        context?.opIndex,
      ),
    );
  }

  deleteRow(table, rowId) {
    this.#cache?.forgetRow(table, rowId);
    return this.#call((n, id) => n.txDeleteRow(id, table, rowId));
  }

  appendCommit(commit) {
    if (!commit || typeof commit !== 'object' || !Array.isArray(commit.changes)) {
      throw invalidArgument('appendCommit: commit must be a NewCommit with a changes array');
    }
    const [changes, payloads] = V.packChanges(commit.changes);
    // Tombstones are written here.
    this.#cache?.clear();
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#native.txAppendCommit(
          this.#id,
          commit.clientId,
          commit.clientCommitId,
          commit.actorId,
          commit.createdAtMs,
          changes,
          payloads,
        );
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      return this.#answer(v, undefined, counter, false);
    }
    return this.#call((n, id) =>
      n.txAppendCommit(
        id,
        commit.clientId,
        commit.clientCommitId,
        commit.actorId,
        commit.createdAtMs,
        changes,
        payloads,
      ),
    );
  }

  putPushResult(clientId, clientCommitId, result) {
    const json = V.serializePushResult(result);
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#native.txPutPushResult(this.#id, clientId, clientCommitId, json);
      } catch (err) {
        return this.#refuse(counter, this.#fail(err));
      }
      return this.#answer(v, undefined, counter, false);
    }
    return this.#call((n, id) => n.txPutPushResult(id, clientId, clientCommitId, json));
  }

  setBlobRefs(table, rowId, blobIds) {
    if (!Array.isArray(blobIds)) throw invalidArgument('setBlobRefs: blobIds must be an array');
    return this.#call((n, id) => n.txSetBlobRefs(id, table, rowId, blobIds));
  }

  readServeGate(runningSchemaVersion) {
    return this.#call((n, id) => n.txReadServeGate(id, runningSchemaVersion), V.gateOut);
  }

  advanceCheckpoint(name, ownerEpoch, watermark, observedRows, nowMs) {
    return this.#call((n, id) => n.advanceCheckpoint(id, null, name, ownerEpoch, watermark, observedRows, nowMs));
  }

  enqueueReactions(reactions) {
    if (!Array.isArray(reactions)) throw invalidArgument('enqueueReactions: reactions must be an array');
    const list = reactions.map(R.reactionIn);
    return this.#call((n, id) => n.txEnqueueReactions(id, list));
  }

  prefetchRows(table, rowIds) {
    if (!Array.isArray(rowIds)) throw invalidArgument('prefetchRows: rowIds must be an array');
    // Only string ids can name rows; others are not worth a read.
    const ids = rowIds.filter((r) => typeof r === 'string');
    const cache = (this.#cache ??= new RowCache());
    // Answers that arrive after a write was submitted may predate it.
    const version = cache.version;
    return this.#call(
      (n, id) => n.txPrefetchRows(id, table, ids),
      (packed) => {
        const { stable, entries } = V.unpackPrefetched(packed);
        if (cache.version === version) cache.fill(table, entries, stable);
      },
    );
  }

  /** Settles once the commit is durable (with group commit: its group's). */
  commit() {
    this.#handle.committing = true;
    if (this.#idle()) {
      const counter = takeCurrent();
      let v;
      try {
        v = this.#lease.commit();
      } catch (err) {
        const out = this.#refuse(counter, this.#fail(err));
        this.#settleEnd();
        return out;
      }
      // Answered at once and without error: the engine let go of the
      // lease (committed, or held for its group), so no isHeld() call.
      if (!(v instanceof Promise)) {
        if (!this.#handle.ended) this.#end();
        return Promise.resolve(undefined);
      }
      return this.#ending(this.#later(v, noop, counter, true));
    }
    return this.#ending(this.#call(() => this.#lease.commit(), noop, true));
  }

  /** After a commit: releases the lease if the engine no longer holds it. */
  #settleEnd() {
    if (!this.#handle.ended && !this.#native.isHeld(this.#id)) this.#end();
  }

  /**
   * `out`, after releasing the lease if the native call ended the
   * transaction (when it answered at once: before the caller resumes, so
   * a queued begin() starts at once).
   */
  #ending(out) {
    const settle = () => this.#settleEnd();
    if (this.#pending === 0) {
      settle();
      return out;
    }
    return out.then(
      (v) => {
        settle();
        return v;
      },
      (err) => {
        settle();
        throw err;
      },
    );
  }

  async rollback() {
    if (this.#handle.ended) return;
    this.#cache?.clear();
    try {
      if (this.#pending > 0) await this.#tail;
      await this.#native.unlock(this.#id, false);
    } finally {
      this.#end();
    }
  }
}

function orUndefined(v) {
  return v ?? undefined;
}

/** The members' own functions, in METHODS' order (the constructor wraps them). */
const PROTO = METHODS.map((name) => NativeTransaction.prototype[name]);

module.exports = { NativeTransaction, TX_METHODS: METHODS, abortHandle };
