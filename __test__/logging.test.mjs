// Native diagnostics (docs/logging.md): SYNCULAR_NATIVE_LOG to stderr, the
// `logger` option, and silence when neither is set. Each case runs a child
// process, since the native log state is process-wide.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeStorage } from './support/package.mjs';
import { engines, freshPgSchema } from './support/engines.mjs';

const root = new URL('..', import.meta.url);
const url = (rel) => JSON.stringify(new URL(rel, root).href);
const file = (rel) => JSON.stringify(fileURLToPath(new URL(rel, root)));

// A few storage calls on sqlite::memory:: ensureSchema, touchPartition, one
// push (begin … upsertRow … commit), getMaxCommitSeq. `setup` runs first
// and may define `options` (merged into the constructor's) and `after()`.
function program(setup = '') {
  return `
import { createRequire } from 'node:module';
const require = createRequire(${url('index.js')});
const { NativeStorage } = require(${file('index.js')});
const { fixtureSchema } = await import(${url('__test__/support/schema.mjs')});
const { writeCommit, taskRow } = await import(${url('__test__/support/harness.mjs')});
let options = {};
let after = async () => {};
${setup}
const storage = new NativeStorage({ url: 'sqlite::memory:', ...options });
await storage.ensureSchema(fixtureSchema());
await storage.touchPartition('p1', 1_700_000_000_000, 'epoch-1');
await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t1') }]);
const seq = await storage.getMaxCommitSeq('p1');
if (seq !== 1) throw new Error('unexpected max commit seq ' + seq);
await storage.close();
await after();
`;
}

/** Runs `source` (ESM) in a child with only `env` among the SYNCULAR_* variables. */
function run(source, env = {}) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SYNCULAR_NATIVE_')));
  const out = spawnSync(process.execPath, ['--input-type=module', '-e', source], {
    env: { ...base, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(out.status, 0, `child failed (${out.status} ${out.signal}):\n${out.stderr}`);
  return out;
}

const CALL = /DEBUG syncular::call: storage call member="([^"]+)" engine="sqlite" micros=(\d+)/g;

test('SYNCULAR_NATIVE_LOG=syncular=debug logs each storage call with its duration to stderr', () => {
  const { stderr, stdout } = run(program(), { SYNCULAR_NATIVE_LOG: 'syncular=debug' });
  assert.equal(stdout, '');
  const calls = [...stderr.matchAll(CALL)].map((m) => m[1]);
  assert.ok(calls.includes('getMaxCommitSeq'), stderr);
  assert.ok(calls.includes('tx.upsertRow'), stderr);
  // Nothing is slow at the default 100 ms on a memory database.
  assert.doesNotMatch(stderr, /syncular::slow/);
});

test('SYNCULAR_NATIVE_SLOW_MS=0 makes every timed statement a slow-statement warning', () => {
  const { stderr } = run(program(), { SYNCULAR_NATIVE_LOG: 'syncular=warn', SYNCULAR_NATIVE_SLOW_MS: '0' });
  assert.match(stderr, /WARN syncular::slow: slow statement engine="sqlite" kind="read" site=src\/sqlite\/\S+:\d+ micros=\d+/);
  assert.match(stderr, /WARN syncular::slow: slow statement engine="sqlite" kind="write" site=\S+ micros=\d+/);
  assert.match(stderr, /WARN syncular::slow: slow statement engine="sqlite" kind="commit" site=\S+ sql="COMMIT" micros=\d+/);
  assert.doesNotMatch(stderr, /syncular::call/, 'debug is off at warn');
});

test('with nothing set, stderr stays empty', () => {
  const { stderr, stdout } = run(program());
  assert.equal(stderr, '');
  assert.equal(stdout, '');
});

test('an invalid SYNCULAR_NATIVE_LOG is reported once and leaves logging off', () => {
  const { stderr } = run(program(), { SYNCULAR_NATIVE_LOG: 'syncular=loud' });
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, stderr);
  assert.match(lines[0], /SYNCULAR_NATIVE_LOG="syncular=loud" is not a valid filter/);
});

test('a logger function receives { level, target, message, fields } records instead of stderr', () => {
  const { stderr, stdout } = run(
    program(`
const records = [];
options = { logger: (r) => records.push(r), logFilter: 'syncular=debug' };
after = async () => {
  await new Promise((r) => setTimeout(r, 100)); // records arrive on the event loop
  process.stdout.write(JSON.stringify(records));
};`),
    // The sink replaces stderr even when SYNCULAR_NATIVE_LOG is set.
    { SYNCULAR_NATIVE_LOG: 'syncular=debug', SYNCULAR_NATIVE_SLOW_MS: '0' },
  );
  assert.equal(stderr, '');
  const records = JSON.parse(stdout);
  const call = records.find((r) => r.target === 'syncular::call' && r.fields.member === 'getMaxCommitSeq');
  assert.ok(call, stdout);
  assert.equal(call.level, 'debug');
  assert.equal(call.message, 'storage call');
  assert.equal(call.fields.engine, 'sqlite');
  assert.equal(typeof call.fields.micros, 'number');
  const slow = records.find((r) => r.target === 'syncular::slow' && r.fields.kind === 'commit');
  assert.ok(slow, stdout);
  assert.equal(slow.level, 'warn');
  assert.equal(slow.fields.sql, 'COMMIT');
});

