// The suite on an emulated platform (scripts/test-targets.sh). Two things
// come through the environment, and both are inert when unset:
//
// SYNCULAR_EMULATION: the kinds of emulation in force, comma-separated:
//   qemu          a foreign CPU under qemu-user, 10-50 times slower
//   foreign-libc  a musl Node on a glibc machine: the files of the machine
//                 (/usr/bin/ldd) describe another C library than the process's
//   wine          Windows under Wine: no POSIX tools (sqlite3 shell, npm)
// A test that cannot run under one of them skips itself with
// `skipUnder(kind, reason)`, which names the kind and says why.
//
// SYNCULAR_TEST_TIME_SCALE: a factor (>= 1) for the tests' wall-clock
// budgets, so a slower machine gets more time instead of a skip.

const KINDS = ['qemu', 'foreign-libc', 'wine'];

function kinds(text) {
  if (text === undefined || text.trim() === '') return new Set();
  const list = text.split(',').map((k) => k.trim());
  for (const k of list) {
    if (!KINDS.includes(k)) throw new Error(`SYNCULAR_EMULATION=${JSON.stringify(text)}: unknown kind ${JSON.stringify(k)} (known: ${KINDS.join(', ')})`);
  }
  return new Set(list);
}

function scale(text) {
  if (text === undefined || text.trim() === '') return 1;
  const n = Number(text);
  if (!Number.isFinite(n) || n < 1) throw new Error(`SYNCULAR_TEST_TIME_SCALE=${JSON.stringify(text)}: must be a number >= 1`);
  return n;
}

export const EMULATION = kinds(process.env.SYNCULAR_EMULATION);
export const TIME_SCALE = scale(process.env.SYNCULAR_TEST_TIME_SCALE);

/** A node:test `skip` value: the reason when `kind` is in force, else false. */
export function skipUnder(kind, reason) {
  if (!KINDS.includes(kind)) throw new Error(`skipUnder: unknown kind ${JSON.stringify(kind)}`);
  return EMULATION.has(kind) ? `under emulation (${kind}): ${reason}` : false;
}
