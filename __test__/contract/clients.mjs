// Client records and cursors (contract S34–S39; storage-layout §12.2).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertSame, withStorage } from '../support/harness.mjs';

function record(clientId, extra = {}) {
  return {
    clientId,
    actorId: 'actor-1',
    wireVersion: 3,
    cursor: 10,
    updatedAtMs: 1000,
    subscriptions: [
      { id: 'sub-a', table: 'tasks', scopes: { project_id: ['p1', 'p2'], owner_id: ['u1'] } },
      { id: 'sub-b', table: 'notes', scopes: { project_id: [] } },
    ],
    ...extra,
  };
}

const byClient = (list) => [...list].sort((a, b) => (a.clientId < b.clientId ? -1 : a.clientId > b.clientId ? 1 : 0));

export function define(engine) {
  describe('client records', () => {
    test('put/get round-trips; absent is undefined; put replaces the whole record', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getClientRecord('p1', 'c1'), undefined);
        await storage.putClientRecord('p1', record('c1'));
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1'));
        const replaced = record('c1', { actorId: 'actor-2', wireVersion: 1, cursor: 3, updatedAtMs: 900, subscriptions: [] });
        await storage.putClientRecord('p1', replaced);
        assertSame(await storage.getClientRecord('p1', 'c1'), replaced);
        assert.strictEqual(await storage.getClientRecord('p2', 'c1'), undefined);
      }));

    test('listClientCursors lists every client of the partition', () =>
      withStorage(engine, async (storage) => {
        assert.deepEqual(await storage.listClientCursors('p1'), []);
        await storage.putClientRecord('p1', record('c2', { cursor: 7, updatedAtMs: 70 }));
        await storage.putClientRecord('p1', record('c1', { cursor: 5, updatedAtMs: 50 }));
        await storage.putClientRecord('p2', record('c9'));
        assertSame(byClient(await storage.listClientCursors('p1')), [
          { clientId: 'c1', cursor: 5, updatedAtMs: 50 },
          { clientId: 'c2', cursor: 7, updatedAtMs: 70 },
        ]);
      }));

    test('advanceClientCursor moves forward only, guarded by actor and epoch', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1, 'epoch-1');
        await storage.putClientRecord('p1', record('c1'));
        await storage.advanceClientCursor('p1', 'c1', 'actor-1', 'epoch-1', 15, 1500);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1', { cursor: 15, updatedAtMs: 1500 }));
        // never backwards, per field
        await storage.advanceClientCursor('p1', 'c1', 'actor-1', 'epoch-1', 12, 2000);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1', { cursor: 15, updatedAtMs: 2000 }));
        await storage.advanceClientCursor('p1', 'c1', 'actor-1', 'epoch-1', 20, 1800);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1', { cursor: 20, updatedAtMs: 2000 }));
        // guards: wrong actor, wrong epoch → nothing changes, nothing thrown
        await storage.advanceClientCursor('p1', 'c1', 'actor-2', 'epoch-1', 99, 9999);
        await storage.advanceClientCursor('p1', 'c1', 'actor-1', 'epoch-x', 99, 9999);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1', { cursor: 20, updatedAtMs: 2000 }));
        // missing record stays missing
        await storage.advanceClientCursor('p1', 'ghost', 'actor-1', 'epoch-1', 5, 5);
        assert.strictEqual(await storage.getClientRecord('p1', 'ghost'), undefined);
      }));

    test('advanceClientCursor does nothing for an unregistered partition', () =>
      withStorage(engine, async (storage) => {
        await storage.putClientRecord('p1', record('c1'));
        await storage.advanceClientCursor('p1', 'c1', 'actor-1', 'epoch-1', 50, 5000);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1'));
      }));

    test('concurrent advances commute to the maximum', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', 1, 'e');
        await storage.putClientRecord('p1', record('c1', { cursor: 0, updatedAtMs: 0 }));
        const cursors = [5, 17, 3, 42, 8, 41, 1, 30, 22, 9];
        await Promise.all(cursors.map((c, i) => storage.advanceClientCursor('p1', 'c1', 'actor-1', 'e', c, 100 + ((i * 7) % 10))));
        const rec = await storage.getClientRecord('p1', 'c1');
        assert.equal(rec.cursor, 42);
        assert.equal(rec.updatedAtMs, 109);
        assertSame(rec.subscriptions, record('c1').subscriptions);
      }));

    test('updateClientCursor is monotonic without guards; a missing record stays missing', () =>
      withStorage(engine, async (storage) => {
        await storage.putClientRecord('p1', record('c1'));
        await storage.updateClientCursor('p1', 'c1', 30, 3000);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1', { cursor: 30, updatedAtMs: 3000 }));
        await storage.updateClientCursor('p1', 'c1', 25, 2500);
        assertSame(await storage.getClientRecord('p1', 'c1'), record('c1', { cursor: 30, updatedAtMs: 3000 }));
        await storage.updateClientCursor('p1', 'nobody', 30, 3000);
        assert.strictEqual(await storage.getClientRecord('p1', 'nobody'), undefined);
        assert.strictEqual(await storage.getClientRecord('p2', 'c1'), undefined);
      }));

    test('getActiveClientCursorFloor is the minimum over recently updated clients, null when none', () =>
      withStorage(engine, async (storage) => {
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 0), null);
        await storage.putClientRecord('p1', record('c1', { cursor: 10, updatedAtMs: 1000 }));
        await storage.putClientRecord('p1', record('c2', { cursor: 5, updatedAtMs: 500 }));
        await storage.putClientRecord('p1', record('c3', { cursor: 7, updatedAtMs: 2000 }));
        await storage.putClientRecord('p2', record('c4', { cursor: 1, updatedAtMs: 5000 }));
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 0), 5);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 500), 5);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 501), 7);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 1000), 7);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 2000), 7);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p1', 2001), null);
        assert.strictEqual(await storage.getActiveClientCursorFloor('p3', 0), null);
      }));

    test('ClientSubscription.schemaVersion (0.30.6) is stored and returned exactly; absent stays absent', () =>
      withStorage(engine, async (storage) => {
        const subscriptions = [
          { id: 'v1', table: 'tasks', scopes: { project_id: ['p1'] }, schemaVersion: 1 },
          { id: 'v0', table: 'tasks', scopes: { project_id: ['p2'] }, schemaVersion: 0 },
          { id: 'vmax', table: 'notes', scopes: { project_id: [] }, schemaVersion: Number.MAX_SAFE_INTEGER },
          { id: 'none', table: 'notes', scopes: { project_id: ['p3'] } },
        ];
        await storage.touchPartition('p1', 1, 'epoch-1');
        await storage.putClientRecord('p1', record('c1', { subscriptions }));
        const got = await storage.getClientRecord('p1', 'c1');
        assertSame(got.subscriptions, subscriptions);
        for (const [i, sub] of got.subscriptions.entries()) {
          assert.strictEqual(sub.schemaVersion, subscriptions[i].schemaVersion);
        }
        assert.ok(!Object.hasOwn(got.subscriptions[3], 'schemaVersion'), 'no schemaVersion key when none was given');
        // Cursor moves keep the subscriptions as they are.
        await storage.advanceClientCursor('p1', 'c1', 'actor-1', 'epoch-1', 15, 1500);
        await storage.updateClientCursor('p1', 'c1', 16, 1600);
        assertSame((await storage.getClientRecord('p1', 'c1')).subscriptions, subscriptions);
        // A later put replaces the version with the record.
        const bumped = subscriptions.map((s) => (s.id === 'v1' ? { ...s, schemaVersion: 2 } : s));
        await storage.putClientRecord('p1', record('c1', { subscriptions: bumped }));
        assert.strictEqual((await storage.getClientRecord('p1', 'c1')).subscriptions[0].schemaVersion, 2);
      }));

    test('client records need no ensureSchema', () =>
      withStorage(
        engine,
        async (storage) => {
          await storage.putClientRecord('p1', record('c1'));
          assertSame(await storage.getClientRecord('p1', 'c1'), record('c1'));
        },
        { ensure: false },
      ));
  });
}
