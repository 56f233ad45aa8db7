// What @syncular/server does with a storage, reduced to the calls: one push
// in push.ts's order (contract.md §7.1) and the pull reads.
import { TABLE } from './fixture.mjs';

/**
 * Pushes one commit of `rows` ([rowId, projectId, payload]) as the host
 * does. Returns the commitSeq.
 */
export async function push(storage, partition, clientCommitId, rows, n) {
  await storage.getPushResult(partition, 'bench-client', clientCommitId);
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    if (tx.readServeGate) await tx.readServeGate(1);
    if (tx.getPushResult) await tx.getPushResult('bench-client', clientCommitId);
    // The post-0.24 host names every row a commit targets before applying it.
    if (tx.prefetchRows) await tx.prefetchRows(TABLE, rows.map((r) => r[0]));
    const changes = new Array(rows.length);
    for (let o = 0; o < rows.length; o++) {
      const [rowId, projectId, payload] = rows[o];
      const existing = await tx.getRow(TABLE, rowId);
      if (existing === undefined && tx.getTombstoneSeq) {
        await tx.getTombstoneSeq(TABLE, rowId);
        await tx.clearTombstone(TABLE, rowId);
      }
      const serverVersion = (existing?.serverVersion ?? 0) + 1;
      const scopes = { project_id: projectId };
      await tx.upsertRow(TABLE, { rowId, serverVersion, scopes, payload }, { opIndex: o });
      changes[o] = { table: TABLE, rowId, op: 'upsert', rowVersion: serverVersion, scopes, payload };
    }
    const commitSeq = await tx.appendCommit({
      clientId: 'bench-client',
      clientCommitId,
      actorId: 'bench-actor',
      createdAtMs: n,
      changes,
    });
    await tx.putPushResult('bench-client', clientCommitId, {
      status: 'applied',
      commitSeq,
      recordedAtMs: n,
      cacheIdentity: `id-${clientCommitId}`,
      results: rows.map((_, opIndex) => ({ opIndex, status: 'applied' })),
    });
    await tx.commit();
    return commitSeq;
  } catch (err) {
    await tx.rollback();
    throw err;
  }
}
