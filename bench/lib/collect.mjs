// A full garbage collection, run between two storages' rounds
// (`alternate.mjs --collect`) so that no round pays for the garbage the
// round before it left: in the alternation each storage always follows
// the same other one (bench/README.md, "How steady a share is"). Under bun
// `Bun.gc(true)`; under Node the `gc` function that `--expose-gc` names,
// switched on here at run time.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gc;
if (globalThis.Bun !== undefined) gc = () => globalThis.Bun.gc(true);
else if (typeof globalThis.gc === 'function') gc = globalThis.gc;
else {
  setFlagsFromString('--expose-gc');
  gc = runInNewContext('gc');
}

/** Collects all garbage now. */
export function collectGarbage() {
  gc();
}
