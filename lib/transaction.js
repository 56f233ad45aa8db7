'use strict';
// StorageTransaction over a held write lease (SQLite) or a pinned pool
// connection (PostgreSQL). On SQLite every member runs its native call
// synchronously; on PostgreSQL the calls of one transaction are chained in
// submission order.

const { invalidArgument, withCode } = require('./errors');
const { guarded } = require('./guard');
const V = require('./values');
const Q = require('./query');
const R = require('./reactions');

// A transaction dropped without commit or rollback must not hold the write
// lease forever: roll it back when it is collected.
const abandoned = new FinalizationRegistry(({ native, id, release }) => {
  let out;
  try {
    out = native.unlock(id, false);
  } catch {
    // The storage was closed meanwhile; nothing is held any more.
  }
  // An async native (PostgreSQL) rolls back in the background.
  if (out instanceof Promise) out.then(release, release);
  else release();
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

class NativeTransaction {
  #native;
  #id;
  #release;
  #storage;
  #finished = false;
  #ordered;
  #tail = Promise.resolve();

  /** `driver.native` runs the calls; unordered (async) natives are chained per transaction. */
  constructor(storage, driver, lease) {
    const native = driver.native;
    this.#storage = storage;
    this.#native = native;
    this.#ordered = driver.ordered;
    this.#id = lease.id;
    this.#release = lease.release;
    abandoned.register(this, { native, id: lease.id, release: lease.release }, this);
    // Own, writable methods: hosts and tests wrap or replace them.
    for (const name of METHODS) this[name] = guarded(NativeTransaction.prototype[name], this);
  }

  #end() {
    if (this.#finished) return;
    this.#finished = true;
    abandoned.unregister(this);
    this.#release();
  }

  /** Runs `fn(native, id)` after this transaction's earlier calls; translated errors. */
  #call(fn) {
    if (this.#finished) throw withCode(new Error('transaction already finished'), 'ERR_SYNCULAR_TX_FINISHED');
    if (this.#ordered) {
      try {
        return fn(this.#native, this.#id);
      } catch (err) {
        throw this.#storage._translate(err);
      }
    }
    const run = this.#tail.then(() => fn(this.#native, this.#id));
    this.#tail = run.then(
      () => {},
      () => {},
    );
    return run.catch((err) => Promise.reject(this.#storage._translate(err)));
  }

  async getRow(table, rowId) {
    const r = await this.#call((n, id) => n.txGetRow(id, table, rowId));
    return r === null ? undefined : V.rowFromTuple(r);
  }

  async getTombstoneSeq(table, rowId) {
    return await this.#call((n, id) => n.txGetTombstoneSeq(id, table, rowId)) ?? undefined;
  }

  async clearTombstone(table, rowId) {
    await this.#call((n, id) => n.txClearTombstone(id, table, rowId));
  }

  async getPushResult(clientId, clientCommitId) {
    const text = await this.#call((n, id) => n.txGetPushResult(id, clientId, clientCommitId));
    return this.#storage._pushResultOut(text);
  }

  async scanRows(query) {
    if (!query || typeof query !== 'object') throw invalidArgument('scanRows: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    const rows = await this.#call((n, id) =>
      n.txScanRows(id, query.table, filter, query.afterRowId ?? '', query.limit),
    );
    return V.unpackRows(rows);
  }

  async scanRowsByIndex(query) {
    const q = Q.indexArgs('scanRowsByIndex', query);
    const rows = await this.#call((n, id) => n.txScanRowsByIndex(id, q.table, q.index, q.values, q.afterRowId, q.limit));
    return V.unpackRows(rows);
  }

  /** Bound to this transaction: its connection, its staged writes, no gate. */
  async queryAuthoritative(query) {
    const { request, params } = Q.requestIn(query);
    return await this.#call((n, id) => n.txQueryAuthoritative(id, request, params));
  }

  async lockPartitionForPush() {
    await this.#call((n, id) => n.txLockPartitionForPush(id));
  }

  /** @deprecated alias kept for 0.15.x hosts. */
  async lockPartitionForCommitValidation() {
    await this.#call((n, id) => n.txLockPartitionForPush(id));
  }

  async commitRejectedPushResult(clientId, clientCommitId, result) {
    const json = V.serializePushResult(result);
    try {
      await this.#call((n, id) => n.txCommitRejectedPushResult(id, clientId, clientCommitId, json));
    } finally {
      if (!this.#native.isHeld(this.#id)) this.#end();
    }
  }

  async upsertRow(table, row, context) {
    if (!row || typeof row !== 'object') throw invalidArgument('upsertRow: row must be a StoredRow');
    const scopes = JSON.stringify(row.scopes ?? {});
    await this.#call((n, id) =>
      n.txUpsertRow(
        id,
        table,
        row.rowId,
        row.serverVersion,
        scopes,
        row.payload,
        row.columnVersions ?? undefined,
        context?.opIndex,
      ),
    );
  }

  async deleteRow(table, rowId) {
    await this.#call((n, id) => n.txDeleteRow(id, table, rowId));
  }

  async appendCommit(commit) {
    if (!commit || typeof commit !== 'object' || !Array.isArray(commit.changes)) {
      throw invalidArgument('appendCommit: commit must be a NewCommit with a changes array');
    }
    const [changes, payloads] = V.packChanges(commit.changes);
    return await this.#call((n, id) =>
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

  async putPushResult(clientId, clientCommitId, result) {
    const json = V.serializePushResult(result);
    await this.#call((n, id) => n.txPutPushResult(id, clientId, clientCommitId, json));
  }

  async setBlobRefs(table, rowId, blobIds) {
    if (!Array.isArray(blobIds)) throw invalidArgument('setBlobRefs: blobIds must be an array');
    await this.#call((n, id) => n.txSetBlobRefs(id, table, rowId, blobIds));
  }

  async readServeGate(runningSchemaVersion) {
    return V.gateOut(await this.#call((n, id) => n.txReadServeGate(id, runningSchemaVersion)));
  }

  async advanceCheckpoint(name, ownerEpoch, watermark, observedRows, nowMs) {
    return await this.#call((n, id) => n.txAdvanceCheckpoint(id, name, ownerEpoch, watermark, observedRows, nowMs));
  }

  async enqueueReactions(reactions) {
    if (!Array.isArray(reactions)) throw invalidArgument('enqueueReactions: reactions must be an array');
    const list = reactions.map(R.reactionIn);
    await this.#call((n, id) => n.txEnqueueReactions(id, list));
  }

  async prefetchRows(table, rowIds) {
    if (!Array.isArray(rowIds)) throw invalidArgument('prefetchRows: rowIds must be an array');
    // Only string ids are worth reading; SQLite ignores the list.
    const ids = rowIds.filter((r) => typeof r === 'string');
    await this.#call((n, id) => n.txPrefetchRows(id, table, ids));
  }

  async commit() {
    try {
      await this.#call((n, id) => n.unlock(id, true));
    } finally {
      if (!this.#finished && !this.#native.isHeld(this.#id)) this.#end();
    }
  }

  async rollback() {
    if (this.#finished) return;
    try {
      if (!this.#ordered) await this.#tail;
      await this.#native.unlock(this.#id, false);
    } finally {
      this.#end();
    }
  }
}

module.exports = { NativeTransaction };
