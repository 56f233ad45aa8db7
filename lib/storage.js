'use strict';
// NativeStorage: the ServerStorage the host sees. A plain, extensible
// object whose members are own, writable functions bound to it, so hosts
// and tests can wrap it in a Proxy or replace `begin`. Writes queue on the
// engine's write lease in submission order; reads run at once against
// committed state, after any write submitted before them.

const native = require('./native');
const { resolveErrorClasses, translate, invalidArgument } = require('./errors');
const { LeaseQueue } = require('./lease-queue');
const { NativeTransaction } = require('./transaction');
const V = require('./values');

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
  'readServeGate',
  'readCheckpoints',
  'writerFenceAllows',
  'getClientRecord',
  'putClientRecord',
  'listClientCursors',
  'advanceClientCursor',
  'updateClientCursor',
  'getActiveClientCursorFloor',
  'close',
];

function sqliteUrl(options) {
  const url = options.url ?? options.path ?? options.filename;
  if (url === undefined || url === null) return undefined;
  if (typeof url !== 'string') throw invalidArgument('NativeStorage: url must be a string');
  return url;
}

class NativeStorage {
  #native;
  #queue;
  #errors;
  #ensuredVersion;

  constructor(options = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('NativeStorage: options must be an object');
    const url = sqliteUrl(options);
    if (url !== undefined && /^postgres(ql)?:/i.test(url)) {
      throw invalidArgument('NativeStorage: PostgreSQL is not available in this build yet');
    }
    this.#errors = resolveErrorClasses(options.errors);
    this.#native = new native.SqliteHandle(url, options.synchronous, options.busyTimeoutMs);
    this.#queue = new LeaseQueue(this.#native);
    for (const name of METHODS) this[name] = NativeStorage.prototype[name].bind(this);
  }

  // ---- internals shared with transactions ------------------------------------

