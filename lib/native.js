'use strict';
// Loads the compiled addon. A published install gets it from the platform
// package npm picked through optionalDependencies (no compiler needed); a
// clone gets it from native/, where `npm install` / `npm run build` put the
// addon built from source. A local build goes first: only a clone has one
// (the tarball ships no native/), and a clone that built from source must
// run what it built, never a same-named package fetched from the registry.

const path = require('node:path');
const { BINARY, TARGETS, currentPlatformPackage } = require('./platform');

function firstLine(err) {
  return String(err?.message ?? err).split('\n')[0];
}

function load() {
  const { id, packageName, supported } = currentPlatformPackage();
  const candidates = [
    { label: 'local build', request: path.join(__dirname, '..', 'native', `${BINARY}.node`) },
    { label: `platform package ${packageName}`, request: packageName },
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
      (supported
        ? `A published install takes the binary from the optional dependency ${packageName}: ` +
          'reinstall without --omit=optional / --no-optional. '
        : `No prebuilt package exists for ${id} (prebuilt: ${Object.keys(TARGETS).join(', ')}); build from source. `) +
      'In a clone, `npm install` (or `npm run build`) compiles the addon into native/ (needs cargo, a C compiler and libclang; README, "Platforms").',
  );
  hint.code = 'ERR_SYNCULAR_ADDON_MISSING';
  hint.cause = tried[tried.length - 1].err;
  hint.tried = tried.map((t) => t.request);
  throw hint;
}

const binding = load();
// The members a host calls on every request, as hand-written callbacks in
// place of napi-rs's generated ones (src/napi/fast.rs says why).
binding.installFastMembers(binding.NativeEngine.prototype);

module.exports = binding;
