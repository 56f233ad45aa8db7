'use strict';
// What a transaction's prefetchRows learned, so the push that follows
// asks for each row and tombstone without a native call. An answer stays
// current until this transaction writes (the engine holds the write lock
// or the partition lock, or else marks the answers not `stable`); every
// write below forgets what it may change and bumps `version`, so answers
// still in flight when a write was submitted are dropped. A row answer is
// handed out once (the host owns the object it gets); tombstone answers
// are numbers and stay. Skipping a tombstone delete needs a stable answer.

const MISS = Symbol('miss');

class RowCache {
  #tables = new Map(); // table → Map(rowId → { row, rowKnown, tomb, tombKnown, stable })
  version = 0;

  /** Records `V.unpackPrefetched` entries of `table`. */
  fill(table, entries, stable) {
    let rows = this.#tables.get(table);
    if (rows === undefined) this.#tables.set(table, (rows = new Map()));
    for (const e of entries) {
      rows.set(e.rowId, { row: e.row, rowKnown: true, tomb: e.tomb, tombKnown: e.tombKnown, stable });
    }
  }

  #entry(table, rowId) {
    return this.#tables.size === 0 ? undefined : this.#tables.get(table)?.get(rowId);
  }

  /** The stored row (or undefined), or MISS when unknown. */
  takeRow(table, rowId) {
    const e = this.#entry(table, rowId);
    if (e === undefined || !e.rowKnown) return MISS;
    e.rowKnown = false;
    const row = e.row;
    e.row = undefined;
    return row;
  }

  /** The tombstone's commitSeq (or undefined), or MISS when unknown. */
  tomb(table, rowId) {
    const e = this.#entry(table, rowId);
    return e === undefined || !e.tombKnown ? MISS : e.tomb;
  }

  /** True when the row is known to have no tombstone. */
  knownNoTomb(table, rowId) {
    const e = this.#entry(table, rowId);
    return e !== undefined && e.stable && e.tombKnown && e.tomb === undefined;
  }

  tombCleared(table, rowId) {
    this.version++;
    const e = this.#entry(table, rowId);
    if (e !== undefined) {
      e.tomb = undefined;
      e.tombKnown = true;
    }
  }

  forgetRow(table, rowId) {
    this.version++;
    const e = this.#entry(table, rowId);
    if (e !== undefined) {
      e.rowKnown = false;
      e.row = undefined;
    }
  }

  clear() {
    this.version++;
    if (this.#tables.size !== 0) this.#tables.clear();
  }
}

module.exports = { RowCache, MISS };
