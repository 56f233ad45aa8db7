// How many bytes of disk this process's SQLite temporary files hold now.
// SQLite unlinks a temporary file as it opens it, so the files are seen
// through /proc/self/fd, as links whose target ends in " (deleted)" (Linux
// only; null elsewhere), and without a name of their own: a file opened
// with O_TMPFILE shows as "#" and its inode number (what SQLite's files
// show here), one SQLite named and unlinked as "etilqs_" and random
// letters. Any other deleted file the process still holds (a database
// file a test removed while a connection to it was still open, say) is
// not a temporary file and is not counted. Counted in allocated blocks,
// which is what the disk loses.
import fs from 'node:fs';

const TEMP_FILE = /\/(#\d+|etilqs_[^/]*) \(deleted\)$/;

export function tempDiskBytes() {
  const files = tempFiles();
  return files === null ? null : files.reduce((n, f) => n + f.bytes, 0);
}

/** The temporary files counted: `{ fd, target, bytes }` each (null off Linux). */
export function tempFiles() {
  let names;
  try {
    names = fs.readdirSync('/proc/self/fd');
  } catch {
    return null;
  }
  const out = [];
  for (const fd of names) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (!TEMP_FILE.test(target)) continue;
      out.push({ fd: Number(fd), target, bytes: fs.statSync(`/proc/self/fd/${fd}`).blocks * 512 });
    } catch {
      // Closed between the listing and the stat.
    }
  }
  return out;
}

/** What an assertion that no temporary file is held prints: each file, or nothing. */
export function describeTempFiles() {
  const files = tempFiles() ?? [];
  return files.map((f) => `fd ${f.fd} -> ${f.target}: ${f.bytes} bytes`).join('; ');
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
