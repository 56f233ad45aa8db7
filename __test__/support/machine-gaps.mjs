// What another process on the machine saw while a test held its event-loop
// bound: a child Node process turning a 5 ms timer of its own, and listing
// the gaps between its turns. A gap the test's loop shows at a moment the
// child's loop was held too was the machine's (a descheduled virtual CPU,
// a host under load), not work of this package on the JS thread: the
// child shares nothing with the test's process but the machine.
//
// Against this package's own stalls the check loses nothing it is meant to
// catch: a lock, a system call or CPU work on the test's JS thread holds
// that thread alone, and the child keeps turning. What both loops show is
// the CPU taken from every process at once (by anything, this package's
// worker threads among them) or the virtual CPU not running at all.
import { spawn } from 'node:child_process';
import { withLoopGap } from '../../bench/lib/loop-gap.mjs';

const CHILD = `
let last = performance.now();
setInterval(() => {
  const now = performance.now();
  if (now - last >= 20) process.stdout.write(JSON.stringify({ from: performance.timeOrigin + last, ms: now - last }) + '\\n');
  last = now;
}, 5);
process.stdin.on('data', () => process.exit(0));
process.stdin.on('end', () => process.exit(0));
console.log('ready');
`;

/**
 * Starts the child; resolves once it runs. `stop()` resolves
 * with its gaps of 20 ms or more, `{ from, ms }` on the wall clock (ms).
 */
export async function watchMachine() {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdout.setEncoding('utf8');
  let out = '';
  await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('ready\n')) resolve();
    });
  });
  const closed = new Promise((resolve) => child.once('close', resolve));
  let stopped;
  return {
    /** Stops the child (once; later calls answer the same). */
    stop() {
      stopped ??= (async () => {
        child.stdin.end('x');
        await closed;
        return out
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l));
      })();
      return stopped;
    },
  };
}

/**
 * The longest part of one of `own` gaps that no gap of `machine` covers
 * (ms): what the test's own loop was held beyond the machine's stalls.
 */
export function unexplainedMs(own, machine) {
  let worst = 0;
  for (const g of own) {
    const [a, b] = [g.from, g.from + g.ms];
    // The covered part: the union of the machine's gaps within [a, b].
    const parts = machine
      .map((m) => [Math.max(a, m.from), Math.min(b, m.from + m.ms)])
      .filter(([x, y]) => y > x)
      .sort((p, q) => p[0] - q[0]);
    let covered = 0;
    let reach = a;
    for (const [x, y] of parts) {
      if (y <= reach) continue;
      covered += y - Math.max(x, reach);
      reach = y;
    }
    worst = Math.max(worst, g.ms - covered);
  }
  return worst;
}

/**
 * `withLoopGap(fn)` with the child watching beside it: its answer plus
 * `machineGaps` (the child's) and `own`, the longest part of a gap of this
 * loop the child's loop kept turning through (ms).
 */
export async function withOwnLoopGap(fn) {
  const machine = await watchMachine();
  try {
    const out = await withLoopGap(fn);
    const machineGaps = await machine.stop();
    return { ...out, machineGaps, own: unexplainedMs(out.gaps, machineGaps) };
  } finally {
    await machine.stop();
  }
}
