// The state a copy must carry between the engines (issue 51,
// docs/copy.md), written through the storage's members (several
// partitions, declared indexes, push results, clients, reactions,
// checkpoints, a pruned horizon, a rotated epoch, tombstones), and every
// read a host makes of it, as plain comparable values.
import assert from 'node:assert/strict';
import { accountRow, hostPush, noteRow, taskRow, writeCommit } from './harness.mjs';
import { fixtureSchema } from './schema.mjs';

export const PARTITIONS = ['p1', 'p2', 'p3'];
export const NOW = 1_700_000_000_000;

function reaction(key, seq) {
  return {
    idempotencyKey: key,
    type: 'email.send',
    version: 1,
    payload: { to: ['a@x'], zeta: 1, alpha: { n: 1.5, ok: true } },
    sourceClientId: 'c1',
    sourceClientCommitId: `k-${key}`,
    sourceCommitSeq: seq,
    createdAtMs: NOW,
    maxAttempts: 3,
  };
}

/** Writes the state the copy must carry, through the storage's members. */
export async function populate(s) {
  await s.ensureSchema(fixtureSchema());
  for (const p of PARTITIONS) {
    await s.touchPartition(p, NOW, `epoch-${p}`);
    for (let i = 0; i < 12; i++) {
      await hostPush(s, p, {
        clientId: `c-${p}-${i % 3}`,
        clientCommitId: `k-${p}-${i}`,
        createdAtMs: NOW + i,
        ops: [
          { table: 'tasks', row: taskRow(`t${i}`, { project: `proj-${i % 2}`, title: `title ${i} é`, done: i % 2 === 0, count: i, score: i / 3, meta: { b: i, a: [i, 'x'] }, data: new Uint8Array([i, 255, 0]) }) },
          { table: 'accounts', row: accountRow(`a${i}`, 'o1', `user${i}@${p}.example`) },
          { table: 'notes', row: noteRow(`n${i}`, `proj-${i % 2}`, `body ${i}`) },
        ],
      });
    }
    // A delete leaves a tombstone; an update a new row version.
    await writeCommit(s, p, [{ table: 'tasks', delete: 't3', scopes: { project_id: 'proj-1', owner_id: 'u1' } }]);
    await writeCommit(s, p, [{ table: 'tasks', row: taskRow('t4', { project: 'proj-0', title: 'again' }, { version: 2 }) }]);
    for (let c = 0; c < 3; c++) {
      await s.putClientRecord(p, {
        clientId: `c-${p}-${c}`,
        actorId: 'actor-1',
        wireVersion: 2,
        cursor: 5 + c,
        updatedAtMs: NOW + c,
        subscriptions: [{ id: `sub-${c}`, table: 'tasks', scopes: { project_id: ['proj-0', 'proj-1'] } }],
      });
    }
    const tx = await s.begin(p);
    await tx.enqueueReactions([reaction(`r-${p}-1`, 1), reaction(`r-${p}-2`, 2)]);
    await tx.commit();
  }
  // At a later schema version: a host at version 1 does not wait for it.
  await s.declareCheckpoint('p1', 'beta', 2, NOW);
  await s.rotatePartitionLogEpoch('p2', 'epoch-p2-rotated', NOW + 5);
  await s.pruneCommitsThrough('p3', 4);
  // One reaction dead-lettered with a failure, one leased.
  const claimed = await s.claimReactions('p1', { leaseOwner: 'w1', types: ['email.send'], nowMs: NOW, leaseDurationMs: 100, limit: 2 });
  assert.equal(claimed.length, 2);
  assert.equal(await s.failReaction('p1', claimed[0].idempotencyKey, { leaseOwner: 'w1', failure: { code: 'x', atMs: NOW, details: { why: 'test' } } }), true);
}

/** Every read the host makes, per partition, as plain comparable values. */
export async function reads(s) {
  const out = {
    registry: await s.listPartitionRegistry(),
    partitions: await s.listPartitions(),
  };
  for (const p of PARTITIONS) {
    const max = await s.getMaxCommitSeq(p);
    const r = {
      max,
      horizon: await s.getHorizonSeq(p),
      epoch: await s.getPartitionLogEpoch(p),
      windows: [],
      scans: [],
      pushResults: [],
      clients: [],
    };
    for (const table of ['tasks', 'accounts', 'notes']) {
      for (const scopeFilter of [{ project_id: ['proj-0'] }, { project_id: ['proj-0', 'proj-1'] }, { org_id: ['o1'] }]) {
        const usable = table === 'accounts' ? 'org_id' in scopeFilter : 'project_id' in scopeFilter;
        if (!usable) continue;
        r.windows.push(await s.readCommitWindow(p, { table, scopeFilter, afterSeq: 0, throughSeq: max, limitChanges: 1000 }));
        r.windows.push(await s.readCommitWindow(p, { table, scopeFilter, afterSeq: 6, throughSeq: max, limitChanges: 3 }));
        r.scans.push(await s.scanRows(p, { table, scopeFilter, afterRowId: null, limit: 100 }));
        r.scans.push(await s.scanRows(p, { table, scopeFilter, afterRowId: 'a3', limit: 4 }));
      }
      for (const id of ['t1', 't3', 't4', 'a2', 'n5']) r.scans.push((await s.getRow(p, table, id)) ?? null);
    }
    r.scans.push(await s.scanRowsByIndex(p, { table: 'tasks', index: 'tasks_by_title', values: ['again'], limit: 10 }));
    r.scans.push(await s.scanRowsByIndex(p, { table: 'accounts', index: 'accounts_email', values: [`user2@${p}.example`], limit: 10 }));
    for (let i = 0; i < 12; i++) r.pushResults.push((await s.getPushResult(p, `c-${p}-${i % 3}`, `k-${p}-${i}`)) ?? null);
    for (let c = 0; c < 3; c++) r.clients.push((await s.getClientRecord(p, `c-${p}-${c}`)) ?? null);
    r.cursors = await s.listClientCursors(p);
    r.clientRecords = await s.listClientRecords(p);
    r.reactions = await s.listReactions(p, { limit: 100 });
    r.checkpoints = await s.readCheckpoints(p);
    r.commits = await s.listCommitMetadata(p, { afterSeq: 0, limit: 100 });
    r.rowScopes = await s.getRowScopes(p, 'tasks', 't1');
    out[p] = r;
  }
  return out;
}

/** `v` with every object's keys in sorted order. */
export function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
}

