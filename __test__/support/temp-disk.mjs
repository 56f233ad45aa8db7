// How many bytes of disk this process's SQLite temporary files hold now.
// SQLite unlinks a temporary file as it opens it, so the files are seen
// through /proc/self/fd, as links whose target ends in " (deleted)" (Linux
// only; null elsewhere). Counted in allocated blocks, which is what the
// disk loses.
import fs from 'node:fs';

export function tempDiskBytes() {
  let names;
  try {
    names = fs.readdirSync('/proc/self/fd');
  } catch {
    return null;
  }
  let total = 0;
  for (const fd of names) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (!target.endsWith(' (deleted)')) continue;
      total += fs.statSync(`/proc/self/fd/${fd}`).blocks * 512;
    } catch {
      // Closed between the listing and the stat.
    }
  }
  return total;
}

/** Runs `fn`, sampling the temp files' disk every few ms; the peak bytes. */
export async function peakTempDisk(fn, everyMs = 5) {
  let peak = tempDiskBytes() ?? 0;
  const timer = setInterval(() => {
    peak = Math.max(peak, tempDiskBytes() ?? 0);
  }, everyMs);
  try {
    const out = await fn().then(
      (value) => ({ ok: true, value }),
      (error) => ({ ok: false, error }),
    );
    return { ...out, peak: Math.max(peak, tempDiskBytes() ?? 0) };
  } finally {
    clearInterval(timer);
  }
}
