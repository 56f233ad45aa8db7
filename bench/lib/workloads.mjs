// The benchmark workloads. Each takes a storage factory and returns named
// figures; run.mjs repeats them and takes medians. Sizes come from `size`.
import { readdirSync, readFileSync } from 'node:fs';
import { encodeTask, INDEX, indexedSchema, schema, TABLE } from './fixture.mjs';
import { push } from './host.mjs';

const now = () => Number(process.hrtime.bigint()) / 1e3; // µs

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function batch(prefix, projectId, count, n) {
  const rows = new Array(count);
  for (let o = 0; o < count; o++) {
    const rowId = `${prefix}-${o}`;
    rows[o] = [rowId, projectId, encodeTask(rowId, projectId, n)];
  }
  return rows;
}

/**
 * Context switches of this process so far, all threads summed (Linux:
 * /proc/self/task/<tid>/status; threads that ended are not counted, so
 * the figure is a lower bound when a storage's threads come and go).
 * `undefined` where /proc is not there.
 */
export function contextSwitches() {
  let tasks;
  try {
    tasks = readdirSync('/proc/self/task');
  } catch {
    return undefined;
  }
  let total = 0;
  for (const tid of tasks) {
    let status;
    try {
      status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)) total += Number(m[1]);
  }
  return total;
}

export async function pushSequential(storage, ops, commits) {
  await storage.ensureSchema(schema);
  const prepared = Array.from({ length: commits }, (_, c) => batch('row', 'p1', ops, c));
  const latencies = new Float64Array(commits);
  const switchesBefore = contextSwitches();
  const start = now();
  for (let c = 0; c < commits; c++) {
    const t = now();
    await push(storage, 'bench', `seq-${ops}-${c}`, prepared[c], c);
    latencies[c] = now() - t;
  }
  const elapsed = now() - start;
  const switchesAfter = contextSwitches();
  latencies.sort();
  return {
    commitsPerSec: (commits / elapsed) * 1e6,
    switchesPerCommit: switchesBefore === undefined ? undefined : (switchesAfter - switchesBefore) / commits,
    meanUs: elapsed / commits,
    p50Us: percentile(latencies, 50),
    p99Us: percentile(latencies, 99),
  };
}

/** `pushers` concurrent loops of 1-op pushes, on one or on many partitions. */
export async function pushConcurrent(storage, pushers, commitsEach, partitions) {
  await storage.ensureSchema(schema);
  const start = now();
  await Promise.all(
    Array.from({ length: pushers }, async (_, w) => {
      const partition = partitions === 1 ? 'bench' : `bench-${w}`;
      for (let c = 0; c < commitsEach; c++) {
        await push(storage, partition, `conc-${w}-${c}`, batch(`w${w}`, 'p1', 1, c), c);
      }
    }),
  );
  return { commitsPerSec: ((pushers * commitsEach) / (now() - start)) * 1e6 };
}

/**
 * Fills a storage for the read workloads: `rows` rows in partition
 * 'bootstrap' (100 per commit, projects p0..p9), and `windowCommits`
 * one-change commits in partition 'window'.
 */
export async function populate(storage, rows, windowCommits) {
  await storage.ensureSchema(schema);
  for (let c = 0; c < rows / 100; c++) {
    const projectId = `p${c % 10}`;
    await push(storage, 'bootstrap', `boot-${c}`, batch(`b${c}`, projectId, 100, c), c);
  }
  for (let c = 0; c < windowCommits; c++) {
    await push(storage, 'window', `win-${c}`, batch(`w${c}`, 'p1', 1, c), c);
  }
}

/** 2,000 rows of project p1 on the 'lookup' partition, in 20 commits, under an index on project_id. */
export async function populateIndexed(storage) {
  await storage.ensureSchema(indexedSchema);
  for (let c = 0; c < 20; c++) await push(storage, 'lookup', `look-${c}`, batch(`b${c}`, 'p1', 100, c), c);
}

/** `calls` scanRowsByIndex lookups of `limit` rows each over populateIndexed's rows, every other one after a cursor; answers their rate. */
export async function indexLookups(storage, calls, limit) {
  const start = now();
  for (let i = 0; i < calls; i++) {
    const rows = await storage.scanRowsByIndex('lookup', { table: TABLE, index: INDEX, values: ['p1'], afterRowId: i % 2 ? 'b1' : null, limit });
    if (rows.length !== limit) throw new Error(`scanRowsByIndex: ${rows.length} rows, not ${limit}`);
  }
  return { lookupsPerSec: (calls / (now() - start)) * 1e6 };
}

