'use strict';
// What a SQLite transaction's prefetchRows learned, so the push that
// follows asks for each row and tombstone without a native call. The
// transaction holds the database's only write lock, so an answer stays
// current until this transaction writes; every write below forgets what it
// may change. A row answer is handed out once (the host owns the object it
// gets); tombstone answers are numbers and stay.

const MISS = Symbol('miss');

class RowCache {
  #tables = new Map(); // table → Map(rowId → { row, rowKnown, tomb, tombKnown })

  /** Records `V.unpackPrefetched` entries of `table`. */
  fill(table, entries) {
    let rows = this.#tables.get(table);
    if (rows === undefined) this.#tables.set(table, (rows = new Map()));
    for (const e of entries) {
      rows.set(e.rowId, { row: e.row, rowKnown: true, tomb: e.tomb, tombKnown: e.tombKnown });
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
    return e !== undefined && e.tombKnown && e.tomb === undefined;
  }

  tombCleared(table, rowId) {
    const e = this.#entry(table, rowId);
    if (e !== undefined) {
      e.tomb = undefined;
      e.tombKnown = true;
    }
  }

  forgetRow(table, rowId) {
    const e = this.#entry(table, rowId);
    if (e !== undefined) {
      e.rowKnown = false;
      e.row = undefined;
    }
  }

  clear() {
    if (this.#tables.size !== 0) this.#tables.clear();
  }
}

module.exports = { RowCache, MISS };
