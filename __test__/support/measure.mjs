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

// Time the hypervisor took from this machine's CPUs (the `steal` column of
// /proc/stat, per CPU, in ms), and the CPU this thread last ran on, or
// undefined where the kernel does not say. In a VM the host may stop a
// virtual CPU for tens of ms while the thread on it is "running": that is
// not a stall of ours either.
const TICK_MS = 10; // USER_HZ is 100 on Linux
function stealMs() {
  try {
    const out = [];
    for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
      const m = /^cpu(\d+) /.exec(line);
      if (m) out[Number(m[1])] = Number(line.trim().split(/\s+/)[8]) * TICK_MS;
    }
    return out.length > 0 && out.every(Number.isFinite) ? out : undefined;
  } catch {
    return undefined;
  }
}
function lastCpu() {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    const n = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[36]);
    return Number.isInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}
// The steal between two readings that this thread may have suffered: its
// CPU's, when it ran on the same CPU at both ends, else the least of any.
function stolen(before, after, cpuBefore, cpuAfter) {
  if (before === undefined || after === undefined) return 0;
  const deltas = after.map((v, i) => Math.max(0, v - (before[i] ?? v)));
  if (cpuBefore !== undefined && cpuBefore === cpuAfter && deltas[cpuAfter] !== undefined) return deltas[cpuAfter];
  return Math.min(...deltas);
}

/**
 * Settles `fn()` while sampling the event loop (a 5 ms ticker) and RSS: { ok, value | error, ms, stall, rss }.
 * `stall` is the longest gap between two ticks, less the time the thread
 * waited in the kernel's run queue during that gap, and less the time the
 * hypervisor stole from its CPU (to the 10 ms the kernel counts it in).
 */
export async function measured(fn) {
  let last = performance.now();
  let queued = runqueueMs();
  let steal = stealMs();
  let cpu = lastCpu();
  let stall = 0;
  const rss0 = process.memoryUsage.rss();
  let rss = rss0;
  const gap = () => {
    const now = performance.now();
    const q = runqueueMs();
    const s = stealMs();
    const c = lastCpu();
    const waited = (q !== undefined && queued !== undefined ? Math.max(0, q - queued) : 0) + stolen(steal, s, cpu, c);
    stall = Math.max(stall, now - last - waited);
    last = now;
    queued = q;
    steal = s;
    cpu = c;
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
