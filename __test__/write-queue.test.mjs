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
