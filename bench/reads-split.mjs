// Where a storage's share of a window pull or a bootstrap goes, member by
// member: the storage calls one request makes are recorded (names and
// arguments), then each is replayed on its own, N times, for every storage,
// and its calling-thread CPU µs per call printed. For this package the
// native member alone (the binding called directly with the same
// arguments) is timed beside the whole member.
//
//   bun bench/reads-split.mjs --server <tree>/packages/server/src/index-bun.ts [--figure window|bootstrap] [--calls N]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadCore, createHost, fill, windowPulls, bootstrap } from './lib/server.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const serverPath = opt('--server');
const figure = opt('--figure', 'window');
// --only NAME --loop S: this package's member NAME alone, looped for S seconds (for perf).
const only = opt('--only');
const loopSeconds = Number(opt('--loop', 0));
const calls = Number(opt('--calls', figure === 'window' ? 2000 : 200));
const server = await import(pathToFileURL(serverPath).href);
const core = await loadCore(serverPath);
const dir = mkdtempSync(join(tmpdir(), 'syncular-split-'));
const cpu = () => {
  const t = process.threadCpuUsage();
  return t.user + t.system;
};

function recorder(storage, log) {
  const wrap = (object, prefix) =>
    new Proxy(object, {
      get(target, key) {
        const v = Reflect.get(target, key);
        if (typeof v !== 'function') return v;
        return (...a) => {
          if (log.on) log.calls.push({ name: prefix + String(key), args: structuredClone(a) });
          const out = v.apply(target, a);
          return key === 'begin' ? Promise.resolve(out).then((tx) => wrap(tx, 'tx.')) : out;
        };
      },
    });
  return wrap(storage, '');
}

// Time inside the binding's members (this package), by wrapping its prototype.
import { createRequire } from 'node:module';
const native = createRequire(import.meta.url)('../lib/native.js');
const inside = new Map();
let timing = false;
for (const name of Object.getOwnPropertyNames(native.NativeEngine.prototype)) {
  const d = Object.getOwnPropertyDescriptor(native.NativeEngine.prototype, name);
  if (typeof d.value !== 'function' || name === 'constructor') continue;
  const f = d.value;
  native.NativeEngine.prototype[name] = function (...a) {
    if (!timing) return f.apply(this, a);
    const c0 = cpu();
    const out = f.apply(this, a);
    inside.set(name, (inside.get(name) ?? 0) + cpu() - c0);
    return out;
  };
}
const named = args.flatMap((a, i) => (a === '--module' ? [pathToFileURL(resolve(args[i + 1])).href] : []));
const mods = named.length ? named : ['./modules/native-sqlite-normal.mjs', './modules/intree-sqlite-wal.mjs'];
const results = [];
for (const [k, path] of mods.entries()) {
  const mod = await import(path);
  const storage = await mod.createStorage({ path: join(dir, `db${k}.sqlite`), server });
  const log = { on: false, calls: [] };
  const host = await createHost(server, core, recorder(storage, log), 'window');
  if (figure === 'window') await fill(host, 'w', 3000, 1);
  else await fill(host, 'b', 200, 100);
  if (figure === 'window') await windowPulls(host, 50);
  else await bootstrap(host, 'warm', 20_000);
  log.on = true;
  if (figure === 'window') await windowPulls(host, 1);
  else await bootstrap(host, 'rec', 20_000);
  log.on = false;
  // Per member name: the first recorded call's arguments (storage-level only).
  const seen = new Map();
  for (const c of log.calls) if (!c.name.startsWith('tx.') && c.name !== 'begin') {
    const e = seen.get(c.name) ?? { count: 0, args: c.args };
    e.count++;
    seen.set(c.name, e);
  }
  const rows = [];
  if (only) {
    const e = seen.get(only);
    const fn = storage[only].bind(storage);
    const end = Date.now() + loopSeconds * 1000;
    let n = 0;
    while (Date.now() < end) for (let i = 0; i < 100; i++, n++) await fn(...e.args);
    console.log(`${only}: ${n} calls`);
    break;
  }
  for (const [name, e] of seen) {
    const fn = storage[name].bind(storage);
    for (let i = 0; i < Math.min(50, calls); i++) await fn(...e.args);
    const c0 = cpu();
    for (let i = 0; i < calls; i++) await fn(...e.args);
    const us = (cpu() - c0) / calls;
    inside.clear();
    timing = true;
    for (let i = 0; i < calls; i++) await fn(...e.args);
    timing = false;
    const native = [...inside].map(([n, t]) => `${n} ${(t / calls).toFixed(1)}`).join(', ');
    rows.push({ name, perRequest: e.count / (figure === 'window' ? 1 : 20), us, native });
  }
  results.push({ label: mod.label, rows, txCalls: log.calls.filter((c) => c.name.startsWith('tx.') || c.name === 'begin').map((c) => c.name) });
}
for (const r of results) {
  console.log(`\n${r.label}`);
  for (const x of r.rows) console.log(`  ${x.name.padEnd(26)} ${x.perRequest.toFixed(2)}/req  ${x.us.toFixed(1)} µs CPU${x.native ? `  (native: ${x.native})` : ''}`);
  if (r.txCalls.length) console.log(`  in transactions: ${[...new Set(r.txCalls)].join(', ')}`);
}
if (args.includes("--keep")) console.log(`kept ${dir}`);
else rmSync(dir, { recursive: true, force: true });
