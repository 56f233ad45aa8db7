// worker_threads body: loads the addon in this thread, opens its own
// storage, pushes, and (unless told not to) closes it. workerData:
// { url, pushes, close }.
import { parentPort, workerData } from 'node:worker_threads';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { hostPush, taskRow } from '../../__test__/support/harness.mjs';

const storage = new NativeStorage({ url: workerData.url });
await storage.ensureSchema(fixtureSchema());
let max = 0;
for (let k = 0; k < workerData.pushes; k++) {
  const r = await hostPush(storage, 'w', { clientId: 'w', clientCommitId: `w-${k}`, ops: [{ table: 'tasks', row: taskRow(`r${k}`) }] });
  max = r.commitSeq;
}
// Leave a transaction open on purpose in some workers: teardown must cope.
if (workerData.leaveOpen) {
  const tx = await storage.begin('w');
  await tx.lockPartitionForPush();
  await tx.upsertRow('tasks', taskRow('open'), { opIndex: 0 });
}
if (workerData.close) await storage.close();
parentPort.postMessage({ max });
