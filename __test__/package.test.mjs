// Package surface: exports, module loading, synchronous construction.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import pkg from '../index.js';
import { fixtureSchema } from './support/schema.mjs';

const require = createRequire(import.meta.url);

test('loads from ESM default import and from require with the same exports', () => {
  const viaRequire = require('..');
  assert.equal(viaRequire, pkg);
  for (const name of ['NativeStorage', 'SyncError', 'StorageQueryError', 'StorageConstraintError', 'DecodeError']) {
    assert.equal(typeof pkg[name], 'function', name);
  }
});

test('construction is synchronous, with or without options, and opens lazily', async () => {
  const a = new pkg.NativeStorage();
  const b = new pkg.NativeStorage({});
  const c = new pkg.NativeStorage({ url: 'sqlite::memory:' });
  try {
    for (const s of [a, b, c]) {
      assert.equal(typeof s, 'object');
      assert.equal(typeof s.then, 'undefined', 'not a promise');
    }
    // default storages are independent in-memory databases
    await a.touchPartition('p1', 1, 'e');
    assert.deepEqual(await a.listPartitions(), ['p1']);
    assert.deepEqual(await b.listPartitions(), []);
    await c.ensureSchema(fixtureSchema());
  } finally {
    for (const s of [a, b, c]) {
      const p = s.close();
      assert.ok(p && typeof p.then === 'function', 'close returns a promise');
      await p;
    }
  }
});

test('a storage that was never used closes cleanly', async () => {
  const s = new pkg.NativeStorage();
  await s.close();
});

test('every in-scope member exists on storage and transaction', async () => {
  const s = new pkg.NativeStorage();
  try {
    const storageMembers = [
      'ensureSchema', 'touchPartition', 'rotatePartitionLogEpoch', 'listPartitionRegistry', 'getPartitionLogEpoch',
      'begin', 'getMaxCommitSeq', 'getHorizonSeq', 'setHorizonSeq', 'pruneCommitsThrough', 'getCommitSeqBefore',
      'readServeGate', 'getRow', 'getPushResult', 'readCommitWindow', 'scanRows', 'getClientRecord', 'putClientRecord',
      'advanceClientCursor', 'updateClientCursor', 'getActiveClientCursorFloor', 'listClientCursors', 'listPartitions',
      'latestScopedChangeSeq', 'writerFenceAllows', 'close',
      'readCheckpoints', 'declareCheckpoint', 'claimCheckpoint', 'advanceCheckpoint', 'sourceCoverageSeq',
      'hasSourceChangesAbove', 'activateCheckpoint',
    ];
    for (const m of storageMembers) assert.equal(typeof s[m], 'function', m);
    const tx = await s.begin('p1');
    const txMembers = [
      'getRow', 'getTombstoneSeq', 'clearTombstone', 'getPushResult', 'scanRows', 'lockPartitionForPush',
      'lockPartitionForCommitValidation', 'commitRejectedPushResult', 'upsertRow', 'deleteRow', 'appendCommit',
      'putPushResult', 'readServeGate', 'setBlobRefs', 'commit', 'rollback', 'prefetchRows', 'advanceCheckpoint',
    ];
    for (const m of txMembers) assert.equal(typeof tx[m], 'function', `tx.${m}`);
    await tx.rollback();
  } finally {
    await s.close();
  }
});

test('an argument whose getter throws rejects the call, never throws synchronously', async () => {
  const s = new pkg.NativeStorage();
  try {
    const hostile = { get version() { throw new Error('getter'); } };
    let p;
    assert.doesNotThrow(() => {
      p = s.ensureSchema(hostile);
    });
    await assert.rejects(p, /getter/);
  } finally {
    await s.close();
  }
});
