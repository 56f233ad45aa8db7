// A call measured as the bounds tests and the attack generator measure it.
import { readFileSync } from 'node:fs';

// The JS thread's time spent waiting for a CPU it was ready to use, in ms
// (Linux: the second field of /proc/thread-self/schedstat, in ns), or
// undefined where the kernel does not say. On a loaded machine (CI runs
// test files side by side on two cores) a ticker is late because the
// thread was not scheduled, not because anything held it: that time is
// not a stall. Time spent running, or asleep on a lock, still counts.
const SCHEDSTAT = '/proc/thread-self/schedstat';
function runqueueMs() {
  try {
    const fields = readFileSync(SCHEDSTAT, 'utf8').trim().split(/\s+/);
    const ns = Number(fields[1]);
    return Number.isFinite(ns) ? ns / 1e6 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Settles `fn()` while sampling the event loop (a 5 ms ticker) and RSS: { ok, value | error, ms, stall, rss }.
 * `stall` is the longest gap between two ticks, less the time the thread
 * waited in the kernel's run queue during that gap.
 */
export async function measured(fn) {
  let last = performance.now();
  let queued = runqueueMs();
  let stall = 0;
  const rss0 = process.memoryUsage.rss();
  let rss = rss0;
  const gap = () => {
    const now = performance.now();
    const q = runqueueMs();
    const waited = q !== undefined && queued !== undefined ? Math.max(0, q - queued) : 0;
    stall = Math.max(stall, now - last - waited);
    last = now;
    queued = q;
  };
  const ticker = setInterval(() => {
    gap();
    rss = Math.max(rss, process.memoryUsage.rss());
  }, 5);
  const t0 = performance.now();
  let out;
  try {
    out = { ok: true, value: await fn() };
  } catch (error) {
    out = { ok: false, error };
  }
  const end = performance.now();
  gap();
  clearInterval(ticker);
  rss = Math.max(rss, process.memoryUsage.rss());
  return { ...out, ms: end - t0, stall, rss: rss - rss0 };
}
