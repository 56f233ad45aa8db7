// One host process of the multi-host pooler case (pooler-cases.mjs):
// opens the storage through the url it is given and runs the host's push
// sequence `count` times, `lanes` at a time, over `partitions` partitions.
// Prints one JSON line: the acknowledged commits and the errors.
//
//   node pooler-pusher.mjs URL SCHEMA NAME COUNT PARTITIONS LANES
import { NativeStorage } from './package.mjs';
import { fixtureSchema } from './schema.mjs';
import { hostPush, taskRow } from './harness.mjs';

const [url, schema, name, count, partitions, lanes] = process.argv.slice(2);
const storage = new NativeStorage({ url, schema, maxConnections: 4 });
await storage.ensureSchema(fixtureSchema());
const acked = [];
const errors = [];
let next = 0;
async function lane() {
  for (;;) {
    const i = next++;
    if (i >= Number(count)) return;
    const partition = `p${i % Number(partitions)}`;
    const clientCommitId = `${name}-${i}`;
    try {
      const out = await hostPush(storage, partition, {
        clientId: name,
        clientCommitId,
        ops: [{ table: 'tasks', row: taskRow(`${name}-t${i % 7}`, { title: `from ${name} #${i}` }, { version: i + 1 }) }],
      });
      if (out.applied) acked.push({ partition, clientCommitId, commitSeq: out.commitSeq });
      else errors.push(`${clientCommitId}: not applied`);
    } catch (e) {
      errors.push(`${clientCommitId}: ${e.code} ${e.message}`);
    }
  }
}
await Promise.all(Array.from({ length: Number(lanes) }, lane));
await storage.close();
console.log(JSON.stringify({ acked, errors }));
