// Durable reactions (contract T14, S22–S29; storage-layout §2.10, §5.5, §15, §16).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StorageConstraintError, StorageQueryError } from '../support/package.mjs';
import { assertSame, rejectsClearly, stillPending, withStorage, writeCommit } from '../support/harness.mjs';

const NOW = 1_700_000_000_000;
const MAX = Number.MAX_SAFE_INTEGER;

function reaction(key, extra = {}) {
  return {
    idempotencyKey: key,
    type: 'email.send',
    version: 1,
    payload: { messageId: `m-${key}`, to: ['a@x', 'b@x'], nested: { n: 1.5, ok: true, none: null } },
    sourceClientId: 'c1',
    sourceClientCommitId: 'commit-1',
    sourceCommitSeq: 1,
    createdAtMs: NOW,
    maxAttempts: 3,
    ...extra,
  };
}

/** The stored form of a freshly enqueued reaction. */
function pending(r) {
  return { ...r, status: 'pending', attempts: 0, availableAtMs: r.createdAtMs };
}

async function enqueue(storage, partition, list) {
  const tx = await storage.begin(partition);
  try {
    await tx.enqueueReactions(list);
    await tx.commit();
  } catch (err) {
    await tx.rollback();
    throw err;
  }
}

function claimQuery(extra = {}) {
  return { leaseOwner: 'w1', types: ['email.send'], nowMs: NOW, leaseDurationMs: 100, limit: 10, ...extra };
}

const keys = (list) => list.map((r) => r.idempotencyKey);

async function claimOne(storage, key, owner = 'w1', nowMs = NOW) {
  const r = await storage.getReaction('p1', key);
  const claimed = await storage.claimReactions('p1', claimQuery({ leaseOwner: owner, types: [r.type], nowMs, limit: 1 }));
  assert.deepEqual(keys(claimed), [key], `claim ${key}`);
  return claimed[0];
}

