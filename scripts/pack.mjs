// `npm run pack`: writes the installable tarballs for this machine, the main
// package and the platform package holding its binary, to pack/.
//
//   node scripts/pack.mjs [--out DIR] [--no-build] [--json]
//
// --no-build packs the addon native/ already holds (the test suite uses it
// to pack the binary it has just tested); by default a release build runs
// first. --json prints { main, platform } with the tarball paths.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const outIndex = argv.indexOf('--out');
const out = resolve(outIndex >= 0 ? argv[outIndex + 1] : join(root, 'pack'));
const log = flag('--json') ? (msg) => console.error(msg) : (msg) => console.log(msg);

function fail(message) {
  console.error(`pack: ${message}`);
  process.exit(1);
}

function readJson(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...opts });
  if (r.error) fail(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} exited with ${r.status}\n${r.stdout}`);
  return r.stdout;
}

function libcOfProcess() {
  if (process.platform !== 'linux') return undefined;
  try {
    return process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
  } catch {
    return 'glibc';
  }
}

/** The npm/<id> platform package whose os/cpu/libc fields accept this process. */
function platformDir() {
  const libc = libcOfProcess();
  const dirs = readdirSync(join(root, 'npm'));
  for (const id of dirs) {
    const manifest = readJson(join(root, 'npm', id, 'package.json'));
    const fits = (field, value) => manifest[field] === undefined || value === undefined || manifest[field].includes(value);
    if (fits('os', process.platform) && fits('cpu', process.arch) && fits('libc', libc)) return { id, manifest };
  }
  return fail(
    `no platform package under npm/ fits ${process.platform}-${process.arch}${libc ? `-${libc}` : ''} (have: ${dirs.join(', ')})`,
  );
}

const pkg = readJson(join(root, 'package.json'));
const { id, manifest } = platformDir();
if (manifest.version !== pkg.version) fail(`npm/${id} has version ${manifest.version}, the main package ${pkg.version}`);
if (pkg.optionalDependencies?.[manifest.name] !== pkg.version) {
  fail(`package.json optionalDependencies must list ${manifest.name}@${pkg.version}`);
}

if (!flag('--no-build')) {
  const require = createRequire(join(root, 'package.json'));
  let cliManifest;
  try {
    cliManifest = require.resolve('@napi-rs/cli/package.json');
  } catch {
    fail('@napi-rs/cli is not installed; run `npm install` first');
  }
  const bin = readJson(cliManifest).bin;
  const cli = join(dirname(cliManifest), typeof bin === 'string' ? bin : bin.napi);
  const [, ...args] = pkg.scripts.build.split(/\s+/);
  log(`pack: release build (napi ${args.join(' ')})`);
  const r = spawnSync(process.execPath, [cli, ...args], { cwd: root, stdio: ['ignore', 2, 2] });
  if (r.status !== 0) fail('the release build failed');
}

const binary = join(root, 'native', `${pkg.napi.binaryName}.node`);
if (!existsSync(binary)) fail(`${binary} is missing; run \`npm run build\` (or drop --no-build)`);

// The platform package: its manifest and README from npm/<id>, plus the binary.
const stage = mkdtempSync(join(tmpdir(), `syncular-pack-${id}-`));
try {
  for (const file of readdirSync(join(root, 'npm', id))) {
    if (!file.endsWith('.node')) copyFileSync(join(root, 'npm', id, file), join(stage, file));
  }
  copyFileSync(binary, join(stage, manifest.main));
  mkdirSync(out, { recursive: true });
  const tarball = (name) => `${name.replace(/^@/, '').replace('/', '-')}-${pkg.version}.tgz`;
  for (const name of [pkg.name, manifest.name]) rmSync(join(out, tarball(name)), { force: true });

  const packed = (stdout) => join(out, JSON.parse(stdout)[0].filename);
  const platform = packed(run('npm', ['pack', stage, '--pack-destination', out, '--json']));
  // --ignore-scripts: no `prepare` build here, the binary was settled above.
  const main = packed(run('npm', ['pack', '--ignore-scripts', '--pack-destination', out, '--json']));
  if (flag('--json')) console.log(JSON.stringify({ main, platform }));
  else log(`pack: wrote\n  ${main}\n  ${platform}`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