/**
 * Measures event-loop stalls while `work` runs: a setImmediate probe
 * records the gap between consecutive loop turns, so any synchronous
 * stretch (native work on the JS thread, result conversion) shows up.
 */
export async function withStallProbe(work) {
  const gaps = [];
  let running = true;
  let last = performance.now();
  const tick = () => {
    const t = performance.now();
    gaps.push(t - last);
    last = t;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  const out = await work();
  // A workload that never yields to the loop (synchronous reads) shows up
  // as one long gap, recorded when the probe gets its next turn.
  await new Promise((resolve) => setImmediate(resolve));
  running = false;
  gaps.sort((a, b) => a - b);
  return { ...out, stallP99Ms: percentile(gaps, 99) ?? 0, stallMaxMs: gaps[gaps.length - 1] ?? 0 };
}

/** 100-change windows at spread offsets over the 'window' partition. */
export async function windowReads(storage, reads) {
  const max = await storage.getMaxCommitSeq('window');
  const start = now();
  let delivered = 0;
  for (let i = 0; i < reads; i++) {
    const afterSeq = (i * 97) % Math.max(1, max - 100);
    const commits = await storage.readCommitWindow('window', {
      table: TABLE,
      scopeFilter: { project_id: ['p1'] },
      afterSeq,
      throughSeq: max,
      limitChanges: 100,
    });
    for (const c of commits) delivered += c.changes.length;
  }
  const elapsed = now() - start;
  if (delivered < reads * 100) throw new Error(`window reads delivered ${delivered} changes, expected ${reads * 100}`);
  return { windowsPerSec: (reads / elapsed) * 1e6 };
}

/** A bootstrap of every row of project p0..p9 in pages of `page`. */
export async function bootstrapScan(storage, page) {
  const start = now();
  let total = 0;
  for (let p = 0; p < 10; p++) {
    let after = null;
    for (;;) {
      const rows = await storage.scanRows('bootstrap', {
        table: TABLE,
        scopeFilter: { project_id: [`p${p}`] },
        afterRowId: after,
        limit: page,
      });
      total += rows.length;
      if (rows.length < page) break;
      after = rows[rows.length - 1].rowId;
    }
  }
  return { rowsPerSec: (total / (now() - start)) * 1e6, rows: total };
}

// Registered queries in the 0.15.x request form, which every storage
// version accepts: the host wraps the generated SQL and appends the limit.
function registered(sql, params) {
  return {
    sql: `SELECT * FROM (${sql}) AS "_syncular_registered_query" LIMIT ?`,
    params: [...params, 1001],
    tables: [TABLE],
  };
}

export async function queries(storage, rows, points, aggregates) {
  const commits = rows / 100;
  if (typeof storage.queryAuthoritative !== 'function') return {};
  let start = now();
  for (let i = 0; i < points; i++) {
    const r = await storage.queryAuthoritative(
      'bootstrap',
      registered(`SELECT id, title FROM ${TABLE} WHERE id = ?`, [`b${i % commits}-${i % 100}`]),
    );
    if (r.rows.length !== 1) throw new Error('point query found no row');
  }
  const pointsPerSec = (points / (now() - start)) * 1e6;
  start = now();
  for (let i = 0; i < aggregates; i++) {
    const r = await storage.queryAuthoritative(
      'bootstrap',
      registered(`SELECT count(*) AS c, sum(n) AS s FROM ${TABLE} WHERE project_id = ?`, [`p${i % 10}`]),
    );
    if (Number(r.rows[0].c) < 1) throw new Error('aggregate query counted nothing');
  }
  return { queryPointsPerSec: pointsPerSec, queryAggregatesPerSec: (aggregates / (now() - start)) * 1e6 };
}

/** RSS growth over `calls` point reads, after a warm-up. */
export async function memory(storage, rows, calls) {
  const commits = rows / 100;
  const read = (i) => storage.getRow('bootstrap', TABLE, `b${i % commits}-${i % 100}`);
  for (let i = 0; i < 50_000; i++) await read(i);
  globalThis.gc?.();
  const before = process.memoryUsage().rss;
  for (let i = 0; i < calls; i++) await read(i);
  globalThis.gc?.();
  return { rssGrowthMb: (process.memoryUsage().rss - before) / 2 ** 20 };
}
