// Release staging (the release workflow's publish job): puts each target's
// binary into its npm/<id>/ platform package and checks that the main
// package, every platform package and every optional dependency carry the
// release version. Fails, changing nothing, when a binary is missing or a
// version differs.
//
//   node scripts/stage-release.mjs --artifacts DIR --version X.Y.Z [--root DIR]
//
// DIR holds syncular-native-storage.<id>.node for every target in
// lib/platform.js (the build jobs' artifacts). --root (default: this
// checkout) is for the test.
import { copyFileSync, existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const root = resolve(option('--root') ?? here);
const artifacts = option('--artifacts');
const version = option('--version');
if (!artifacts || !version) {
  console.error('usage: node scripts/stage-release.mjs --artifacts DIR --version X.Y.Z [--root DIR]');
  process.exit(2);
}

const { TARGETS } = createRequire(import.meta.url)(join(root, 'lib', 'platform.js'));
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
const pkg = readJson(join(root, 'package.json'));
const problems = [];

if (pkg.version !== version) problems.push(`package.json has version ${pkg.version}, the release is ${version}`);
const plan = [];
for (const id of Object.keys(TARGETS)) {
  const dir = join(root, 'npm', id);
  const manifest = readJson(join(dir, 'package.json'));
  if (manifest.version !== version) problems.push(`npm/${id} has version ${manifest.version}`);
  if (pkg.optionalDependencies?.[manifest.name] !== version) problems.push(`optionalDependencies lists ${manifest.name}@${pkg.optionalDependencies?.[manifest.name]}`);
  const binary = join(artifacts, `${pkg.napi.binaryName}.${id}.node`);
  if (!existsSync(binary) || statSync(binary).size === 0) problems.push(`no binary for ${id}: ${binary}`);
  else plan.push([binary, join(dir, manifest.main)]);
}

if (problems.length > 0) {
  console.error(`stage-release: not staged:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
for (const [from, to] of plan) {
  copyFileSync(from, to);
  console.log(`stage-release: ${to}`);
}
