// Errors through the host's classes, against a real @syncular/server tree
// (issue 25): a push violating a unique index is the same durable
// rejection as with the in-tree storage, and a refusal whose code the
// host's StorageQueryError does not know still says what is wrong. The
// programs under __test__/host/ run under bun; this file checks what they
// saw. Skipped, with the reason, without SYNCULAR_UPSTREAM_TREE.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines, freshPgSchema, tempDbPath } from './support/engines.mjs';
import { hostTest, runHost } from './support/upstream.mjs';

const postgres = engines.find((e) => e.name === 'postgres');

/** Each engine: the host programs' arguments naming a fresh database of it. */
const targets = [
  { name: 'sqlite-file', push: () => [`sqlite:${tempDbPath()}`], query: () => ['sqlite', tempDbPath()] },
  ...(postgres
    ? [
        {
          name: 'postgres',
          push: () => [postgres.requireUrl(), freshPgSchema()],
          query: () => ['postgres', postgres.requireUrl(), freshPgSchema()],
        },
      ]
    : []),
];

describe('a push violating a unique index, through upstream handleSyncRequest', hostTest, () => {
  const rejected = { status: 'rejected', commitSeq: null, results: [{ opIndex: 1, status: 'error', code: 'sync.constraint_violation' }] };

  /** What the in-tree storage answers, the reference every engine must match. */
  function assertDurableRejection(seen) {
    assert.deepEqual(seen.first, { status: 'applied', commitSeq: 1, results: [{ opIndex: 0, status: 'applied', code: null }] });
    // Rejected (not thrown), naming the violating operation; then the same
    // answer to a retry of that commit, from the stored result.
    assert.deepEqual(seen.second, rejected);
    assert.deepEqual(seen.retry, rejected);
    assert.deepEqual(seen.stored, { status: 'rejected', codes: ['sync.constraint_violation'] });
    // Nothing of the rejected commit was written.
    assert.deepEqual(seen.rowIds, ['r1']);
    assert.equal(seen.maxCommitSeq, 1);
  }

  test('in-tree SQLite storage (the reference)', async () => {
    assertDurableRejection(await runHost('constraint-push.ts', ['in-tree', tempDbPath()]));
  });

  for (const target of targets) {
    test(`${target.name}, errors: server`, async () => {
      assertDurableRejection(await runHost('constraint-push.ts', ['native', ...target.push()]));
    });
  }
});

describe("refusals the host's StorageQueryError has no message for, errors: server", hostTest, () => {
  for (const target of targets) {
    test(target.name, async () => {
      const { layout, prune } = await runHost('query-errors.ts', target.query());

      // A row table missing a column at the stored version.
      assert.equal(layout.instanceOfHost, true);
      assert.equal(layout.name, 'StorageQueryError');
      assert.equal(layout.code, 'sync.storage.physical_layout_mismatch');
      const { fix, ...where } = layout.details;
      assert.deepEqual(where, { table: 'tasks', reason: 'missing_column', column: 'title' });
      assert.equal(typeof fix, 'string');
      for (const text of [layout.message, layout.string, layout.stackHead, layout.inspect]) {
        assert.match(text, /sync\.storage\.physical_layout_mismatch/);
        assert.match(text, /table=tasks, reason=missing_column, column=title, fix=/);
      }
      assert.match(layout.string, /^StorageQueryError: /);
      assert.deepEqual(layout.json, { name: 'StorageQueryError', code: 'sync.storage.physical_layout_mismatch', details: layout.details });

      // A bad prune cursor (a code newer than 0.15.48).
      assert.equal(prune.instanceOfHost, true);
      assert.equal(prune.code, 'sync.storage.invalid_prune_cursor');
      assert.match(prune.string, /^StorageQueryError: .+\[sync\.storage\.invalid_prune_cursor\]$/);
      assert.deepEqual(prune.json, { name: 'StorageQueryError', code: 'sync.storage.invalid_prune_cursor' });
    });
  }
});