export function define(engine) {
  describe('reactions', () => {
    test('enqueue stores pending rows that commit and roll back with the transaction', () =>
      withStorage(engine, async (storage) => {
        const tx = await storage.begin('p1');
        const seq = await tx.appendCommit({ clientId: 'c1', clientCommitId: 'commit-1', actorId: 'a', createdAtMs: NOW, changes: [] });
        assert.equal(await tx.enqueueReactions([reaction('k1', { sourceCommitSeq: seq })]), undefined);
        await tx.commit();
        const stored = await storage.getReaction('p1', 'k1');
        assertSame(stored, pending(reaction('k1', { sourceCommitSeq: seq })));
        for (const field of ['leaseOwner', 'leaseExpiresAtMs', 'completedAtMs', 'lastFailure']) {
          assert.ok(!(field in stored), `${field} omitted`);
        }

        const rolled = await storage.begin('p1');
        await rolled.appendCommit({ clientId: 'c1', clientCommitId: 'commit-2', actorId: 'a', createdAtMs: NOW, changes: [] });
        await rolled.enqueueReactions([reaction('k2'), reaction('k3')]);
        await rolled.rollback();
        assert.strictEqual(await storage.getReaction('p1', 'k2'), undefined);
        assert.strictEqual(await storage.getReaction('p1', 'k3'), undefined);
        assert.equal(await storage.getMaxCommitSeq('p1'), 1);
        // partition-local
        assert.strictEqual(await storage.getReaction('p2', 'k1'), undefined);
        assert.deepEqual(await storage.listReactions('p2', { limit: 10 }), []);
      }));

    test('payload and failure JSON keep their values; an empty batch is a no-op', () =>
      withStorage(engine, async (storage) => {
        const payloads = [null, 0, 'text', [1, 'two', [3]], { a: { b: [true, false, null] }, 'ü ключ': '😀' }];
        await enqueue(storage, 'p1', payloads.map((payload, i) => reaction(`k${i}`, { payload })));
        for (const [i, payload] of payloads.entries()) {
          assert.deepStrictEqual((await storage.getReaction('p1', `k${i}`)).payload, payload);
        }
        await enqueue(storage, 'p1', []);
        assert.equal((await storage.listReactions('p1', { limit: 100 })).length, payloads.length);
      }));

    test('a repeated idempotency key is a raw primary-key error, not a typed one', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1')]);
        const tx = await storage.begin('p1');
        let caught;
        await assert.rejects(tx.enqueueReactions([reaction('k1', { type: 'other' })]), (err) => {
          caught = err;
          return true;
        });
        assert.ok(!(caught instanceof StorageConstraintError), 'not a StorageConstraintError');
        assert.ok(!(caught instanceof StorageQueryError), 'not a StorageQueryError');
        // the engine's own primary-key code: SQLite's extended code, PostgreSQL's SQLSTATE
        const primaryKey = engine.dialect === 'postgres' ? /^23505$/ : /^SQLITE_CONSTRAINT/;
        assert.match(String(caught.code), primaryKey);
        await tx.rollback();
        // duplicates inside one batch too
        const tx2 = await storage.begin('p1');
        await assert.rejects(tx2.enqueueReactions([reaction('k2'), reaction('k2')]), (err) => primaryKey.test(err.code));
        await tx2.rollback();
        assert.strictEqual(await storage.getReaction('p1', 'k2'), undefined);
        assert.equal((await storage.getReaction('p1', 'k1')).type, 'email.send');
        // the same key in another partition is a different reaction
        await enqueue(storage, 'p2', [reaction('k1')]);
        assert.ok(await storage.getReaction('p2', 'k1'));
      }));

    test('claim leases due rows: status, attempts, owner, expiry', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1'), reaction('later', { createdAtMs: NOW + 50 })]);
        const claimed = await storage.claimReactions('p1', claimQuery({ leaseDurationMs: 250 }));
        assertSame(claimed, [{ ...pending(reaction('k1')), status: 'leased', attempts: 1, leaseOwner: 'w1', leaseExpiresAtMs: NOW + 250 }]);
        assertSame(await storage.getReaction('p1', 'k1'), claimed[0]);
        // not due yet, and a live lease is not claimable
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ nowMs: NOW + 49 })), []);
        assert.deepEqual(keys(await storage.claimReactions('p1', claimQuery({ nowMs: NOW + 50 }))), ['later']);
      }));

    test('claim returns [] for empty types or limit ≤ 0 and changes nothing', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1')]);
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ types: [] })), []);
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ limit: 0 })), []);
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ limit: -5 })), []);
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ types: ['other.type'] })), []);
        assert.deepEqual(await storage.claimReactions('p2', claimQuery()), []);
        assertSame(await storage.getReaction('p1', 'k1'), pending(reaction('k1')));
      }));

    test('lease expiry is capped at Number.MAX_SAFE_INTEGER', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1'), reaction('k2')]);
        const [a] = await storage.claimReactions('p1', claimQuery({ leaseDurationMs: MAX, limit: 1 }));
        assert.equal(a.leaseExpiresAtMs, MAX);
        const [b] = await storage.claimReactions('p1', claimQuery({ leaseDurationMs: MAX - NOW, limit: 1 }));
        assert.equal(b.leaseExpiresAtMs, MAX);
        assert.equal(typeof b.leaseExpiresAtMs, 'number');
      }));

    test('claim candidate order: availability, then createdAtMs, then key; LIMIT picks the first', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [
          reaction('c', { createdAtMs: NOW - 30 }),
          reaction('b', { createdAtMs: NOW - 20 }),
          reaction('a', { createdAtMs: NOW - 20 }),
          reaction('z', { createdAtMs: NOW - 40 }),
        ]);
        // push 'z' (oldest) to a later availability through a retry
        await claimOne(storage, 'z', 'w0', NOW - 40);
        assert.equal(await storage.failReaction('p1', 'z', { leaseOwner: 'w0', failure: { code: 'x', atMs: NOW - 39 }, retryAtMs: NOW - 10 }), true);
        const order = [];
        for (let i = 0; i < 4; i++) {
          order.push(...keys(await storage.claimReactions('p1', claimQuery({ limit: 1, leaseDurationMs: 1000 }))));
        }
        assert.deepEqual(order, ['c', 'a', 'b', 'z']);
      }));

    test('expired leases compete by expiry against pending rows by availability', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('old', { createdAtMs: NOW - 100 }), reaction('new', { createdAtMs: NOW - 10 })]);
        await claimOne(storage, 'old', 'w0', NOW - 100); // lease expires at NOW (100 ms)
        const [first] = await storage.claimReactions('p1', claimQuery({ limit: 1 }));
        // 'new' is available at NOW - 10, the expired lease at NOW
        assert.equal(first.idempotencyKey, 'new');
        const [second] = await storage.claimReactions('p1', claimQuery({ limit: 1, leaseOwner: 'w2' }));
        assertSame(second, { ...pending(reaction('old', { createdAtMs: NOW - 100 })), status: 'leased', attempts: 2, leaseOwner: 'w2', leaseExpiresAtMs: NOW + 100 });
      }));

    test('claim results sort by createdAtMs, then idempotencyKey with localeCompare', () =>
      withStorage(engine, async (storage) => {
        // Byte order: 'B' < 'a' < 'b'; localeCompare: 'a' < 'b' < 'B'.
        await enqueue(storage, 'p1', [
          reaction('b'),
          reaction('B'),
          reaction('a'),
          reaction('Z-early', { createdAtMs: NOW - 1 }),
        ]);
        // The candidate LIMIT follows SQL (byte) order of the key...
        const [firstTie] = await storage.claimReactions('p1', claimQuery({ limit: 1, nowMs: NOW - 1 }));
        assert.equal(firstTie.idempotencyKey, 'Z-early');
        const picked = await storage.claimReactions('p1', claimQuery({ limit: 1 }));
        assert.deepEqual(keys(picked), ['B']);
        await storage.completeReaction('p1', 'B', 'w1', NOW);
        await storage.retryReaction('p1', 'B', NOW); // completed → not retryable: stays completed
        assert.equal((await storage.getReaction('p1', 'B')).status, 'completed');
        // ...while the returned list is in host order.
        await enqueue(storage, 'p1', [reaction('A'), reaction('c', { createdAtMs: NOW - 5 })]);
        const all = await storage.claimReactions('p1', claimQuery({ nowMs: NOW + 1000 }));
        assert.deepEqual(keys(all), ['c', 'Z-early', 'a', 'A', 'b']);
      }));

    test('concurrent claims never hand out a row twice', () =>
      withStorage(engine, async (storage) => {
        const list = Array.from({ length: 25 }, (_, i) => reaction(`k${String(i).padStart(2, '0')}`, { createdAtMs: NOW - i }));
        await enqueue(storage, 'p1', list);
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => storage.claimReactions('p1', claimQuery({ leaseOwner: `w${i}`, limit: 4 }))),
        );
        const claimed = results.flat();
        assert.equal(claimed.length, 25);
        assert.equal(new Set(keys(claimed)).size, 25);
        for (const [i, res] of results.entries()) {
          for (const r of res) {
            assert.equal(r.leaseOwner, `w${i}`);
            assert.equal(r.attempts, 1);
            assertSame(await storage.getReaction('p1', r.idempotencyKey), r);
          }
        }
        // submission order: the first claimers got the oldest rows
        assert.deepEqual(keys(results[0]), ['k24', 'k23', 'k22', 'k21']);
        // two claimers for one row
        await enqueue(storage, 'p2', [reaction('only')]);
        const [left, right] = await Promise.all([
          storage.claimReactions('p2', claimQuery({ leaseOwner: 'l', limit: 1 })),
          storage.claimReactions('p2', claimQuery({ leaseOwner: 'r', limit: 1 })),
        ]);
        assert.equal(left.length + right.length, 1);
        assert.deepEqual(keys(left), ['only']);
      }));

    test('a claim fired without await is visible to the next read; a claim waits for an open transaction', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1')]);
        const claiming = storage.claimReactions('p1', claimQuery());
        assert.equal((await storage.getReaction('p1', 'k1')).status, 'leased');
        assert.equal((await claiming).length, 1);
        // a claim queued behind an open push sees its reactions once it commits
        const tx = await storage.begin('p1');
        await tx.enqueueReactions([reaction('k2')]);
        const queued = storage.claimReactions('p1', claimQuery({ leaseOwner: 'w2' }));
        if (engine.dialect === 'postgres') {
          // no storage-wide lease: the claim runs at once and cannot see the
          // uncommitted reaction; after the commit the next claim gets it
          assert.deepEqual(await queued, []);
          await tx.commit();
          assert.deepEqual(keys(await storage.claimReactions('p1', claimQuery({ leaseOwner: 'w2' }))), ['k2']);
          return;
        }
        assert.ok(await stillPending(queued, 50), 'claim waits for the write lease');
        await tx.commit();
        assert.deepEqual(keys(await queued), ['k2']);
      }));

    test('expired leases are reclaimed; stale owners cannot complete, extend or fail', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1')]);
        await claimOne(storage, 'k1', 'lease-1');
        assert.equal(await storage.extendReactionLease('p1', 'k1', 'lease-1', NOW + 200), true);
        assert.equal((await storage.getReaction('p1', 'k1')).leaseExpiresAtMs, NOW + 200);
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ leaseOwner: 'lease-2', nowMs: NOW + 199 })), []);
        const [re] = await storage.claimReactions('p1', claimQuery({ leaseOwner: 'lease-2', nowMs: NOW + 200 }));
        assert.equal(re.leaseOwner, 'lease-2');
        assert.equal(re.attempts, 2);
        assert.equal(re.leaseExpiresAtMs, NOW + 300);
        const before = await storage.getReaction('p1', 'k1');
        assert.equal(await storage.completeReaction('p1', 'k1', 'lease-1', NOW + 201), false);
        assert.equal(await storage.extendReactionLease('p1', 'k1', 'lease-1', NOW + 999), false);
        assert.equal(await storage.failReaction('p1', 'k1', { leaseOwner: 'lease-1', failure: { code: 'x', atMs: 1 } }), false);
        assertSame(await storage.getReaction('p1', 'k1'), before);
        assert.equal(await storage.completeReaction('p1', 'k1', 'lease-2', NOW + 201), true);
        const done = await storage.getReaction('p1', 'k1');
        assertSame(done, { ...pending(reaction('k1')), status: 'completed', attempts: 2, completedAtMs: NOW + 201 });
        // terminal: a second completion, an extension, a failure all miss
        assert.equal(await storage.completeReaction('p1', 'k1', 'lease-2', NOW + 300), false);
        assert.equal(await storage.extendReactionLease('p1', 'k1', 'lease-2', NOW + 999), false);
        assert.equal(await storage.failReaction('p1', 'k1', { leaseOwner: 'lease-2', failure: { code: 'x', atMs: 1 } }), false);
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ nowMs: MAX })), []);
        // unknown keys and pending rows
        assert.equal(await storage.completeReaction('p1', 'ghost', 'lease-2', 1), false);
        await enqueue(storage, 'p1', [reaction('k2')]);
        assert.equal(await storage.completeReaction('p1', 'k2', 'lease-2', 1), false);
        assert.equal(await storage.extendReactionLease('p1', 'k2', 'lease-2', 1), false);
        // another partition's lease does not match
        assert.equal(await storage.completeReaction('p2', 'k1', 'lease-2', 1), false);
      }));

    test('fail with retryAtMs backs off; without it dead-letters; retryReaction revives dead letters only', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1')]);
        await claimOne(storage, 'k1', 'lease-1');
        const failure1 = { code: 'email.unavailable', atMs: NOW + 1, details: { status: 503, retry: [1, 2], why: null } };
        assert.equal(await storage.failReaction('p1', 'k1', { leaseOwner: 'lease-1', failure: failure1, retryAtMs: NOW + 50 }), true);
        assertSame(await storage.getReaction('p1', 'k1'), {
          ...pending(reaction('k1')),
          attempts: 1,
          availableAtMs: NOW + 50,
          lastFailure: failure1,
        });
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ nowMs: NOW + 49 })), []);
        const [again] = await storage.claimReactions('p1', claimQuery({ nowMs: NOW + 50 }));
        assert.equal(again.attempts, 2);
        assertSame(again.lastFailure, failure1, 'the last failure stays while leased');

        const failure2 = { code: 'email.invalid', atMs: NOW + 51 };
        assert.equal(await storage.failReaction('p1', 'k1', { leaseOwner: 'w1', failure: failure2 }), true);
        const dead = await storage.getReaction('p1', 'k1');
        assertSame(dead, { ...pending(reaction('k1')), status: 'dead-letter', attempts: 2, availableAtMs: NOW + 51, lastFailure: failure2 });
        assert.ok(!('details' in dead.lastFailure));
        assert.deepEqual(await storage.claimReactions('p1', claimQuery({ nowMs: MAX })), [], 'dead letters are never claimed');

        assert.equal(await storage.retryReaction('p1', 'k1', NOW + 60), true);
        assertSame(await storage.getReaction('p1', 'k1'), { ...pending(reaction('k1')), availableAtMs: NOW + 60 });
        assert.equal(await storage.retryReaction('p1', 'k1', NOW + 70), false, 'pending is not a dead letter');
        await claimOne(storage, 'k1', 'w1', NOW + 60);
        assert.equal(await storage.retryReaction('p1', 'k1', NOW + 70), false, 'leased is not a dead letter');
        assert.equal(await storage.retryReaction('p1', 'ghost', NOW), false);
      }));

    test('storage does not enforce maxAttempts', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1', { maxAttempts: 1 })]);
        for (let i = 1; i <= 3; i++) {
          const [r] = await storage.claimReactions('p1', claimQuery({ nowMs: NOW + i * 1000 }));
          assert.equal(r.attempts, i);
          assert.equal(r.maxAttempts, 1);
        }
      }));

    test('completion keeps the last failure; retry clears it', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [reaction('k1'), reaction('k2')]);
        await claimOne(storage, 'k1');
        await storage.failReaction('p1', 'k1', { leaseOwner: 'w1', failure: { code: 'x', atMs: NOW }, retryAtMs: NOW });
        await claimOne(storage, 'k1');
        assert.equal(await storage.completeReaction('p1', 'k1', 'w1', NOW + 5), true);
        const done = await storage.getReaction('p1', 'k1');
        assertSame(done, { ...pending(reaction('k1')), status: 'completed', attempts: 2, completedAtMs: NOW + 5, lastFailure: { code: 'x', atMs: NOW } });
        await claimOne(storage, 'k2');
        await storage.failReaction('p1', 'k2', { leaseOwner: 'w1', failure: { code: 'y', atMs: NOW + 1, details: { a: 1 } } });
        assert.equal(await storage.retryReaction('p1', 'k2', NOW + 2), true);
        assertSame(await storage.getReaction('p1', 'k2'), { ...pending(reaction('k2')), availableAtMs: NOW + 2 });
      }));

    test('listReactions: newest first, key descending on ties, optional filters, limit', () =>
      withStorage(engine, async (storage) => {
        await enqueue(storage, 'p1', [
          reaction('a', { createdAtMs: NOW }),
          reaction('b', { createdAtMs: NOW }),
          reaction('c', { createdAtMs: NOW + 5, type: 'push.notify' }),
          reaction('d', { createdAtMs: NOW - 5 }),
        ]);
        await enqueue(storage, 'p2', [reaction('x')]);
        assert.deepEqual(keys(await storage.listReactions('p1', { limit: 10 })), ['c', 'b', 'a', 'd']);
        assert.deepEqual(keys(await storage.listReactions('p1', { limit: 2 })), ['c', 'b']);
        assert.deepEqual(keys(await storage.listReactions('p1', { limit: 0 })), []);
        assert.deepEqual(keys(await storage.listReactions('p1', { types: ['push.notify'], limit: 10 })), ['c']);
        assert.deepEqual(keys(await storage.listReactions('p1', { types: [], statuses: [], limit: 10 })), ['c', 'b', 'a', 'd']);
        await claimOne(storage, 'd');
        assert.deepEqual(keys(await storage.listReactions('p1', { statuses: ['leased'], limit: 10 })), ['d']);
        assert.deepEqual(keys(await storage.listReactions('p1', { statuses: ['pending', 'leased'], types: ['email.send'], limit: 10 })), ['b', 'a', 'd']);
        assert.deepEqual(keys(await storage.listReactions('p1', { statuses: ['dead-letter'], limit: 10 })), []);
        const [c] = await storage.listReactions('p1', { types: ['push.notify'], limit: 1 });
        assertSame(c, pending(reaction('c', { createdAtMs: NOW + 5, type: 'push.notify' })));
      }));

    test('pruneReactions deletes at most limit aged terminal rows, oldest first, with strict cutoffs', () =>
      withStorage(engine, async (storage) => {
        const types = ['pending', 'leased', 'done-old', 'done-older', 'done-boundary', 'dead-old', 'dead-boundary'];
        await enqueue(storage, 'p1', types.map((t) => reaction(t, { type: `r.${t}` })));
        await claimOne(storage, 'leased', 'o');
        const complete = async (key, at) => {
          await claimOne(storage, key, 'o');
          assert.equal(await storage.completeReaction('p1', key, 'o', at), true);
        };
        const kill = async (key, at) => {
          await claimOne(storage, key, 'o');
          assert.equal(await storage.failReaction('p1', key, { leaseOwner: 'o', failure: { code: 'x', atMs: at } }), true);
        };
        await complete('done-old', NOW + 30);
        await complete('done-older', NOW + 10);
        await complete('done-boundary', NOW + 200);
        await kill('dead-old', NOW + 20);
        await kill('dead-boundary', NOW + 200);
        const cut = { completedBeforeMs: NOW + 200, deadLetterBeforeMs: NOW + 200 };
        assert.deepEqual(await storage.pruneReactions('p1', { ...cut, limit: 0 }), { completed: 0, deadLetter: 0 });
        assert.deepEqual(await storage.pruneReactions('p1', { ...cut, limit: -1 }), { completed: 0, deadLetter: 0 });
        assert.equal((await storage.listReactions('p1', { limit: 100 })).length, 7);
        // oldest first across both kinds: done-older (10), dead-old (20), done-old (30)
        assert.deepEqual(await storage.pruneReactions('p1', { ...cut, limit: 1 }), { completed: 1, deadLetter: 0 });
        assert.strictEqual(await storage.getReaction('p1', 'done-older'), undefined);
        assert.deepEqual(await storage.pruneReactions('p1', { ...cut, limit: 1 }), { completed: 0, deadLetter: 1 });
        assert.strictEqual(await storage.getReaction('p1', 'dead-old'), undefined);
        assert.deepEqual(await storage.pruneReactions('p1', { ...cut, limit: 10 }), { completed: 1, deadLetter: 0 });
        assert.deepEqual(await storage.pruneReactions('p1', { ...cut, limit: 10 }), { completed: 0, deadLetter: 0 });
        assert.deepEqual(keys(await storage.listReactions('p1', { limit: 100 })).sort(), ['dead-boundary', 'done-boundary', 'leased', 'pending']);
        // other partitions are untouched; pending and leased rows never go
        await enqueue(storage, 'p2', [reaction('q')]);
        const all = { completedBeforeMs: MAX, deadLetterBeforeMs: MAX, limit: 100 };
        assert.deepEqual(await storage.pruneReactions('p1', all), { completed: 1, deadLetter: 1 });
        assert.deepEqual(keys(await storage.listReactions('p1', { limit: 100 })).sort(), ['leased', 'pending']);
        assert.ok(await storage.getReaction('p2', 'q'));
      }));

    test('reactions survive commit-log pruning', () =>
      withStorage(engine, async (storage) => {
        await storage.touchPartition('p1', NOW, 'epoch-1');
        const tx = await storage.begin('p1');
        const seq = await tx.appendCommit({ clientId: 'c1', clientCommitId: 'commit-1', actorId: 'a', createdAtMs: NOW, changes: [] });
        await tx.enqueueReactions([reaction('k1', { sourceCommitSeq: seq }), reaction('k2', { sourceCommitSeq: seq, createdAtMs: NOW - 1 })]);
        await tx.commit();
        await claimOne(storage, 'k2');
        await storage.completeReaction('p1', 'k2', 'w1', NOW);
        await writeCommit(storage, 'p1', []);
        assert.deepEqual(await storage.pruneCommitsThrough('p1', { logEpoch: 'epoch-1', throughSeq: 2 }), { previousHorizonSeq: 0, horizonSeq: 2, removedCommits: 2 });
        assert.equal(await storage.pruneCommitsThrough('p1', 5), 0);
        assertSame(await storage.getReaction('p1', 'k1'), pending(reaction('k1', { sourceCommitSeq: 1 })));
        assert.equal((await storage.getReaction('p1', 'k2')).status, 'completed');
        assert.deepEqual(keys(await storage.claimReactions('p1', claimQuery())), ['k1']);
      }));

    test('reaction members reject bad input instead of throwing', () =>
      withStorage(engine, async (storage) => {
        const tx = await storage.begin('p1');
        const txCases = {
          'enqueueReactions(null)': () => tx.enqueueReactions(null),
          'enqueueReactions([42])': () => tx.enqueueReactions([42]),
          'enqueueReactions bad createdAtMs': () => tx.enqueueReactions([reaction('k', { createdAtMs: 'now' })]),
          'enqueueReactions fractional version': () => tx.enqueueReactions([reaction('k', { version: 1.5 })]),
          'enqueueReactions missing key': () => tx.enqueueReactions([reaction(undefined)]),
        };
        for (const [label, call] of Object.entries(txCases)) await rejectsClearly(call, label);
        await tx.rollback();
        const cases = {
          'claimReactions(p, null)': () => storage.claimReactions('p1', null),
          'claimReactions types not array': () => storage.claimReactions('p1', claimQuery({ types: 'email.send' })),
          'claimReactions nowMs string': () => storage.claimReactions('p1', claimQuery({ nowMs: 'x' })),
          'claimReactions NaN duration': () => storage.claimReactions('p1', claimQuery({ leaseDurationMs: Number.NaN })),
          'completeReaction bad time': () => storage.completeReaction('p1', 'k', 'o', 'x'),
          'extendReactionLease bad time': () => storage.extendReactionLease('p1', 'k', 'o', {}),
          'failReaction(p, k, null)': () => storage.failReaction('p1', 'k', null),
          'failReaction no failure': () => storage.failReaction('p1', 'k', { leaseOwner: 'o' }),
          'failReaction bad retryAtMs': () => storage.failReaction('p1', 'k', { leaseOwner: 'o', failure: { code: 'x', atMs: 1 }, retryAtMs: 'soon' }),
          'retryReaction bad now': () => storage.retryReaction('p1', 'k', null),
          'getReaction(p, 42)': () => storage.getReaction('p1', 42),
          'listReactions(p, null)': () => storage.listReactions('p1', null),
          'listReactions statuses not array': () => storage.listReactions('p1', { statuses: 'pending', limit: 1 }),
          'listReactions limit string': () => storage.listReactions('p1', { limit: 'ten' }),
          'pruneReactions(p)': () => storage.pruneReactions('p1'),
          'pruneReactions bad cutoff': () => storage.pruneReactions('p1', { completedBeforeMs: 'x', deadLetterBeforeMs: 1, limit: 1 }),
        };
        for (const [label, call] of Object.entries(cases)) await rejectsClearly(call, label);
        // the storage still works
        await enqueue(storage, 'p1', [reaction('k1')]);
        assert.equal((await storage.claimReactions('p1', claimQuery())).length, 1);
      }));
  });
}
