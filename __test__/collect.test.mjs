// A storage its host drops, without close(), is collected, and with it its
// connections: nothing of the package (timers, caches, registries) may keep
// it alive. Upstream's own tests create storages they never close; a pinned
// storage keeps its PostgreSQL pool open until the server runs out of
// connection slots.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const program = `
const { NativeStorage } = require(${JSON.stringify(join(root, 'index.js'))});
const collected = new Set();
const registry = new FinalizationRegistry((name) => collected.add(name));
async function use(name, options) {
  const storage = new NativeStorage({ url: 'sqlite::memory:', ...options });
  registry.register(storage, name);
  // A transaction begun and finished (it starts the hygiene timer), and reads.
  const tx = await storage.begin('p');
  await tx.rollback();
  await storage.getMaxCommitSeq('p');
  await storage.touchPartition('p', 1, 'e');
}
(async () => {
  await use('default', {});
  await use('timeout', { transactionTimeoutMs: 1000, transactionWarnMs: 100 });
  for (let i = 0; i < 50 && collected.size < 2; i++) {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 20));
  }
  process.stdout.write(JSON.stringify([...collected].sort()));
})();
`;

test('a storage dropped without close() is collected', () => {
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', program], { encoding: 'utf8', timeout: 60_000 });
  assert.deepEqual(JSON.parse(out), ['default', 'timeout']);
});

// A host's loop of calls that settle at once is one job: it never returns
// to the event loop. A transaction that ended in it must be collectable
// then, not only after the job (a WeakRef to it would keep it alive until
// the job ends: 20,000 one-op pushes kept about as many transactions).
const ended = `
const { NativeStorage } = require(${JSON.stringify(join(root, 'index.js'))});
(async () => {
  const storage = new NativeStorage({ url: 'sqlite::memory:' });
  await storage.touchPartition('p', 1, 'e');
  const warm = await storage.begin('p');
  await warm.rollback();
  globalThis.gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < 20000; i++) {
    const tx = await storage.begin('p');
    if (i % 2) await tx.rollback();
    else await tx.commit();
  }
  // Still the same job: nothing has yielded to the event loop.
  globalThis.gc();
  const after = process.memoryUsage().heapUsed;
  process.stdout.write(JSON.stringify({ grownMb: (after - before) / 2 ** 20 }));
  await storage.close();
})();
`;

test('transactions that ended are collectable within the job that ran them', () => {
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', ended], { encoding: 'utf8', timeout: 60_000 });
  const { grownMb } = JSON.parse(out);
  assert.ok(grownMb < 8, `the heap kept ${grownMb.toFixed(1)} MB after 20,000 ended transactions`);
});
