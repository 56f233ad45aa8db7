// Where one storage call's time goes, layer by layer (bench/README.md,
// "Layers of a call"). Runs under node and bun:
//
//   bun bench/layers.mjs [--calls N] [--server PATH]
//
// For each member the host calls between and inside requests, on a SQLite
// file (WAL, synchronous=NORMAL) holding a few hundred commits:
//   call     µs per awaited call through the storage, as the host makes it
//   native   µs of that spent inside the addon's members (the member itself
//            and, for a storage-level write, the lease's begin and unlock),
//            timed by wrapping the binding's prototype
//   js       call − native: guards, the write queue, value conversion and
//            the promise
//   stubbed  µs per call with every native member answering a constant at
//            once: the JS layers alone, without what the answer costs to
//            cross
// With --server (a @syncular/server entry, as for bench/run.mjs) it adds
//   in-tree  the same member through upstream's SqliteServerStorage on the
//            runtime's own driver (bench/modules/intree-sqlite-wal.mjs), on
//            a file seeded the same way, and our call's ratio to it
// It adds the same statements through the runtime's own driver on the same
// file (bun:sqlite, or node:sqlite on Node ≥ 22.5), prepared once: the
// floor an in-process JS driver sets, which the in-tree storage runs on.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { push } from './lib/host.mjs';
import { batch } from './lib/workloads.mjs';
import { schema } from './lib/fixture.mjs';

const require = createRequire(import.meta.url);
const { NativeStorage } = require('../index.js');
const native = require('../lib/native.js');

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const CALLS = Number(option('--calls') ?? 50_000);
const serverPath = option('--server');
if (!Number.isSafeInteger(CALLS) || CALLS < 1000) throw new Error('--calls must be an integer ≥ 1000');

// The runtime's own SQLite driver: bun:sqlite, or node:sqlite (Node ≥ 22.5).
const DRIVER = typeof Bun !== 'undefined' ? 'bun:sqlite' : process.getBuiltinModule?.('node:sqlite') ? 'node:sqlite' : undefined;
async function openDriver(path) {
  if (DRIVER === 'bun:sqlite') {
    const { Database } = await import('bun:sqlite');
    return new Database(path);
  }
  if (DRIVER === 'node:sqlite') {
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    const db = new DatabaseSync(path);
    return { exec: (sql) => db.exec(sql), query: (sql) => db.prepare(sql), close: () => db.close() };
  }
  return undefined;
}

const P = native.NativeEngine.prototype;
const WRAPPED = ['getPushResult', 'getClientRecord', 'getMaxCommitSeq', 'getRow', 'touchPartition', 'putClientRecord', 'begin', 'unlock'];
let inside = 0;
const real = new Map(WRAPPED.map((m) => [m, P[m]]));
/** Each member's last answer: what the stubbed pass answers. */
const last = {};
function timeNative() {
  for (const m of WRAPPED) {
    const f = real.get(m);
    P[m] = function (...a) {
      const t = performance.now();
      try {
        return (last[m] = f.apply(this, a));
      } finally {
        inside += performance.now() - t;
      }
    };
  }
}

const dir = mkdtempSync(join(tmpdir(), 'syncular-layers-'));
const file = join(dir, 'sync.db');
const storage = new NativeStorage({ url: `sqlite:${file}`, synchronous: 'normal' });
const client = { clientId: 'layers-client', actorId: 'actor', wireVersion: 1, cursor: 10, subscriptions: [], updatedAtMs: 1 };

const members = [
  ['getPushResult', (s, i) => s.getPushResult('bench', 'bench-client', `seq-1-${i % 200}`)],
  ['getClientRecord', (s) => s.getClientRecord('bench', 'layers-client')],
  ['getMaxCommitSeq', (s) => s.getMaxCommitSeq('bench')],
  ['getRow', (s) => s.getRow('bench', 'tasks', 'row-0')],
  ['touchPartition', (s) => s.touchPartition('bench', Date.now(), 'layers-epoch')],
  ['putClientRecord', (s, i) => s.putClientRecord('bench', { ...client, updatedAtMs: i })],
];

