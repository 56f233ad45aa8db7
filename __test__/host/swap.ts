// The swap, as an operator does it: a host's in-tree storage writes a
// database through upstream's real handler; the host is stopped and started
// again on this package over the same database at the same schema version;
// later it is swapped back. At each swap the same pull requests are answered
// by both storages over the same data, and the answers are compared byte for
// byte.
//
//   bun __test__/host/swap.ts sqlite <file> | postgres-bunsql <schema> | postgres-pg <schema>
//
// Prints one JSON line: { ok, steps: [{ step, requests, identical, firstDiff? }], ... }.
import { fill, pushSequential } from '../../bench/lib/server.mjs';
import { firstDifference, pullAnswers, startHost } from './pulls.ts';
import { core, report, server } from './upstream.ts';

const [kind, where] = process.argv.slice(2);
const PARTITION = 'p1';

async function module(name: string) {
  return import(`../../bench/modules/${name}.mjs`);
}

async function inTree() {
  const context = { server, core, path: where, schema: where };
  if (kind === 'sqlite') return (await module('intree-sqlite')).createStorage(context);
  if (kind === 'postgres-bunsql') return (await module('intree-postgres')).createStorage(context);
  if (kind === 'postgres-pg') return (await module('intree-postgres-pg')).createStorage(context);
  throw new Error(`unknown kind ${kind}`);
}

async function ours() {
  const context = { server, core, path: where, schema: where };
  if (kind === 'sqlite') return (await module('native-sqlite')).createStorage(context);
  return (await module('native-postgres')).createStorage(context);
}

async function close(storage: any) {
  if (typeof storage.close === 'function') await storage.close();
  else storage.db?.close?.();
}

const start = (storage: any) => startHost(storage, PARTITION);
const answers = (host: any) => pullAnswers(host, PARTITION, 'swap');

function compare(step: string, a: Uint8Array[], b: Uint8Array[]) {
  const firstDiff = firstDifference(a, b);
  return { step, requests: a.length, identical: firstDiff === undefined, ...(firstDiff !== undefined ? { firstDiff } : {}) };
}

const steps = [];
// 1. The in-tree storage writes the history: new rows, then updates of old ones.
let storage = await inTree();
let host = await start(storage);
await fill(host, 'a', 40, 3);
await pushSequential(host, 2, 6);
const before = await answers(host);
await close(storage);

// 2. Swapped in at the same schema version: the same answers.
storage = await ours();
host = await start(storage);
const swappedIn = await answers(host);
steps.push(compare('in-tree → ours', before.bytes, swappedIn.bytes));
// Ours writes on: more commits continuing the same log.
await fill(host, 'b', 25, 2);
await pushSequential(host, 3, 4);
const oursAfter = await answers(host);
await close(storage);

// 3. Swapped back: the in-tree storage serves what ours wrote, identically.
storage = await inTree();
host = await start(storage);
const back = await answers(host);
steps.push(compare('ours → in-tree', oursAfter.bytes, back.bytes));
// And it can still write on the file ours completed.
await fill(host, 'c', 5, 1);
const finalMax = Number(await storage.getMaxCommitSeq(PARTITION));
await close(storage);

report({
  ok: steps.every((s) => s.identical),
  steps,
  commits: { inTree: before.max, ours: oursAfter.max, final: finalMax },
});
