// Platform packages: the loader's platform → package mapping for every
// target (platform, arch and libc injected, no binaries needed), musl
// detection, and the npm/<id>/ folders agreeing with it and packing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { skipUnder } from './support/emulation.mjs';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const { TARGETS, platformPackage, detectLibc, libcFromLdd, libcFromReport } = require('../lib/platform.js');

// What Node reports on each target: process.platform, process.arch and the C library.
const EXPECTED = [
  { platform: 'darwin', arch: 'arm64', libc: undefined, id: 'darwin-arm64', target: 'aarch64-apple-darwin' },
  { platform: 'darwin', arch: 'x64', libc: undefined, id: 'darwin-x64', target: 'x86_64-apple-darwin' },
  { platform: 'linux', arch: 'x64', libc: 'glibc', id: 'linux-x64-gnu', target: 'x86_64-unknown-linux-gnu' },
  { platform: 'linux', arch: 'x64', libc: 'musl', id: 'linux-x64-musl', target: 'x86_64-unknown-linux-musl' },
  { platform: 'linux', arch: 'arm64', libc: 'glibc', id: 'linux-arm64-gnu', target: 'aarch64-unknown-linux-gnu' },
  { platform: 'linux', arch: 'arm64', libc: 'musl', id: 'linux-arm64-musl', target: 'aarch64-unknown-linux-musl' },
  { platform: 'win32', arch: 'x64', libc: undefined, id: 'win32-x64-msvc', target: 'x86_64-pc-windows-msvc' },
];

const readManifest = (id) => JSON.parse(readFileSync(join(root, 'npm', id, 'package.json'), 'utf8'));

test('every target maps to its own platform package, and the package installs only there', () => {
  assert.deepEqual(Object.keys(TARGETS).sort(), EXPECTED.map((e) => e.id).sort());
  for (const e of EXPECTED) {
    const got = platformPackage(e);
    assert.deepEqual(got, { id: e.id, packageName: `${manifest.name}-${e.id}`, supported: true }, e.id);
    assert.equal(TARGETS[e.id], e.target);
    // npm installs an optional dependency only where os, cpu and libc fit.
    const m = readManifest(e.id);
    assert.equal(m.name, got.packageName);
    assert.deepEqual(m.os, [e.platform], `${e.id} os`);
    assert.deepEqual(m.cpu, [e.arch], `${e.id} cpu`);
    assert.deepEqual(m.libc, e.libc === undefined ? undefined : [e.libc], `${e.id} libc`);
    const fitting = EXPECTED.filter((o) => {
      const p = readManifest(o.id);
      return p.os.includes(e.platform) && p.cpu.includes(e.arch) && (p.libc === undefined || p.libc.includes(e.libc));
    });
    assert.deepEqual(fitting.map((o) => o.id), [e.id], `exactly one package fits ${e.id}`);
  }
});

test('platforms without a prebuilt package are named, and reported as unsupported', () => {
  const cases = [
    [{ platform: 'linux', arch: 'arm', libc: 'glibc' }, 'linux-arm-gnueabihf'],
    [{ platform: 'linux', arch: 'riscv64', libc: 'glibc' }, 'linux-riscv64-gnu'],
    [{ platform: 'win32', arch: 'arm64' }, 'win32-arm64-msvc'],
    [{ platform: 'win32', arch: 'ia32' }, 'win32-ia32-msvc'],
    [{ platform: 'freebsd', arch: 'x64' }, 'freebsd-x64'],
  ];
  for (const [proc, id] of cases) {
    assert.deepEqual(platformPackage(proc), { id, packageName: `${manifest.name}-${id}`, supported: false });
  }
});

test('musl or glibc: /usr/bin/ldd first, then the process report, glibc when neither answers', () => {
  const alpineLdd = '#!/bin/sh\nexec /lib/ld-musl-x86_64.so.1 --list "$@"\n';
  const debianLdd = '#!/bin/bash\n# This file is part of the GNU C Library.\nTEXTDOMAIN=libc\n';
  assert.equal(libcFromLdd(alpineLdd), 'musl');
  assert.equal(libcFromLdd(debianLdd), 'glibc');
  assert.equal(libcFromLdd(''), undefined);
  assert.equal(libcFromReport({ header: { glibcVersionRuntime: '2.36' } }), 'glibc');
  assert.equal(libcFromReport({ header: {} }), 'musl');
  assert.equal(libcFromReport(undefined), undefined);

  const missing = () => {
    throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
  };
  assert.equal(detectLibc({ ldd: () => alpineLdd, report: () => ({ header: { glibcVersionRuntime: '2.36' } }) }), 'musl');
  assert.equal(detectLibc({ ldd: () => debianLdd, report: () => ({ header: {} }) }), 'glibc');
  // No ldd (a distroless image): the report decides.
  assert.equal(detectLibc({ ldd: missing, report: () => ({ header: {} }) }), 'musl');
  assert.equal(detectLibc({ ldd: missing, report: () => ({ header: { glibcVersionRuntime: '2.31' } }) }), 'glibc');
  assert.equal(detectLibc({ ldd: missing, report: missing }), 'glibc');
  // Through platformPackage: the detected libc picks the package.
  const libc = detectLibc({ ldd: () => alpineLdd, report: missing });
  assert.equal(platformPackage({ platform: 'linux', arch: 'arm64', libc }).packageName, `${manifest.name}-linux-arm64-musl`);
});

