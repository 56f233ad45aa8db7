'use strict';
// Every rejection a caller sees carries a string `code` (issue 7, hostile
// input). Errors the JS engine raises while the shim or the N-API layer
// reads a hostile argument (a BigInt met by JSON.stringify, a Symbol met
// by a number conversion, a property read on null) have none: they are
// argument errors and get ERR_SYNCULAR_INVALID_ARGUMENT. Errors that
// already carry a code, and the host's own classes, pass unchanged.

const CODE = 'ERR_SYNCULAR_INVALID_ARGUMENT';

/**
 * See settled(): the counter of the settled member running now, for the
 * code that settles its promise (takeCurrent). One slot for the module,
 * not a property of each storage and transaction: a symbol-keyed property
 * read and written on objects of many shapes made V8's keyed access
 * megamorphic, about 1% of a push's instructions.
 */
let current;

/** The running settled member's counter, once (later reads get undefined). */
function takeCurrent() {
  const counter = current;
  current = undefined;
  return counter;
}

// Strings cross into native code as UTF-8, where a lone UTF-16 surrogate
// becomes U+FFFD: '\uD800' and '\uFFFD' would name the same partition or
// row. Every string argument, and every string inside an argument's
// arrays, plain objects, Maps and Sets, must be well formed. Bytes
// (payloads) are not text and are skipped.
const DEPTH = 8;

function malformed(v, depth) {
  if (typeof v === 'string') return !v.isWellFormed();
  if (v === null || typeof v !== 'object' || depth === 0 || ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (malformed(v[i], depth - 1)) return true;
    return false;
  }
  if (v instanceof Map) {
    for (const [k, x] of v) if (malformed(k, depth - 1) || malformed(x, depth - 1)) return true;
    return false;
  }
  if (v instanceof Set) {
    for (const x of v) if (malformed(x, depth - 1)) return true;
    return false;
  }
  for (const k in v) {
    if (!k.isWellFormed() || malformed(v[k], depth - 1)) return true;
  }
  return false;
}

function surrogateError() {
  const err = new TypeError('invalid argument: a string holds a lone UTF-16 surrogate; keys and values must be well-formed Unicode');
  err.code = CODE;
  return err;
}

/**
 * Throws the coded TypeError when any argument holds a lone surrogate.
 * Arguments left out are skipped without a call: the settled members pass
 * six, and a push's calls use two or three. (Checking strings inline here
 * and in malformed's loops as well cost Node 24 more instructions a push,
 * 483k to 498k against 475k: not kept.)
 */
function checkText(a, b, c, d, e, f) {
  if (
    (a !== undefined && malformed(a, DEPTH)) ||
    (b !== undefined && malformed(b, DEPTH)) ||
    (c !== undefined && malformed(c, DEPTH)) ||
    (d !== undefined && malformed(d, DEPTH)) ||
    (e !== undefined && malformed(e, DEPTH)) ||
    (f !== undefined && malformed(f, DEPTH))
  ) {
    throw surrogateError();
  }
}

/** `err`, with the argument-error code added where it has none. */
function code(err) {
  if ((err instanceof TypeError || err instanceof RangeError) && typeof err.code !== 'string') {
    try {
      err.code = CODE;
    } catch {
      // a frozen error: leave it
    }
  }
  return err;
}

function coded(err) {
  throw code(err);
}

function partitionError(member) {
  const err = new TypeError(`${member}: partition must be a string`);
  err.code = CODE;
  return err;
}

/** What every member of a closed storage answers (README "Shutdown"). */
function closedError(member) {
  const err = new Error(`${member}: storage is closed`);
  err.code = 'ERR_SYNCULAR_CLOSED';
  return err;
}

/**
 * `fn` bound to `self`, with argument errors coded. With `partition`, the
 * first argument is a partition: anything but a string is refused, never
 * passed on for the engine to interpret. Once `gate.closed`, every call is
 * refused with ERR_SYNCULAR_CLOSED before anything runs.
 */
function guarded(fn, self, member, partition, gate, counter) {
  const failed = (err) => {
    counter.errors++;
    throw code(err);
  };
  const refuse = (err) => {
    counter.errors++;
    return Promise.reject(err);
  };
  return function (...args) {
    counter.calls++;
    if (gate.closed) return refuse(closedError(member));
    if (partition && typeof args[0] !== 'string') return refuse(partitionError(member));
    try {
      for (let i = 0; i < args.length; i++) {
        if (malformed(args[i], DEPTH)) return refuse(surrogateError());
      }
    } catch (err) {
      // a getter of the argument threw while it was checked
      return refuse(code(err));
    }
    let out;
    try {
      out = fn.apply(self, args);
    } catch (err) {
      counter.errors++;
      throw err;
    }
    return out instanceof Promise ? out.catch(failed) : out;
  };
}

/**
 * `fn` bound to `self`, for methods that settle their own promise with
 * coded errors (the transaction's): only a synchronous throw is left to
 * turn into a rejection. No rest parameters and no extra promise per call:
 * this sits on the push path. The methods it wraps take at most six
 * arguments and never read `arguments.length`. `counter` counts the call;
 * takeCurrent() hands it to the code that settles the promise, which
 * counts a failure there (see ops.js). With `note`, `note.last` names the
 * member called last (a transaction's handle: the warning about one left
 * open says where it stopped).
 */
function settled(fn, self, member, partition, gate, counter, note) {
  return function (a, b, c, d, e, f) {
    counter.calls++;
    if (note !== undefined) note.last = member;
    if (gate !== undefined && gate.closed) {
      counter.errors++;
      return Promise.reject(closedError(member));
    }
    if (partition && typeof a !== 'string') {
      counter.errors++;
      return Promise.reject(partitionError(member));
    }
    return invoke(fn, self, counter, a, b, c, d, e, f);
  };
}

/** Runs a settled member with its counter in the slot (see takeCurrent). */
function invoke(fn, self, counter, a, b, c, d, e, f) {
  try {
    checkText(a, b, c, d, e, f);
    current = counter;
    return fn.call(self, a, b, c, d, e, f);
  } catch (err) {
    counter.errors++;
    return Promise.reject(code(err));
  } finally {
    // Not taken (a member that settled without it): never another's.
    current = undefined;
  }
}

/**
 * A transaction's member `fn` called on `self` (transaction.js makes the
 * 21 bound members, each a call of this): counted, noted on the
 * transaction's handle `note`, then run as settled() runs its member.
 */
function enterTx(fn, self, counter, note, a, b, c, d, e, f) {
  counter.calls++;
  note.last = counter.member;
  return invoke(fn, self, counter, a, b, c, d, e, f);
}

module.exports = { guarded, settled, enterTx, code, checkText, closedError, takeCurrent };