  _translate(err) {
    return translate(err, this.#errors);
  }

  _pushResultOut(text) {
    if (text === null || text === undefined) return undefined;
    const parsed = V.parsePushResult(text);
    if (parsed === undefined) {
      throw new this.#errors.SyncError('sync.idempotency_cache_miss', 'persisted push result unreadable (§6.3)');
    }
    return parsed;
  }

  #sync(fn) {
    try {
      return fn(this.#native);
    } catch (err) {
      throw this._translate(err);
    }
  }

  /** A read, ordered after writes submitted before it. */
  #read(fn) {
    if (this.#queue.writesPending) return this.#queue.writesDone.then(() => this.#sync(fn));
    return this.#sync(fn);
  }

  async #readAsync(fn) {
    if (this.#queue.writesPending) await this.#queue.writesDone;
    try {
      return await fn(this.#native);
    } catch (err) {
      throw this._translate(err);
    }
  }

  #write(fn) {
    try {
      const out = this.#queue.run((id) => fn(this.#native, id));
      return out instanceof Promise ? out.catch((err) => Promise.reject(this._translate(err))) : out;
    } catch (err) {
      throw this._translate(err);
    }
  }

  // ---- schema ----------------------------------------------------------------

  async ensureSchema(schema, checkpoints) {
    if (this.#ensuredVersion !== undefined && this.#ensuredVersion === schema?.version) return;
    const json = V.flattenSchema(schema);
    const declarations = V.declarationsOf(checkpoints);
    await this.#write((n, id) => n.ensureSchema(id, json, declarations, Date.now()));
    this.#ensuredVersion = schema.version;
  }

  // ---- partitions --------------------------------------------------------------

  async touchPartition(partition, authenticatedAtMs, initialLogEpoch) {
    return this.#write((n, id) => n.touchPartition(id, partition, authenticatedAtMs, initialLogEpoch));
  }

  async rotatePartitionLogEpoch(partition, logEpoch, authenticatedAtMs) {
    return this.#write((n, id) => n.rotatePartitionLogEpoch(id, partition, logEpoch, authenticatedAtMs));
  }

  async listPartitionRegistry() {
    return this.#read((n) => n.listPartitionRegistry());
  }

  async getPartitionLogEpoch(partition) {
    return (await this.#read((n) => n.getPartitionLogEpoch(partition))) ?? undefined;
  }

  async listPartitions() {
    return (await this.listPartitionRegistry()).map((e) => e.partition);
  }

  // ---- transactions --------------------------------------------------------------

  async begin(partition) {
    if (typeof partition !== 'string') throw invalidArgument('begin: partition must be a string');
    let lease;
    try {
      lease = await this.#queue.acquire(partition);
    } catch (err) {
      throw this._translate(err);
    }
    return new NativeTransaction(this, this.#native, lease);
  }

  // ---- the log --------------------------------------------------------------------

  async getMaxCommitSeq(partition) {
    return this.#read((n) => n.getMaxCommitSeq(partition));
  }

  async getHorizonSeq(partition) {
    return this.#read((n) => n.getHorizonSeq(partition));
  }

  async setHorizonSeq(partition, seq) {
    await this.#write((n, id) => n.setHorizonSeq(id, partition, seq));
  }

  async pruneCommitsThrough(partition, query) {
    if (typeof query === 'number') {
      const r = await this.#write((n, id) => n.pruneCommitsThrough(id, partition, query, undefined));
      return r.removedCommits;
    }
    const ok =
      query !== null &&
      typeof query === 'object' &&
      Number.isSafeInteger(query.throughSeq) &&
      query.throughSeq >= 0 &&
      typeof query.logEpoch === 'string' &&
      query.logEpoch.length > 0;
    if (!ok) throw new this.#errors.StorageQueryError('sync.storage.invalid_prune_cursor');
    return this.#write((n, id) => n.pruneCommitsThrough(id, partition, query.throughSeq, query.logEpoch));
  }

  async getCommitSeqBefore(partition, createdBeforeMs) {
    return this.#read((n) => n.getCommitSeqBefore(partition, createdBeforeMs));
  }

  // ---- reads -----------------------------------------------------------------------

  async getRow(partition, table, rowId) {
    const r = await this.#read((n) => n.getRow(partition, table, rowId));
    return r === null ? undefined : V.rowOut(r);
  }

  async getPushResult(partition, clientId, clientCommitId) {
    const text = await this.#read((n) => n.getPushResult(partition, clientId, clientCommitId));
    return this._pushResultOut(text);
  }

  async readCommitWindow(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('readCommitWindow: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    const commits = await this.#readAsync((n) =>
      n.readCommitWindow(partition, query.table, filter, query.afterSeq, query.throughSeq, query.limitChanges),
    );
    return commits.map(V.commitOut);
  }

  async latestScopedChangeSeq(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('latestScopedChangeSeq: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    return this.#read((n) => n.latestScopedChangeSeq(partition, query.table, filter));
  }

  async scanRows(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('scanRows: query must be an object');
    const filter = V.filterJson(query.scopeFilter);
    const rows = await this.#readAsync((n) =>
      n.scanRows(partition, query.table, filter, query.afterRowId ?? '', query.limit),
    );
    return V.rowsOut(rows);
  }

  async readServeGate(partition, runningSchemaVersion) {
    return V.gateOut(await this.#read((n) => n.readServeGate(partition, runningSchemaVersion)));
  }

  async readCheckpoints(partition) {
    return this.#read((n) => n.readCheckpoints(partition));
  }

  async writerFenceAllows(partition, writerVersion) {
    return this.#read((n) => n.writerFenceAllows(partition, writerVersion));
  }

  // ---- clients ------------------------------------------------------------------------

  async getClientRecord(partition, clientId) {
    const c = await this.#read((n) => n.getClientRecord(partition, clientId));
    return c === null ? undefined : V.clientOut(c);
  }

  async putClientRecord(partition, record) {
    if (!record || typeof record !== 'object') throw invalidArgument('putClientRecord: record must be a ClientRecord');
    if (record.subscriptions !== undefined && !Array.isArray(record.subscriptions)) {
      throw invalidArgument('putClientRecord: subscriptions must be an array');
    }
    const subscriptions = JSON.stringify(record.subscriptions ?? []);
    await this.#write((n, id) =>
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
    );
  }

  async listClientCursors(partition) {
    return this.#read((n) => n.listClientCursors(partition));
  }

  async advanceClientCursor(partition, clientId, actorId, logEpoch, cursor, updatedAtMs) {
    if (typeof actorId !== 'string' || typeof logEpoch !== 'string') {
      throw invalidArgument('advanceClientCursor: actorId and logEpoch must be strings');
    }
    await this.#write((n, id) => n.advanceClientCursor(id, partition, clientId, actorId, logEpoch, cursor, updatedAtMs));
  }

  async updateClientCursor(partition, clientId, cursor, updatedAtMs) {
    await this.#write((n, id) => n.advanceClientCursor(id, partition, clientId, undefined, undefined, cursor, updatedAtMs));
  }

  async getActiveClientCursorFloor(partition, cutoffMs) {
    return this.#read((n) => n.getActiveClientCursorFloor(partition, cutoffMs));
  }

  async close() {
    this.#native.close();
  }
}

module.exports = { NativeStorage };
