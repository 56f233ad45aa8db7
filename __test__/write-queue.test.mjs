// The write queue of an engine with one writer (SQLite): a storage-level
// write that fails while it waited behind a transaction must give the
// write lease back, so writes after it still run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';

test('a queued storage-level write that fails releases the write lease', { timeout: 10_000 }, async () => {
  const s = new NativeStorage({ url: 'sqlite::memory:' });
  try {
    await s.ensureSchema(fixtureSchema());
    await s.touchPartition('p', 1, 'epoch-1');
    const tx = await s.begin('p');
    // Both queue behind the open transaction's lease.
    const failing = s.setHorizonSeq('p', -1);
    const next = s.setHorizonSeq('p', 0);
    await tx.commit();
    await assert.rejects(failing, (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT');
    await next;
    assert.equal(await s.getHorizonSeq('p'), 0);
    // And a later transaction still gets the lease.
    const again = await s.begin('p');
    await again.rollback();
  } finally {
    await s.close();
  }
});

// With nothing in line, a storage-level write runs in one call that begins
// and commits it. When another connection holds the file's write lock, that
// call runs nothing, and the write waits off the calling thread instead.
test('a storage-level write with nothing queued lands at once, or waits for another connection\'s lock', { timeout: 20_000 }, async () => {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'syncular-wq-'));
  const url = `sqlite:${join(dir, 'db.sqlite')}`;
  const a = new NativeStorage({ url });
  const b = new NativeStorage({ url, busyTimeoutMs: 10_000 });
  try {
    await a.ensureSchema(fixtureSchema());
    await b.ensureSchema(fixtureSchema());
    // Fired without await, it has landed before the next line runs.
    const first = b.touchPartition('p', 1, 'epoch-1');
    assert.equal((await a.listPartitionRegistry()).length, 1);
    await first;
    const tx = await a.begin('p');
    let landed = false;
    const touch = b.touchPartition('p', 2, 'epoch-1').then((entry) => {
      landed = true;
      return entry;
    });
    const put = b.putClientRecord('p', { clientId: 'c', actorId: 'u', cursor: 3, updatedAtMs: 2, subscriptions: [] });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(landed, false, 'waits while the other connection holds the lock');
    await tx.commit();
    assert.equal((await touch).lastAuthenticatedAtMs, 2);
    await put;
    assert.equal((await a.getClientRecord('p', 'c')).cursor, 3);
    const members = (await b.stats()).members;
    assert.equal(members.touchPartition.errors, 0);
    assert.equal(members.putClientRecord.errors, 0);
  } finally {
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
