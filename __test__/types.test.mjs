// The hand-written index.d.ts: TypeScript hosts (0.24 and 0.15.x forms)
// typed as upstream declares them (interfaces stay interfaces), accept
// NativeStorage under upstream's strictness flags (strict,
// exactOptionalPropertyTypes, noUncheckedIndexedAccess, ...), typed
// mistakes are rejected, and what it declares is what the JS provides.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const typesDir = join(root, '__test__', 'types');
const tsRoot = dirname(require.resolve('typescript/package.json'));
const ts = require('typescript');
const pkg = require('..');

function tsc(project) {
  const r = spawnSync(
    process.execPath,
    [join(tsRoot, 'bin', 'tsc'), '-p', join(typesDir, project), '--strict', '--exactOptionalPropertyTypes', '--noEmit', '--pretty', 'false'],
    { cwd: root, encoding: 'utf8' },
  );
  assert.equal(r.error, undefined, String(r.error));
  return { status: r.status, output: r.stdout + r.stderr };
}

test('package.json points TypeScript at index.d.ts', () => {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  assert.equal(manifest.types, 'index.d.ts');
  assert.ok(manifest.files.includes('index.d.ts'), 'index.d.ts is published');
});

test('the 0.24, post-0.24 and 0.15.x hosts, typed as upstream declares them, accept NativeStorage (upstream strictness)', () => {
  const { status, output } = tsc('tsconfig.json');
  assert.equal(status, 0, `tsc reported errors:\n${output}`);
});

test('typed mistakes do not compile: an error on every EXPECT-ERROR line and nowhere else', () => {
  const { status, output } = tsc('tsconfig.wrong.json');
  assert.notEqual(status, 0, 'wrong.mts compiled');
  const lines = readFileSync(join(typesDir, 'wrong.mts'), 'utf8').split('\n');
  const expected = lines.flatMap((line, i) => (/\/\/ EXPECT-ERROR\s*$/.test(line) ? [i + 1] : []));
  assert.ok(expected.length >= 4);
  const reported = [...new Set([...output.matchAll(/wrong\.mts\((\d+),\d+\): error TS\d+/g)].map((m) => Number(m[1])))];
  assert.deepEqual(reported.sort((a, b) => a - b), expected, output);
});

/** Names of the methods and value exports index.d.ts declares. */
function declared() {
  const file = join(root, 'index.d.ts');
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const members = (node) => [...new Set(node.members.filter((m) => m.name && (ts.isMethodDeclaration(m) || ts.isMethodSignature(m))).map((m) => m.name.text))];
  const out = { values: [] };
  for (const s of source.statements) {
    const exported = ts.getModifiers?.(s)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (!exported) continue;
    if (ts.isClassDeclaration(s) || ts.isFunctionDeclaration(s)) out.values.push(s.name.text);
    if (ts.isClassDeclaration(s) && s.name.text === 'NativeStorage') out.storage = members(s);
    if (ts.isInterfaceDeclaration(s) && s.name.text === 'NativeTransaction') out.transaction = members(s);
    if (ts.isInterfaceDeclaration(s) && s.name.text === 'NativeStorageOptions') {
      out.options = s.members.map((m) => m.name.text);
    }
  }
  return out;
}

const ownFunctions = (o) => Object.keys(o).filter((k) => typeof o[k] === 'function');
const sorted = (a) => [...a].sort();

test('index.d.ts declares exactly the runtime exports and members', async () => {
  const d = declared();
  assert.deepEqual(sorted(d.values), sorted(Object.keys(pkg)));
  // ESM hosts get each one as a named import (Node's CommonJS lexer must see it).
  // Besides them the namespace holds `default` and, from Node 23 on,
  // `module.exports` (both the whole exports object).
  const esm = await import('../index.js');
  const named = Object.keys(esm).filter((k) => k !== 'default' && k !== 'module.exports');
  assert.deepEqual(sorted(d.values), sorted(named));
  if ('module.exports' in esm) assert.equal(esm['module.exports'], pkg);
  const storage = new pkg.NativeStorage();
  try {
    assert.deepEqual(sorted(d.storage), sorted(ownFunctions(storage)));
    const tx = await storage.begin('p');
    try {
      assert.deepEqual(sorted(d.transaction), sorted(ownFunctions(tx)));
    } finally {
      await tx.rollback();
    }
  } finally {
    await storage.close();
  }
});

