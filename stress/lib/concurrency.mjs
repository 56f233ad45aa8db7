// Concurrency (issue 7 §2):
//   runSameCommit     n concurrent deliveries of one commit through the host
//                     sequence (optimistic getPushResult, begin, lock,
//                     tx.getPushResult re-check): one apply, n-1 replays of
//                     the same stored result
//   runTwoProcesses   two processes, one NativeStorage each, one SQLite file
//                     (or one PostgreSQL schema: two pools), one partition,
//                     pushing for a fixed time: no lost or duplicated
//                     commit, dense commitSeq, no "database is locked"
//                     reaching a caller
// Both take `pgUrl` to run on a fresh schema of that PostgreSQL server.
//   runWorkers        the addon in several worker_threads at once, each with
//                     its own storage: all exit cleanly, no crash at teardown
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { hostPush, taskRow } from '../../__test__/support/harness.mjs';
import { NativeStorage } from '../../__test__/support/package.mjs';
import { freshSchemaName, pgTarget, sqliteTarget } from './sql.mjs';

const here = (f) => fileURLToPath(new URL(f, import.meta.url));

function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

function run(args, timeoutMs) {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { timeout: timeoutMs, maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error?.code ?? 0, signal: error?.signal ?? null, stdout, stderr });
    });
  });
}

/** Returns { deliveries, applies, replays, mismatched, extraCommits }. */
export async function runSameCommit({ rounds = 1, n = 64, url, pgUrl } = {}) {
  const dir = url === undefined && pgUrl === undefined ? tempDir('syncular-same-') : undefined;
  const db = pgUrl !== undefined ? pgTarget(pgUrl, { schema: freshSchemaName('syncular_same'), maxConnections: 8 }) : undefined;
  const storage = db ? db.open() : new NativeStorage({ url: url ?? `sqlite:${join(dir, 'same.db')}` });
  const f = { deliveries: 0, applies: 0, replays: 0, mismatched: 0, extraCommits: 0 };
  try {
    await storage.ensureSchema(fixtureSchema());
    for (let r = 0; r < rounds; r++) {
      const ccid = `same-${r}`;
      const before = await storage.getMaxCommitSeq('p');
      const deliver = () =>
        hostPush(storage, 'p', { clientId: 'c', clientCommitId: ccid, ops: [{ table: 'tasks', row: taskRow(`r${r}`) }, { table: 'tasks', row: taskRow('hot', {}, { version: r + 1 }) }] });
      const out = await Promise.all(Array.from({ length: n }, deliver));
      f.deliveries += out.length;
      const applied = out.filter((o) => o.applied);
      f.applies += applied.length;
      f.replays += out.length - applied.length;
      const expected = JSON.stringify(out[0].result);
      f.mismatched += out.filter((o) => JSON.stringify(o.result) !== expected).length;
      const after = await storage.getMaxCommitSeq('p');
      f.extraCommits += after - before - 1;
    }
  } finally {
    await storage.close();
    await db?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
  return f;
}

/**
 * Returns { processes, commits, acked, lost, duplicates, gaps, lockedErrors,
 * otherErrors, problems[] }.
 */
export async function runTwoProcesses({ ms = 1500, inflight = 4, processes = 2, pgUrl } = {}) {
  const dir = tempDir('syncular-2proc-');
  const db = pgUrl === undefined ? sqliteTarget(join(dir, 'shared.db')) : pgTarget(pgUrl, { schema: freshSchemaName('syncular_2proc'), maxConnections: 3 });
  const f = { engine: db.engine, processes, commits: 0, acked: 0, lost: 0, duplicates: 0, gaps: 0, lockedErrors: 0, otherErrors: 0, problems: [] };
  try {
    const children = await Promise.all(
      Array.from({ length: processes }, (_, i) => run([here('./proc-child.mjs'), JSON.stringify(db.options), `proc${i}`, String(ms), String(inflight)], ms + 60_000)),
    );
    const acks = [];
    for (const [i, c] of children.entries()) {
      if (c.code !== 0 || c.signal) {
        f.problems.push(`process ${i} ended with ${c.signal ?? `code ${c.code}`}: ${c.stderr.slice(0, 500)}`);
        continue;
      }
      const report = JSON.parse(c.stdout.trim().split('\n').pop());
      acks.push(...report.acks);
      f.lockWaits = (f.lockWaits ?? 0) + report.lockWaits;
      for (const e of report.errors) {
        if (/locked|busy/i.test(e.message) || /BUSY|LOCKED/.test(String(e.code))) f.lockedErrors++;
        else f.otherErrors++;
        if (f.problems.length < 10) f.problems.push(`process ${i}: ${e.code}: ${e.message}`);
      }
    }
    f.acked = acks.length;
    const stored = await db.query("SELECT commit_seq AS seq, client_commit_id AS ccid FROM sync_commits WHERE partition = 'shared' ORDER BY commit_seq");
    f.commits = stored.length;
    const bySeq = new Map(stored.map((s) => [s.seq, s.ccid]));
    const seen = new Set();
    for (const [seq, ccid] of acks) {
      if (bySeq.get(seq) !== ccid) {
        f.lost++;
        if (f.problems.length < 20) f.problems.push(`acknowledged ${ccid} at seq ${seq}, stored there: ${bySeq.get(seq)}`);
      }
      if (seen.has(seq)) f.duplicates++;
      seen.add(seq);
    }
    // the two writers really interleaved in one log
    f.switches = 0;
    for (let i = 1; i < stored.length; i++) if (stored[i].ccid.split('-')[0] !== stored[i - 1].ccid.split('-')[0]) f.switches++;
    f.perProcess = Array.from({ length: processes }, (_, i) => acks.filter(([, c]) => c.startsWith(`proc${i}-`)).length);
    const ccids = new Set(stored.map((s) => s.ccid));
    f.duplicates += stored.length - ccids.size;
    const max = stored.at(-1)?.seq ?? 0;
    f.gaps += max - stored.length;
    const counter = (await db.query("SELECT max_commit_seq AS m FROM sync_partitions WHERE partition = 'shared'"))[0]?.m ?? 0;
    if (counter !== max) {
      f.gaps++;
      f.problems.push(`max_commit_seq ${counter}, log ends at ${max}`);
    }
    // every stored commit was acknowledged to exactly one caller
    if (stored.length !== acks.length) f.problems.push(`${stored.length} commits stored, ${acks.length} acknowledged`);
    const results = (await db.query("SELECT count(*) AS n FROM sync_push_results WHERE partition = 'shared'"))[0].n;
    if (results !== stored.length) f.problems.push(`${results} push results for ${stored.length} commits`);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return f;
}

/** Returns { workers, finished, terminated, crashed, problems[] }. */
export async function runWorkers({ workers = 4, pushes = 20 } = {}) {
  const c = await run([here('./workers-main.mjs'), String(workers), String(pushes)], 120_000);
  const f = { workers, finished: 0, terminated: 0, crashed: 0, problems: [] };
  if (c.code !== 0 || c.signal) {
    f.crashed = 1;
    f.problems.push(`worker host process ended with ${c.signal ?? `code ${c.code}`}: ${c.stderr.slice(0, 800)}`);
    return f;
  }
  const report = JSON.parse(c.stdout.trim().split('\n').pop());
  f.finished = report.finished;
  f.terminated = report.terminated;
  for (const [i, max] of report.maxSeqs.entries()) {
    if (i === workers - 1) continue; // terminated, may not have finished
    if (max !== pushes) f.problems.push(`worker ${i} ended at seq ${max}, expected ${pushes} (exit ${report.codes[i]})`);
  }
  return f;
}