test('a console-style logger gets logger[level](message, fields); the default filter is warn', () => {
  const { stderr, stdout } = run(
    program(`
const calls = [];
const logger = {};
for (const level of ['debug', 'info', 'warn', 'error']) logger[level] = (message, fields) => calls.push({ level, message, fields });
options = { logger };
after = async () => {
  await new Promise((r) => setTimeout(r, 100));
  process.stdout.write(JSON.stringify(calls));
};`),
    { SYNCULAR_NATIVE_SLOW_MS: '0' },
  );
  assert.equal(stderr, '');
  const calls = JSON.parse(stdout);
  assert.ok(calls.length > 0, 'slow warnings arrive');
  for (const c of calls) {
    assert.equal(c.level, 'warn', 'no debug records at the default filter');
    assert.equal(c.message, 'slow statement');
    assert.equal(c.fields.target, 'syncular::slow');
    assert.equal(typeof c.fields.micros, 'number');
  }
});

test('write-lock waits and busy retries warn (two storages on one file)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'syncular-logging-'));
  try {
    const db = join(dir, 'db.sqlite');
    const source = `
import { createRequire } from 'node:module';
const require = createRequire(${url('index.js')});
const { NativeStorage } = require(${file('index.js')});
const { fixtureSchema } = await import(${url('__test__/support/schema.mjs')});
const a = new NativeStorage({ url: ${JSON.stringify(`sqlite:${db}`)} });
const b = new NativeStorage({ url: ${JSON.stringify(`sqlite:${db}`)} });
await a.ensureSchema(fixtureSchema());
await b.ensureSchema(fixtureSchema());
const held = await a.begin('p1');
await held.lockPartitionForPush();
const waiting = b.begin('p1');
await new Promise((r) => setTimeout(r, 300));
await held.commit();
const tx = await waiting;
await tx.rollback();
await a.close();
await b.close();
`;
    const { stderr } = run(source, { SYNCULAR_NATIVE_LOG: 'syncular::lock=warn,syncular::busy=warn', SYNCULAR_NATIVE_SLOW_MS: '100' });
    assert.match(stderr, /WARN syncular::lock: write lock wait engine="sqlite" partition="p1" micros=\d+/);
    assert.match(stderr, /WARN syncular::busy: database busy, retrying engine="sqlite" op="BEGIN IMMEDIATE" retries=1 waited_ms=\d+ gave_up=false/);
    assert.match(stderr, /retries=4 /, 'rate-limited to powers of two');
    assert.doesNotMatch(stderr, /retries=3 /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const pg = engines.find((e) => e.dialect === 'postgres');

test('postgres: pool acquire waits and partition lock waits warn', { skip: pg === undefined && 'SYNCULAR_TEST_PG_URL not set' }, () => {
  const pgUrl = pg.requireUrl();
  const source = `
import { createRequire } from 'node:module';
const require = createRequire(${url('index.js')});
const { NativeStorage } = require(${file('index.js')});
const { fixtureSchema } = await import(${url('__test__/support/schema.mjs')});
const url = ${JSON.stringify(pgUrl)};
const schema = ${JSON.stringify(freshPgSchema())};
const a = new NativeStorage({ url, schema, maxConnections: 1 });
await a.ensureSchema(fixtureSchema());
// The only connection is pinned by a transaction: the read waits for it.
const held = await a.begin('p1');
await held.lockPartitionForPush();
const read = a.getMaxCommitSeq('p1');
await new Promise((r) => setTimeout(r, 300));
await held.commit();
await read;
// A second storage (pool) waits for the partition's row lock.
const b = new NativeStorage({ url, schema });
const first = await a.begin('p1');
await first.lockPartitionForPush();
const second = await b.begin('p1');
const locking = second.lockPartitionForPush();
await new Promise((r) => setTimeout(r, 300));
await first.commit();
await locking;
await second.rollback();
await a.close();
await b.close();
`;
  const { stderr } = run(source, { SYNCULAR_NATIVE_LOG: 'syncular=warn', SYNCULAR_NATIVE_SLOW_MS: '150' });
  assert.match(stderr, /WARN syncular::pool: pool acquire wait engine="postgres" micros=\d+ size=1 idle=\d+/);
  assert.match(stderr, /WARN syncular::lock: write lock wait engine="postgres" partition="p1" micros=\d+/);
});

test('invalid logger options throw ERR_SYNCULAR_INVALID_ARGUMENT', () => {
  for (const options of [
    { logger: 42 },
    { logger: 'console' },
    { logger: { warn() {} } },
    { logger: () => {}, logFilter: 7 },
  ]) {
    assert.throws(
      () => new NativeStorage({ url: 'sqlite::memory:', ...options }),
      (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT' && /logger|logFilter/.test(err.message),
      JSON.stringify(options),
    );
  }
  // A filter the native side refuses: checked before it replaces anything.
  assert.throws(
    () => new NativeStorage({ url: 'sqlite::memory:', logger: () => {}, logFilter: 'syncular=loud' }),
    (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT' && /invalid log filter/.test(err.message),
  );
});
