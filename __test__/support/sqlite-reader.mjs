// Another process reading a SQLite file in a loop, as an operator's tool or
// a second host would while this package opens it (issue 48: readers of the
// file must not be refused while the first ensureSchema repairs the
// layout). The sqlite3 shell with a busy timeout of its own; each read is
// one short statement answered before the next is sent. The shell times
// each statement itself (`.timer on`), so a wait for a lock shows as the
// time that read took, whatever this process was doing meanwhile.
import { spawn } from 'node:child_process';

/**
 * Starts reading `path` over and over with `.timeout busyMs`. `stop()`
 * resolves with `{ reads, errors: [messages], worstMs, p99Ms, waitsOver(ms), slow }`.
 */
export function startReader(path, { busyMs = 5000, sql = 'SELECT max(commit_seq) FROM sync_commits WHERE partition = (SELECT min(partition) FROM sync_partitions)' } = {}) {
  const child = spawn('sqlite3', [path], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  const errors = [];
  const times = [];
  const slow = [];
  let out = '';
  let stopping = false;
  let waiting;
  let i = 0;
  child.stderr.on('data', (d) => {
    for (const line of d.split('\n')) if (line.trim() !== '') errors.push(line.trim());
  });
  child.stdout.on('data', (d) => {
    out += d;
    const marker = `done${i}\n`;
    const at = out.indexOf(marker);
    if (at < 0) return;
    // The read's own line ("Run Time: real 0.001 user ... sys ...") is the
    // last one before the marker (a failed read prints none).
    const before = out.slice(0, at);
    const real = [...before.matchAll(/Run Time: real ([0-9.]+)/g)].at(-1);
    const ended = [...before.matchAll(/^at (\d+)\|/gm)].at(-1);
    if (real) {
      times.push(Number(real[1]) * 1000);
      if (ended && Number(real[1]) * 1000 > 50) slow.push({ endedAt: Number(ended[1]), ms: Number(real[1]) * 1000 });
    }
    out = out.slice(at + marker.length);
    next();
  });
  const finished = new Promise((resolve) => child.on('close', resolve));
  child.stdin.on('error', () => {});
  function next() {
    if (stopping) {
      child.stdin.end();
      waiting?.();
      return;
    }
    i += 1;
    // The read, with the wall-clock time (ms) it ended at.
    child.stdin.write(`SELECT 'at ' || CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), (${sql});\nSELECT 'done${i}';\n`);
  }
  child.stdin.write(`.timeout ${busyMs}\n.timer on\n`);
  next();
  return {
    async stop() {
      stopping = true;
      await new Promise((resolve) => {
        waiting = resolve;
        setTimeout(resolve, busyMs + 1000);
      });
      child.stdin.end();
      await finished;
      const sorted = [...times].sort((a, b) => a - b);
      return {
        reads: times.length,
        errors,
        worstMs: sorted.at(-1) ?? 0,
        p99Ms: sorted[Math.floor(sorted.length * 0.99)] ?? 0,
        waitsOver: (ms) => times.filter((t) => t > ms).length,
        /** Reads that took over 50 ms: `{ endedAt: Date.now() then, ms }`. */
        slow,
      };
    },
  };
}