async function seed(s) {
  await s.ensureSchema(schema);
  await s.touchPartition('bench', Date.now(), 'layers-epoch');
  for (let c = 0; c < 200; c++) await push(s, 'bench', `seq-1-${c}`, batch('row', 'p1', 1, c), c);
  await s.putClientRecord('bench', client);
}

async function perCall(fn) {
  for (let i = 0; i < 2000; i++) await fn(i);
  inside = 0;
  const t0 = performance.now();
  for (let i = 0; i < CALLS; i++) await fn(i);
  return { us: ((performance.now() - t0) * 1000) / CALLS, nativeUs: (inside * 1000) / CALLS };
}

try {
  await seed(storage);

  const rows = new Map();
  timeNative();
  for (const [name, fn] of members) rows.set(name, await perCall((i) => fn(storage, i)));

  // The JS layers alone: every member answers its last real answer at once.
  for (const m of WRAPPED) if (last[m] instanceof Promise) throw new Error(`layers: ${m} answered off-thread; the stubbed pass needs values`);
  for (const m of WRAPPED) P[m] = () => last[m];
  for (const [name, fn] of members) rows.get(name).stubbedUs = (await perCall((i) => fn(storage, i))).us;
  for (const m of WRAPPED) P[m] = real.get(m);

  if (serverPath !== undefined) {
    const server = await import(pathToFileURL(resolve(serverPath)).href);
    const { createStorage } = await import('./modules/intree-sqlite-wal.mjs');
    const intree = await createStorage({ server, path: join(dir, 'intree.db') });
    await seed(intree);
    for (const [name, fn] of members) rows.get(name).intreeUs = (await perCall((i) => fn(intree, i))).us;
  }

  const db = await openDriver(file);
  if (db !== undefined) {
    db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL');
    const pr = db.query('SELECT result FROM sync_push_results WHERE partition = ? AND client_id = ? AND client_commit_id = ?');
    const cr = db.query('SELECT * FROM sync_clients WHERE partition = ? AND client_id = ?');
    const mx = db.query('SELECT max_commit_seq FROM sync_partitions WHERE partition = ?');
    const up = db.query(
      'INSERT INTO sync_partition_registry (partition, log_epoch, last_authenticated_at_ms) VALUES (?, ?, ?) ON CONFLICT (partition) DO UPDATE SET last_authenticated_at_ms = excluded.last_authenticated_at_ms',
    );
    const sel = db.query('SELECT log_epoch, epoch_required, last_authenticated_at_ms FROM sync_partition_registry WHERE partition = ?');
    const pc = db.query(
      'INSERT OR REPLACE INTO sync_clients (partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    const floors = {
      getPushResult: async (i) => pr.get('bench', 'bench-client', `seq-1-${i % 200}`),
      getClientRecord: async () => cr.get('bench', 'layers-client'),
      getMaxCommitSeq: async () => mx.get('bench'),
      touchPartition: async () => {
        up.run('bench', 'layers-epoch', Date.now());
        return sel.get('bench');
      },
      putClientRecord: async (i) => pc.run('bench', 'layers-client', 'actor', 1, 10, JSON.stringify([]), i),
    };
    for (const [name, fn] of Object.entries(floors)) {
      try {
        rows.get(name).driverUs = (await perCall(fn)).us;
      } catch (err) {
        console.error(`layers: ${DRIVER} floor for ${name} skipped: ${err.message}`);
      }
    }
    db.close();
  }

  const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : `node ${process.version}`;
  const f = (x) => (x === undefined ? '' : x.toFixed(2));
  console.log(`${runtime}; ${CALLS} calls each; µs per call`);
  const intree = serverPath !== undefined;
  console.log(`| member | call | native | js | stubbed | ${DRIVER ?? 'driver'} |${intree ? ' in-tree | call / in-tree |' : ''}`);
  console.log(`|---|---|---|---|---|---|${intree ? '---|---|' : ''}`);
  for (const [name, r] of rows) {
    const tail = intree ? ` ${f(r.intreeUs)} | ${(r.us / r.intreeUs).toFixed(2)}× |` : '';
    console.log(`| ${name} | ${f(r.us)} | ${f(r.nativeUs)} | ${f(r.us - r.nativeUs)} | ${f(r.stubbedUs)} | ${f(r.driverUs)} |${tail}`);
  }
} finally {
  for (const m of WRAPPED) P[m] = real.get(m);
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
}
