'use strict';
// Which prebuilt platform package fits a process: napi-rs's platform ids,
// with the C library told apart on Linux (glibc or musl). Pure functions of
// what they are given, so every target's mapping can be tested anywhere.

const BINARY = 'syncular-native-storage';

/** The targets a platform package is built for: napi-rs id → Rust target. */
const TARGETS = {
  'darwin-arm64': 'aarch64-apple-darwin',
  'darwin-x64': 'x86_64-apple-darwin',
  'linux-x64-gnu': 'x86_64-unknown-linux-gnu',
  'linux-x64-musl': 'x86_64-unknown-linux-musl',
  'linux-arm64-gnu': 'aarch64-unknown-linux-gnu',
  'linux-arm64-musl': 'aarch64-unknown-linux-musl',
  'win32-x64-msvc': 'x86_64-pc-windows-msvc',
};

/** 'musl' or 'glibc' from the text of /usr/bin/ldd (a script on glibc, musl's loader on Alpine); undefined when it says neither. */
function libcFromLdd(text) {
  if (typeof text !== 'string' || text === '') return undefined;
  if (text.includes('musl')) return 'musl';
  if (/GLIBC|GNU C Library|GNU libc|glibc/.test(text)) return 'glibc';
  return undefined;
}

/** 'glibc' when a process report names a glibc runtime, 'musl' when it names none. */
function libcFromReport(report) {
  const header = report?.header;
  if (header === undefined || header === null) return undefined;
  return header.glibcVersionRuntime ? 'glibc' : 'musl';
}

/**
 * The C library of a Linux process. `probe` supplies what to look at:
 * `ldd()` (the text of /usr/bin/ldd) is read first, as napi-rs's loader does,
 * then `report()` (process.report.getReport()). Either may throw or answer
 * nothing; with no answer at all, glibc.
 */
function detectLibc(probe) {
  for (const [read, parse] of [
    [probe.ldd, libcFromLdd],
    [probe.report, libcFromReport],
  ]) {
    let found;
    try {
      found = parse(read());
    } catch {
      found = undefined;
    }
    if (found !== undefined) return found;
  }
  return 'glibc';
}

/** napi-rs's platform id (`linux-x64-musl`, `darwin-arm64`, `win32-x64-msvc`, ...). */
function platformId({ platform, arch, libc }) {
  if (platform === 'linux') {
    if (arch === 'arm') return 'linux-arm-gnueabihf';
    return `linux-${arch}-${libc === 'musl' ? 'musl' : 'gnu'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/** `{ id, packageName, supported }` for a process described by platform, arch and (on Linux) libc. */
function platformPackage(proc) {
  const id = platformId(proc);
  return { id, packageName: `${BINARY}-${id}`, supported: Object.hasOwn(TARGETS, id) };
}

/** The real probes of this process (used by lib/native.js). */
const hostProbe = {
  ldd: () => require('node:fs').readFileSync('/usr/bin/ldd', 'utf8'),
  report: () => process.report.getReport(),
};

/** This process's platform package. */
function currentPlatformPackage() {
  const libc = process.platform === 'linux' ? detectLibc(hostProbe) : undefined;
  return platformPackage({ platform: process.platform, arch: process.arch, libc });
}

module.exports = { BINARY, TARGETS, libcFromLdd, libcFromReport, detectLibc, platformId, platformPackage, currentPlatformPackage };
