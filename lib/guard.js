'use strict';
// Every rejection a caller sees carries a string `code` (issue 7, hostile
// input). Errors the JS engine raises while the shim or the N-API layer
// reads a hostile argument (a BigInt met by JSON.stringify, a Symbol met
// by a number conversion, a property read on null) have none: they are
// argument errors and get ERR_SYNCULAR_INVALID_ARGUMENT. Errors that
// already carry a code, and the host's own classes, pass unchanged.

const CODE = 'ERR_SYNCULAR_INVALID_ARGUMENT';

function coded(err) {
  if ((err instanceof TypeError || err instanceof RangeError) && typeof err.code !== 'string') {
    try {
      err.code = CODE;
    } catch {
      // a frozen error: leave it
    }
  }
  throw err;
}

/** `fn` bound to `self`, with argument errors coded. */
function guarded(fn, self) {
  return function (...args) {
    const out = fn.apply(self, args);
    return out instanceof Promise ? out.catch(coded) : out;
  };
}

module.exports = { guarded };
