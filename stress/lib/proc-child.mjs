// Child of the two-process program: pushes commits to one shared partition
// for a fixed time with `inflight` concurrent host pushes, on the storage
// the JSON options in argv open (a SQLite file or a PostgreSQL schema),
// then prints one JSON line: { acks: [[commitSeq, clientCommitId]],
// errors: [{code, message}], lockWaits }. lockWaits counts, on SQLite, the
// off-thread waits for the other process's write lock (a `begin` that
// answers with a Promise because the lock is taken).
import { createRequire } from 'node:module';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { hostPush, taskRow } from '../../__test__/support/harness.mjs';

const [optionsJson, name, msArg, inflightArg] = process.argv.slice(2);
const { NativeEngine } = createRequire(import.meta.url)('../../lib/native.js');
let lockWaits = 0;
const begin = NativeEngine.prototype.begin;
NativeEngine.prototype.begin = function (...args) {
  const out = begin.apply(this, args);
  if (out instanceof Promise && this.exclusiveWrites) lockWaits++;
  return out;
};
const storage = new NativeStorage(JSON.parse(optionsJson));
const acks = [];
const errors = [];
await storage.ensureSchema(fixtureSchema());
const until = Date.now() + Number(msArg);
let n = 0;
async function lane() {
  while (Date.now() < until) {
    const k = n++;
    const ccid = `${name}-${k}`;
    try {
      const r = await hostPush(storage, 'shared', {
        clientId: name,
        clientCommitId: ccid,
        ops: [
          { table: 'tasks', row: taskRow(`${name}-hot`, { count: k }, { version: k + 1 }) },
          { table: 'tasks', row: taskRow(ccid) },
        ],
      });
      acks.push([r.result.commitSeq, ccid]);
      // a read between pushes, on a reader connection
      await storage.getMaxCommitSeq('shared');
    } catch (err) {
      errors.push({ code: err?.code, message: String(err?.message ?? err) });
      if (errors.length > 50) return;
    }
  }
}
await Promise.all(Array.from({ length: Number(inflightArg) }, lane));
await storage.close();
process.stdout.write(`${JSON.stringify({ acks, errors, lockWaits })}\n`);
