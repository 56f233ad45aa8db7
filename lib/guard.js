'use strict';
// Every rejection a caller sees carries a string `code` (issue 7, hostile
// input). Errors the JS engine raises while the shim or the N-API layer
// reads a hostile argument (a BigInt met by JSON.stringify, a Symbol met
// by a number conversion, a property read on null) have none: they are
// argument errors and get ERR_SYNCULAR_INVALID_ARGUMENT. Errors that
// already carry a code, and the host's own classes, pass unchanged.

const CODE = 'ERR_SYNCULAR_INVALID_ARGUMENT';

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

/** `fn` bound to `self`, with argument errors coded. */
function guarded(fn, self) {
  return function (...args) {
    const out = fn.apply(self, args);
    return out instanceof Promise ? out.catch(coded) : out;
  };
}

/**
 * `fn` bound to `self`, for methods that settle their own promise with
 * coded errors (the transaction's): only a synchronous throw is left to
 * turn into a rejection. No rest parameters and no extra promise per call:
 * this sits on the push path. The methods it wraps take at most six
 * arguments and never read `arguments.length`.
 */
function settled(fn, self) {
  return function (a, b, c, d, e, f) {
    try {
      return fn.call(self, a, b, c, d, e, f);
    } catch (err) {
      return Promise.reject(code(err));
    }
  };
}

module.exports = { guarded, settled, code };
