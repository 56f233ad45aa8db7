// Child of the crash program: pushes commits k = start, start+1, ... with
// the host's push sequence, from `pushers` concurrent loops that take the
// next k in turn (so with group commit, groups are in flight at the kill), on the storage that the JSON options in argv
// open (a SQLite file, or a PostgreSQL schema: then this process is the host
// that gets killed, never the server). It prints "ready" on stdout once the schema is
// in place, then appends to the report file, one write(2) per line,
//   "begin <k>"            before delivering commit k,
//   "ack <k> <commitSeq>"  once the push of commit k has resolved.
// The parent SIGKILLs it at a random point. Reports go to a file, not the
// pipe: a pipe write wakes the parent, whose kill timer then fires right
// after a report far more often than mid-commit.
import { openSync, writeSync } from 'node:fs';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { hostPush } from '../../__test__/support/harness.mjs';
import { CRASH_CLIENT, CRASH_PARTITION, ccidOf, opsOf } from './shape.mjs';

const [optionsJson, startArg, reportPath, pushersArg = '1'] = process.argv.slice(2);
const report = openSync(reportPath, 'a');
const say = (line) => writeSync(report, `${line}\n`);

const storage = new NativeStorage(JSON.parse(optionsJson));
await storage.ensureSchema(fixtureSchema());
writeSync(1, 'ready\n');
let next = Number(startArg);
async function pusher() {
  for (;;) {
    const k = next++;
    say(`begin ${k}`);
    const r = await hostPush(storage, CRASH_PARTITION, {
      clientId: CRASH_CLIENT,
      clientCommitId: ccidOf(k),
      ops: opsOf(k),
      createdAtMs: 1_700_000_000_000 + k,
    });
    say(`ack ${k} ${r.result.commitSeq}`);
  }
}
await Promise.all(Array.from({ length: Number(pushersArg) }, pusher));
