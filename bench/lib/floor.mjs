// The host's own cost: a storage that answers every call from memory.
//
// A window pull or a bootstrap request runs upstream's handler around a
// handful of storage calls; how much faster any storage can make it is
// bounded by what the handler costs with storage calls that cost nothing.
// `replaying(storage)` wraps a real storage: while recording, every call
// goes through and its answer is kept in call order; while replaying, the
// i-th call is answered with the i-th recorded answer, already settled,
// without touching the storage. The benchmark's requests are the same on
// every pass (fixed cursors, a table that does not change), so the handler
// makes the same calls in the same order; a call whose member differs from
// the recorded one fails the figure rather than measuring something else.

const PASS = 'pass';
const RECORD = 'record';
const REPLAY = 'replay';

export function replaying(storage, { only } = {}) {
  const answers = [];
  let mode = PASS;
  let at = 0;

  function call(target, fn, name, args) {
    // With `only` (a Set of member names), every other member always
    // reaches the real storage: the floor of those members alone.
    if (only !== undefined && !only.has(name)) return fn.apply(target, args);
    if (mode === REPLAY) {
      const slot = answers[at++ % answers.length];
      if (slot.name !== name) throw new Error(`floor: call ${at} is ${name}, the recorded pass made ${slot.name} there`);
      return slot.failed ? Promise.reject(slot.value) : Promise.resolve(slot.value);
    }
    const out = fn.apply(target, args);
    if (mode === PASS) return out;
    // Kept in call order (the handler may start calls before the earlier
    // ones settle); filled in when the answer comes.
    const slot = { name, value: undefined, failed: false };
    answers.push(slot);
    return Promise.resolve(out).then(
      (value) => {
        slot.value = value;
        return value;
      },
      (err) => {
        slot.value = err;
        slot.failed = true;
        throw err;
      },
    );
  }

  const wrap = (object, prefix) =>
    new Proxy(object, {
      get(target, key) {
        const v = Reflect.get(target, key);
        if (typeof v !== 'function') return v;
        const name = prefix + String(key);
        if (key === 'begin') {
          return (...args) => Promise.resolve(call(target, v, name, args)).then((tx) => wrap(tx, 'tx.'));
        }
        return (...args) => call(target, v, name, args);
      },
    });

  return {
    storage: wrap(storage, ''),
    /** Calls go through, nothing is kept (filling the database). */
    pass() {
      mode = PASS;
    },
    /** Calls go through and their answers are kept, replacing earlier ones. */
    record() {
      mode = RECORD;
      answers.length = 0;
    },
    /** Calls are answered from the recording, from its first answer. */
    replay() {
      if (answers.length === 0) throw new Error('floor: nothing recorded');
      mode = REPLAY;
      at = 0;
    },
  };
}

/**
 * `n` replaying storages over one real storage, one for each of `n`
 * concurrent clients: while recording, the clients' calls all reach the
 * real storage (interleaved as the storage answers them); each wrapper
 * keeps its own client's answers in that client's call order, and replays
 * them to that client alone. One client's requests run in sequence, so
 * the calls of its wrapper come in the same order every pass, whatever
 * order the clients' calls interleave in.
 */
export function replayingEach(storage, n) {
  const each = Array.from({ length: n }, () => replaying(storage));
  return {
    storages: each.map((r) => r.storage),
    pass: () => each.forEach((r) => r.pass()),
    record: () => each.forEach((r) => r.record()),
    replay: () => each.forEach((r) => r.replay()),
  };
}