test('every declared option is read: valid values construct, invalid ones throw coded errors', async () => {
  const { options } = declared();
  assert.deepEqual(sorted(options), sorted(['url', 'path', 'filename', 'errors', 'synchronous', 'groupCommit', 'busyTimeoutMs', 'maxConnections', 'schema', 'queryTimeoutMs', 'maxResultRows', 'maxResultBytes', 'connectTimeoutMs', 'pooling', 'closeDrainMs', 'transactionWarnMs', 'transactionTimeoutMs', 'logger', 'logFilter']));
  const invalid = [
    { url: 'sqlite::memory:', synchronous: 'fast' },
    { url: 'sqlite::memory:', groupCommit: 'on' },
    { url: 'sqlite::memory:', groupCommit: { maxSize: 0 } },
    { url: 'sqlite::memory:', busyTimeoutMs: -1 },
    { url: 'sqlite::memory:', queryTimeoutMs: 0 },
    { url: 42 },
    { url: 'postgres://127.0.0.1:1/none', maxConnections: 0 },
    { url: 'postgres://127.0.0.1:1/none', schema: 7 },
    { url: 'postgres://127.0.0.1:1/none', queryTimeoutMs: 1.5 },
    { url: 'postgres://127.0.0.1:1/none', connectTimeoutMs: 0 },
    { url: 'postgres://127.0.0.1:1/none', connectTimeoutMs: 'soon' },
    { url: 'postgres://127.0.0.1:1/none', pooling: 'statement' },
    { url: 'postgres://127.0.0.1:1/none', pooling: true },
    { url: 'postgres://127.0.0.1:1/none?pgbouncer=maybe' },
    { url: 'postgres://127.0.0.1:1/none?pgbouncer=true', pooling: 'session' },
    { url: 'sqlite::memory:', pooling: 'transaction' },
    { url: 'sqlite::memory:', maxResultRows: 0 },
    { url: 'sqlite::memory:', maxResultRows: 1.5 },
    { url: 'postgres://127.0.0.1:1/none', maxResultBytes: -1 },
    { url: 'sqlite::memory:', maxResultBytes: '1MB' },
    { url: 'sqlite::memory:', closeDrainMs: -1 },
    { url: 'sqlite::memory:', closeDrainMs: 1.5 },
    { url: 'sqlite::memory:', transactionWarnMs: -5 },
    { url: 'sqlite::memory:', transactionTimeoutMs: 'soon' },
    { url: 'sqlite::memory:', logger: 'console' },
    { url: 'sqlite::memory:', logger: () => {}, logFilter: 7 },
    { url: 'sqlite::memory:', logger: () => {}, logFilter: 'syncular=loud' },
  ];
  for (const opts of invalid) {
    assert.throws(() => new pkg.NativeStorage(opts), { code: 'ERR_SYNCULAR_INVALID_ARGUMENT' }, JSON.stringify(opts));
  }
  for (const opts of [
    { url: 'sqlite::memory:', synchronous: 'off', busyTimeoutMs: 0, queryTimeoutMs: 1 },
    { synchronous: 'full', queryTimeoutMs: 10_000, url: 'sqlite::memory:', path: undefined },
    { url: 'sqlite::memory:', groupCommit: false },
    { url: 'sqlite::memory:', maxResultRows: 1, maxResultBytes: 2 ** 40 },
    { url: 'sqlite::memory:', groupCommit: { maxSize: 8, maxWaitMs: 2 } },
    { path: ':memory:' },
    { filename: ':memory:' },
    { url: 'postgres://127.0.0.1:1/none', maxConnections: 2, schema: 'tenant_a', queryTimeoutMs: 500, connectTimeoutMs: 250, maxResultRows: 10, maxResultBytes: 1000 },
    { url: 'sqlite::memory:', logger: console, logFilter: 'off' },
    { url: 'postgres://127.0.0.1:1/none', pooling: 'transaction' },
    { url: 'postgres://127.0.0.1:1/none?sslmode=disable&pgbouncer=true', pooling: 'transaction' },
    { url: 'postgres://127.0.0.1:1/none', pooling: 'none' },
  ]) {
    const s = new pkg.NativeStorage(opts);
    await s.close();
  }
});

/** A stand-in upstream tree: the file layout upstream-types.mjs reads, with a tiny ServerStorage. */
function fakeTree(dir, getRowResult) {
  const server = join(dir, 'packages', 'server', 'src');
  const core = join(dir, 'packages', 'core', 'src');
  mkdirSync(server, { recursive: true });
  mkdirSync(core, { recursive: true });
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, module: 'ESNext', moduleResolution: 'bundler', target: 'ES2023', types: ['bun'] } }));
  writeFileSync(join(core, 'index.ts'), 'export interface RejectionDetails { readonly reason?: string }\n');
  writeFileSync(join(server, 'schema.ts'), 'export interface CompiledSchema { readonly version: number }\n');
  writeFileSync(
    join(server, 'storage.ts'),
    [
      "import type { RejectionDetails } from '@syncular/core';",
      'export interface StoredPushResult { readonly status: "applied" | "rejected"; readonly results: readonly { opIndex: number; status: "error"; code: string; message: string; retryable: boolean; details?: RejectionDetails }[] }',
      'export interface StorageTransaction { commitRejectedPushResult?(clientId: string, clientCommitId: string, result: StoredPushResult): Promise<void>; commit(): Promise<void> }',
      `export interface ServerStorage { begin(partition: string): Promise<StorageTransaction>; getRow(partition: string, table: string, rowId: string): Promise<${getRowResult}> }`,
    ].join('\n'),
  );
}

test('test:upstream-types compiles against a given tree, and fails with the compiler errors when a declaration disagrees', { timeout: 120_000 }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'syncular-upstream-types-test-'));
  try {
    const script = join(root, 'scripts', 'upstream-types.mjs');
    const run = (tree) => spawnSync(process.execPath, [script, tree], { encoding: 'utf8', env: { ...process.env, SYNCULAR_INTERFACE_024: '' } });
    fakeTree(join(tmp, 'good'), '{ readonly rowId: string } | undefined');
    fakeTree(join(tmp, 'bad'), 'number');
    const good = run(join(tmp, 'good'));
    assert.equal(good.status, 0, good.stdout + good.stderr);
    assert.match(good.stdout, /tree: ok/);
    const bad = run(join(tmp, 'bad'));
    assert.equal(bad.status, 1, bad.stdout + bad.stderr);
    assert.match(bad.stderr, /host\.ts\(\d+,\d+\): error TS2322/);
    const none = run(join(tmp, 'missing'));
    assert.equal(none.status, 2);
    assert.match(none.stderr, /not an upstream tree/);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