const lddIsForeign = skipUnder('foreign-libc', "/usr/bin/ldd is the machine's glibc one, the process runs on musl");
test('on Linux, /usr/bin/ldd and the process report agree about this machine', { skip: process.platform !== 'linux' || lddIsForeign }, () => {
  let ldd;
  try {
    ldd = libcFromLdd(readFileSync('/usr/bin/ldd', 'utf8'));
  } catch {
    ldd = undefined;
  }
  const report = libcFromReport(process.report.getReport());
  if (ldd !== undefined) assert.equal(ldd, report);
  assert.equal(require('../lib/platform.js').currentPlatformPackage().id, `linux-${process.arch}-${report === 'musl' ? 'musl' : 'gnu'}`);
});

test('package.json: napi.targets, optionalDependencies and npm/ list the same targets at one version', () => {
  const ids = Object.keys(TARGETS).sort();
  assert.deepEqual(readdirSync(join(root, 'npm')).sort(), ids);
  assert.deepEqual([...manifest.napi.targets].sort(), Object.values(TARGETS).sort());
  assert.deepEqual(Object.keys(manifest.optionalDependencies).sort(), ids.map((id) => `${manifest.name}-${id}`).sort());
  for (const id of ids) {
    assert.equal(manifest.optionalDependencies[`${manifest.name}-${id}`], manifest.version);
    assert.equal(readManifest(id).version, manifest.version, `npm/${id} version`);
  }
});

const noNpm = skipUnder('wine', 'no npm inside Wine');
test('npm pack --dry-run succeeds in every platform folder', { timeout: 120_000, skip: noNpm }, () => {
  for (const id of Object.keys(TARGETS)) {
    const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: join(root, 'npm', id),
      encoding: 'utf8',
      shell: process.platform === 'win32',
    });
    assert.equal(r.status, 0, `npm pack in npm/${id}: ${r.stderr}`);
    const [packed] = JSON.parse(r.stdout);
    assert.equal(packed.name, `${manifest.name}-${id}`);
    assert.equal(packed.version, manifest.version);
    const files = packed.files.map((f) => f.path).sort();
    // Without a binary in the folder only the manifest and README go in; the
    // release workflow copies the binary in before it publishes.
    for (const f of ['README.md', 'package.json']) assert.ok(files.includes(f), `${f} in npm/${id}: ${files}`);
    assert.ok(files.every((f) => ['README.md', 'package.json', readManifest(id).main].includes(f)), `npm/${id} packs ${files}`);
  }
});

test('stage-release puts each binary into its package, and refuses a missing binary or another version', { timeout: 60_000, skip: noNpm }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'syncular-stage-test-'));
  try {
    const copy = join(tmp, 'repo');
    mkdirSync(join(copy, 'lib'), { recursive: true });
    cpSync(join(root, 'package.json'), join(copy, 'package.json'));
    cpSync(join(root, 'lib', 'platform.js'), join(copy, 'lib', 'platform.js'));
    cpSync(join(root, 'npm'), join(copy, 'npm'), { recursive: true });
    const artifacts = join(tmp, 'artifacts');
    mkdirSync(artifacts);
    const ids = Object.keys(TARGETS);
    for (const id of ids.slice(1)) writeFileSync(join(artifacts, `${manifest.napi.binaryName}.${id}.node`), `binary for ${id}`);
    const stage = (version) =>
      spawnSync(process.execPath, [join(root, 'scripts', 'stage-release.mjs'), '--root', copy, '--artifacts', artifacts, '--version', version], {
        encoding: 'utf8',
      });

    let r = stage(manifest.version);
    assert.equal(r.status, 1);
    assert.match(r.stderr, new RegExp(`no binary for ${ids[0]}`));
    writeFileSync(join(artifacts, `${manifest.napi.binaryName}.${ids[0]}.node`), `binary for ${ids[0]}`);
    r = stage('9.9.9');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /package\.json has version/);
    assert.equal(readdirSync(join(copy, 'npm', ids[0])).filter((f) => f.endsWith('.node')).length, 0, 'nothing staged on refusal');

    r = stage(manifest.version);
    assert.equal(r.status, 0, r.stderr);
    for (const id of ids) {
      const main = readManifest(id).main;
      assert.equal(readFileSync(join(copy, 'npm', id, main), 'utf8'), `binary for ${id}`);
    }
    const packed = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: join(copy, 'npm', ids[0]),
      encoding: 'utf8',
      shell: process.platform === 'win32',
    });
    assert.equal(packed.status, 0, packed.stderr);
    assert.ok(JSON.parse(packed.stdout)[0].files.some((f) => f.path === readManifest(ids[0]).main), 'the staged binary is packed');
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
