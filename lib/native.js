'use strict';
// Loads the compiled addon. A published install gets it from the platform
// package npm picked through optionalDependencies (no compiler needed); a
// clone gets it from native/, where `npm install` / `npm run build` put the
// addon built from source. A local build goes first: only a clone has one
// (the tarball ships no native/), and a clone that built from source must
// run what it built, never a same-named package fetched from the registry.

const path = require('node:path');

const BINARY = 'syncular-native-storage';

function isMusl() {
  // glibc reports its runtime version in the process report; musl does not.
  try {
    return !process.report.getReport().header.glibcVersionRuntime;
  } catch {
    return false;
  }
}

/** napi-rs's platform id for this process (`linux-x64-gnu`, `darwin-arm64`, ...). */
function platformId() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    if (arch === 'arm') return 'linux-arm-gnueabihf';
    return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function firstLine(err) {
  return String(err?.message ?? err).split('\n')[0];
}

function load() {
  const id = platformId();
  const candidates = [
    { label: 'local build', request: path.join(__dirname, '..', 'native', `${BINARY}.node`) },
    { label: `platform package ${BINARY}-${id}`, request: `${BINARY}-${id}` },
  ];
  const tried = [];
  for (const c of candidates) {
    try {
      return require(c.request);
    } catch (err) {
      tried.push({ ...c, err });
    }
  }
  const lines = tried.map((t) => `  - ${t.label} (${t.request}): ${firstLine(t.err)}`);
  const hint = new Error(
    `syncular-native-storage: no loadable native addon for ${id} (node ${process.version}). Tried:\n${lines.join('\n')}\n` +
      `A published install takes the binary from the optional dependency ${BINARY}-${id}: ` +
      `reinstall without --omit=optional / --no-optional, or use a platform that has a prebuilt package. ` +
      'In a clone, `npm install` (or `npm run build`) compiles the addon into native/ (needs cargo).',
  );
  hint.code = 'ERR_SYNCULAR_ADDON_MISSING';
  hint.cause = tried[tried.length - 1].err;
  hint.tried = tried.map((t) => t.request);
  throw hint;
}

module.exports = load();
