// How push and window-read cost change as the commit log grows. Each
// storage's log is filled once and measured at each checkpoint on the way
// (fill to the first size, measure, fill on to the next, measure, ...);
// storages take turns at every checkpoint, so drift hits all alike.
//
// The log: `distinctRows` rows seeded in 100-row commits, then one-op
// commits each updating one of those rows (chosen pseudo-randomly), all in
// project p1 of one partition. The measured pushes are more of the same
// (host-shaped, lib/host.mjs); the measured windows are 100-change
// `readCommitWindow` calls at spread offsets over the one-op part of the log.
import { encodeTask, schema, TABLE } from './fixture.mjs';
import { push } from './host.mjs';

const now = () => Number(process.hrtime.bigint()) / 1e3; // µs
const PARTITION = 'growth';

const label = (n) => (n % 1000 === 0 ? `${n / 1000}k` : String(n));

function prng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    // xorshift32
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

class Log {
  constructor(storage, distinctRows) {
    this.storage = storage;
    this.distinctRows = distinctRows;
    this.commits = 0;
    this.seedEnd = 0;
    this.next = prng(0x5eed);
  }

  async seed() {
    await this.storage.ensureSchema(schema);
    for (let first = 0; first < this.distinctRows; first += 100) {
      const rows = [];
      for (let r = first; r < Math.min(this.distinctRows, first + 100); r++) {
        rows.push([`g-${r}`, 'p1', encodeTask(`g-${r}`, 'p1', 0)]);
      }
      await push(this.storage, PARTITION, `seed-${first}`, rows, first);
      this.commits += 1;
    }
    this.seedEnd = Number(await this.storage.getMaxCommitSeq(PARTITION));
  }

  /** One one-op commit updating a pseudo-random row among the distinct ones. */
  pushOne() {
    const n = this.commits++;
    const rowId = `g-${this.next() % this.distinctRows}`;
    return push(this.storage, PARTITION, `g-${n}`, [[rowId, 'p1', encodeTask(rowId, 'p1', n)]], n);
  }

  async fillTo(commits) {
    while (this.commits < commits) await this.pushOne();
  }

  async measurePush(pushes) {
    const start = now();
    for (let i = 0; i < pushes; i++) await this.pushOne();
    return (now() - start) / pushes;
  }

  async measureWindows(windows) {
    const max = Number(await this.storage.getMaxCommitSeq(PARTITION));
    const span = max - 100 - this.seedEnd;
    if (span < 1) throw new Error(`growth: the log has too few one-op commits for a 100-change window (${max})`);
    let delivered = 0;
    const start = now();
    for (let i = 0; i < windows; i++) {
      const commits = await this.storage.readCommitWindow(PARTITION, {
        table: TABLE,
        scopeFilter: { project_id: ['p1'] },
        afterSeq: this.seedEnd + ((i * 7919) % span),
        throughSeq: max,
        limitChanges: 100,
      });
      for (const c of commits) delivered += c.changes.length;
    }
    const elapsed = now() - start;
    if (delivered !== windows * 100) throw new Error(`growth windows delivered ${delivered} changes, expected ${windows * 100}`);
    return elapsed / windows;
  }
}

/**
 * One growth run over every storage: figures `growth: push µs @N`,
 * `growth: window µs @N` per checkpoint N, and the last checkpoint's cost
 * over the first's.
 */
export async function growthRun(storages, fresh, close, size, record) {
  const logs = [];
  for (const st of storages) {
    const log = new Log(await fresh(st), size.distinctRows);
    await log.seed();
    logs.push(log);
  }
  const first = size.checkpoints[0];
  const last = size.checkpoints[size.checkpoints.length - 1];
  const at = logs.map(() => ({}));
  try {
    for (const checkpoint of size.checkpoints) {
      for (let i = 0; i < logs.length; i++) {
        const log = logs[i];
        await log.fillTo(checkpoint);
        const pushUs = await log.measurePush(size.pushes);
        const windowUs = await log.measureWindows(size.windows);
        at[i][checkpoint] = { pushUs, windowUs };
        record(`growth: push µs @${label(checkpoint)}`, i, pushUs, 'lower', 'µs');
        record(`growth: window µs @${label(checkpoint)}`, i, windowUs, 'lower', 'µs');
        // Printed as they come, so a run stopped before the last checkpoint still tells something.
        console.error(`bench: growth @${label(checkpoint)}: ${storages[i].label}: push ${pushUs.toFixed(0)} µs, window ${windowUs.toFixed(0)} µs`);
      }
    }
    for (let i = 0; i < logs.length; i++) {
      record(`growth: push @${label(last)}/@${label(first)}`, i, at[i][last].pushUs / at[i][first].pushUs, 'lower', '×');
      record(`growth: window @${label(last)}/@${label(first)}`, i, at[i][last].windowUs / at[i][first].windowUs, 'lower', '×');
    }
  } finally {
    for (const log of logs) await close(log.storage);
  }
}
