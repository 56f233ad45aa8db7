// The published form: `scripts/pack.mjs` writes the main and the platform
// tarball; both install into an empty project with no Rust toolchain on
// PATH and without the registry, build nothing, and the installed package
// pushes and pulls, loads from ESM and type-checks under --strict.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { skipUnder } from './support/emulation.mjs';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/** The environment of a machine without Rust: no cargo/rustc on PATH, no npm run-script settings. */
function withoutRust() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  env.PATH = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((d) => d && !existsSync(join(d, 'cargo')) && !existsSync(join(d, 'rustc')))
    .join(delimiter);
  return env;
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  assert.equal(r.error, undefined, `${cmd}: ${r.error}`);
  return r;
}

function tarList(tarball) {
  return run('tar', ['-tzf', tarball]).stdout.split('\n').filter(Boolean);
}

// npm decides the C library from the machine's /usr/bin/ldd, which a musl
// Node on a glibc machine does not change; Wine has no npm.
const npmCannot =
  skipUnder('foreign-libc', "npm reads the machine's /usr/bin/ldd (glibc) and refuses the musl package") ||
  skipUnder('wine', 'no npm inside Wine');
test('packed tarballs install without cargo or registry and run a push and a pull', { timeout: 300_000, skip: npmCannot }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'syncular-pack-test-'));
  try {
    // Packs the addon this suite has been testing (no second build).
    const packed = run(process.execPath, [join(root, 'scripts', 'pack.mjs'), '--no-build', '--json', '--out', join(tmp, 'pack')], {
      cwd: root,
    });
    assert.equal(packed.status, 0, packed.stderr);
    const { main, platform } = JSON.parse(packed.stdout.trim().split('\n').pop());

    const mainFiles = tarList(main);
    for (const f of ['package/package.json', 'package/index.js', 'package/index.d.ts', 'package/lib/native.js', 'package/lib/storage.js']) {
      assert.ok(mainFiles.includes(f), `${f} in ${mainFiles.join(', ')}`);
    }
    for (const f of mainFiles) {
      assert.ok(!/^package\/(src|native|scripts|tests|__test__|target|npm)\//.test(f) && !f.endsWith('.node'), `${f} must not be published`);
    }
    const binaries = tarList(platform).filter((f) => f.endsWith('.node'));
    assert.equal(binaries.length, 1, tarList(platform).join(', '));

    const env = withoutRust();
    assert.equal(spawnSync('cargo', ['--version'], { env }).error?.code, 'ENOENT', 'cargo must be unreachable');

    const app = join(tmp, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
    const install = run('npm', ['install', '--offline', '--no-audit', '--no-fund', main, platform], { cwd: app, env });
    assert.equal(install.status, 0, `npm install failed:\n${install.stdout}\n${install.stderr}`);

    const installed = join(app, 'node_modules', manifest.name);
    assert.ok(existsSync(join(installed, 'index.d.ts')));
    assert.ok(!existsSync(join(installed, 'native')), 'nothing was built into the installed package');
    assert.ok(!existsSync(join(app, 'node_modules', '@napi-rs')), 'the build tool is not a runtime dependency');
    // This machine's platform package; npm skipped the other targets' optional dependencies.
    const platformName = require('../lib/platform.js').currentPlatformPackage().packageName;
    assert.ok(manifest.optionalDependencies[platformName], platformName);
    assert.ok(readdirSync(join(app, 'node_modules', platformName)).some((f) => f.endsWith('.node')));

    // A push and a pull: the quickstart, importing the installed package.
    const quickstart = readFileSync(join(root, 'examples', 'quickstart.mjs'), 'utf8');
    const adapted = quickstart.replace("require('../index.js')", `require('${manifest.name}')`);
    assert.notEqual(adapted, quickstart, 'quickstart.mjs loads ../index.js');
    writeFileSync(join(app, 'quickstart.mjs'), adapted);
    const pushPull = run(process.execPath, ['quickstart.mjs'], { cwd: app, env });
    assert.equal(pushPull.status, 0, pushPull.stderr);
    assert.match(pushPull.stdout, /pushed commits 1 and 2/);
    assert.match(pushPull.stdout, /window: commit 1 by alice: upsert t1@v1, upsert t2@v1/);
    assert.match(pushPull.stdout, /scan project p1: t1 v1 .*t2 v2/);

    // Named ESM imports, and the binary comes from the platform package.
    writeFileSync(
      join(app, 'esm.mjs'),
      [
        `import { NativeStorage, createStorage, StorageQueryError } from '${manifest.name}';`,
        `import { createRequire } from 'node:module';`,
        `const s = createStorage();`,
        `await s.touchPartition('p', 1, 'e');`,
        `console.log(JSON.stringify({ partitions: await s.listPartitions(), storage: s instanceof NativeStorage, error: typeof StorageQueryError,`,
        `  binary: createRequire(import.meta.url).resolve('${platformName}') }));`,
        `await s.close();`,
      ].join('\n'),
    );
    const esm = run(process.execPath, ['esm.mjs'], { cwd: app, env });
    assert.equal(esm.status, 0, esm.stderr);
    const seen = JSON.parse(esm.stdout);
    assert.deepEqual(seen.partitions, ['p']);
    assert.equal(seen.storage, true);
    assert.equal(seen.error, 'function');

    // A strict TypeScript host finds the declarations through package.json (no TS7016).
    writeFileSync(
      join(app, 'host.mts'),
      [
        `import { NativeStorage, type StoredRow } from '${manifest.name}';`,
        `const storage = new NativeStorage({ url: 'sqlite::memory:', synchronous: 'full', queryTimeoutMs: 5000 });`,
        `export const row: Promise<StoredRow | undefined> = storage.getRow('p', 't', 'r');`,
      ].join('\n'),
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, exactOptionalPropertyTypes: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022'], types: [] },
        files: ['host.mts'],
      }),
    );
    const tsc = join(dirname(require.resolve('typescript/package.json')), 'bin', 'tsc');
    const typed = run(process.execPath, [tsc, '-p', join(app, 'tsconfig.json'), '--pretty', 'false'], { cwd: app, env });
    assert.equal(typed.status, 0, typed.stdout + typed.stderr);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test('the platform package and the optional dependency agree with the main package', () => {
  const targets = readdirSync(join(root, 'npm'));
  assert.ok(targets.length >= 1);
  for (const id of targets) {
    const p = JSON.parse(readFileSync(join(root, 'npm', id, 'package.json'), 'utf8'));
    assert.equal(p.name, `${manifest.name}-${id}`);
    assert.equal(p.version, manifest.version);
    assert.equal(p.main, `${manifest.napi.binaryName}.${id}.node`);
    assert.deepEqual(p.files, [p.main]);
    assert.equal(manifest.optionalDependencies[p.name], manifest.version, `optionalDependencies lists ${p.name}`);
  }
  assert.equal(manifest.dependencies, undefined, 'no runtime dependencies');
  assert.ok(manifest.devDependencies['@napi-rs/cli']);
  assert.equal(manifest.scripts.install, undefined, 'installing the tarball runs no build');
});

test('without a platform package or a local build, loading fails with a coded error naming both places', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'syncular-loader-test-'));
  try {
    const copy = join(tmp, 'syncular-native-storage');
    mkdirSync(copy);
    for (const f of ['package.json', 'index.js']) cpSync(join(root, f), join(copy, f));
    cpSync(join(root, 'lib'), join(copy, 'lib'), { recursive: true });
    const probe = [
      'try { require(process.argv[1]); console.log("loaded"); }',
      'catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, tried: e.tried })); }',
    ].join('\n');
    const r = run(process.execPath, ['-e', probe, copy], { cwd: tmp, env: withoutRust() });
    assert.equal(r.status, 0, r.stderr);
    const err = JSON.parse(r.stdout);
    assert.equal(err.code, 'ERR_SYNCULAR_ADDON_MISSING');
    assert.equal(err.tried.length, 2);
    // The local build first: a clone runs what it built from source.
    assert.equal(err.tried[0], join(copy, 'native', `${manifest.napi.binaryName}.node`));
    assert.match(err.tried[1], new RegExp(`^${manifest.name}-[a-z0-9]+-[a-z0-9]+`));
    for (const t of err.tried) assert.ok(err.message.includes(t), `${t} in the message`);
    assert.match(err.message, /optional dependency/);
    assert.match(err.message, /npm run build/);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
