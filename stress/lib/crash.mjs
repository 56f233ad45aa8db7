// Crash safety (issue 7 §1): a child pushes commits on a SQLite file, or on
// a PostgreSQL schema (`pgUrl`: the host process is killed, not the server),
// and reports each acknowledged commit; it is SIGKILLed at random points.
// After every kill the database is reopened with a fresh NativeStorage and
// checked through the storage API and with raw SQL (sqlite3 shell, or psql
// on the schema; see sql.mjs):
//   lost        acknowledged commits missing, or without their push result
//   partial     commits whose changes, change scopes, rows, row scopes,
//               tombstones or push result are not all there (or all absent)
//   duplicates  client commit ids stored more than once
//   gaps        missing commitSeqs in 1..max (and a max_commit_seq counter
//               that disagrees with the log)
// and the commit in flight at the kill is delivered again with the host
// sequence: it must apply exactly once (a replay if it had landed).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TIME_SCALE } from '../../__test__/support/emulation.mjs';
import { fixtureSchema } from '../../__test__/support/schema.mjs';
import { hostPush } from '../../__test__/support/harness.mjs';
import { freshSchemaName, pgTarget, sqliteTarget } from './sql.mjs';
import { CRASH_CLIENT, CRASH_PARTITION, ccidOf, changeCountOf, deletesOf, kOf, opsOf, rowIdsOf } from './shape.mjs';

const CHILD = fileURLToPath(new URL('./crash-child.mjs', import.meta.url));

function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

/** Runs one child until killed; returns what it reported. */
function runChild(options, reportPath, start, delayMs, early, pushers) {
  writeFileSync(reportPath, '');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, JSON.stringify(options), String(start), reportPath, String(pushers)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let timer;
    const kill = () => {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    };
    if (early) timer = setTimeout(kill, delayMs);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      if (!early && timer === undefined && (out + d).includes('ready\n')) timer = setTimeout(kill, delayMs);
      out += d;
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => {
      err += d;
    });
    // A child that stalls (it must not) is killed after 20 s and reported.
    const watchdog = setTimeout(kill, 20_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(watchdog);
      const acks = [];
      const inFlight = new Set();
      let last = start - 1;
      for (const line of readFileSync(reportPath, 'utf8').split('\n')) {
        const [word, a, b] = line.split(' ');
        if (word === 'begin') {
          inFlight.add(Number(a));
          last = Math.max(last, Number(a));
        }
        if (word === 'ack') {
          acks.push({ k: Number(a), seq: Number(b) });
          inFlight.delete(Number(a));
        }
      }
      resolve({ acks, inFlight: [...inFlight].sort((x, y) => x - y), last, signal, code, stderr: err, ready: out.includes('ready\n') });
    });
  });
}

/**
 * Checks the whole database against the set of commits that may exist.
 * `target` is a sqliteTarget/pgTarget (sql.mjs) or a SQLite file path.
 * Resolves { commits, partial, duplicates, gaps, problems[] }.
 */
export async function checkLayout(target) {
  const db = typeof target === 'string' ? sqliteTarget(target) : target;
  const query = (sql) => db.query(sql);
  const P = `'${CRASH_PARTITION}'`;
  const problems = [];
  const commits = await query(`SELECT commit_seq AS seq, client_commit_id AS ccid FROM sync_commits WHERE partition = ${P} ORDER BY commit_seq`);
  const changes = new Map(
    (await query(`SELECT commit_seq AS seq, count(*) AS n FROM sync_changes WHERE partition = ${P} GROUP BY commit_seq`)).map((r) => [r.seq, r.n]),
  );
  const changeScopes = new Map(
    (await query(`SELECT commit_seq AS seq, count(*) AS n FROM sync_change_scopes WHERE partition = ${P} GROUP BY commit_seq`)).map((r) => [r.seq, r.n]),
  );
  const results = new Map(
    (await query(`SELECT client_commit_id AS ccid, ${db.jsonInt('result', 'commitSeq')} AS seq FROM sync_push_results WHERE partition = ${P} AND client_id = '${CRASH_CLIENT}'`)).map((r) => [
      r.ccid,
      { commitSeq: r.seq },
    ]),
  );
  const rows = new Map(
    (await query(`SELECT "_sync_row_id" AS id, "_sync_server_version" AS v FROM "tasks" WHERE "_sync_partition" = ${P}`)).map((r) => [r.id, r.v]),
  );
  const rowScopes = new Map(
    (await query(`SELECT row_id AS id, count(*) AS n FROM sync_row_scopes WHERE partition = ${P} AND tbl = 'tasks' GROUP BY row_id`)).map((r) => [r.id, r.n]),
  );
  const tombstones = new Set((await query(`SELECT row_id AS id FROM sync_tombstones WHERE partition = ${P} AND tbl = 'tasks'`)).map((r) => r.id));
  const counter = (await query(`SELECT max_commit_seq AS m FROM sync_partitions WHERE partition = ${P}`))[0]?.m ?? 0;

  const partialCommits = new Set();
  const bad = (k, what) => {
    partialCommits.add(k);
    if (problems.length < 20) problems.push(`commit ${k}: ${what}`);
  };

  // duplicates and gaps
  const byCcid = new Map();
  for (const c of commits) byCcid.set(c.ccid, (byCcid.get(c.ccid) ?? 0) + 1);
  let duplicates = 0;
  for (const [ccid, n] of byCcid) {
    if (n > 1) {
      duplicates += n - 1;
      problems.push(`${ccid} stored ${n} times`);
    }
  }
  const max = commits.length === 0 ? 0 : commits[commits.length - 1].seq;
  let gaps = max - commits.length;
  if (counter !== max) {
    gaps += 1;
    problems.push(`max_commit_seq ${counter} but the log ends at ${max}`);
  }

  // every stored commit complete
  const present = new Set();
  for (const c of commits) {
    const k = kOf(c.ccid);
    present.add(k);
    if ((changes.get(c.seq) ?? 0) !== changeCountOf(k)) bad(k, `${changes.get(c.seq) ?? 0} changes, expected ${changeCountOf(k)}`);
    if ((changeScopes.get(c.seq) ?? 0) !== 2) bad(k, `${changeScopes.get(c.seq) ?? 0} change scopes, expected 2`);
    const r = results.get(c.ccid);
    if (r === undefined) bad(k, 'push result missing');
    else if (r.commitSeq !== c.seq) bad(k, `push result says seq ${r.commitSeq}, log says ${c.seq}`);
  }
  // orphans: pieces of commits that are not in the log
  const seqs = new Set(commits.map((c) => c.seq));
  for (const seq of changes.keys()) if (!seqs.has(seq)) bad(`seq ${seq}`, 'changes without a commit');
  for (const seq of changeScopes.keys()) if (!seqs.has(seq)) bad(`seq ${seq}`, 'change scopes without a commit');
  for (const ccid of results.keys()) if (!present.has(kOf(ccid))) bad(kOf(ccid), 'push result without a commit');
  // rows, row scopes and tombstones follow exactly the commits present,
  // applied in log order (concurrent pushers commit out of k order)
  const expectedRows = new Set();
  const expectedTombs = new Set();
  let hot;
  for (const c of commits) {
    const k = kOf(c.ccid);
    hot = k;
    for (const id of rowIdsOf(k)) {
      expectedRows.add(id);
      expectedTombs.delete(id);
    }
    const del = deletesOf(k);
    if (del !== undefined) {
      expectedRows.delete(del);
      expectedTombs.add(del);
    }
  }
  if (present.size > 0) expectedRows.add('hot');
  for (const id of expectedRows) {
    if (!rows.has(id)) bad(id, 'row missing');
    else if ((rowScopes.get(id) ?? 0) !== 2) bad(id, `${rowScopes.get(id) ?? 0} row scopes`);
  }
  for (const id of rows.keys()) if (!expectedRows.has(id)) bad(id, 'row present without its commit (or deleted row still present)');
  for (const id of rowScopes.keys()) if (!expectedRows.has(id)) bad(id, 'row scopes without the row');
  if (present.size > 0 && rows.get('hot') !== hot) bad('hot', `hot row at version ${rows.get('hot')}, newest commit is ${hot}`);
  for (const id of expectedTombs) if (!tombstones.has(id)) bad(id, 'tombstone missing');
  for (const id of tombstones) if (!expectedTombs.has(id)) bad(id, 'tombstone without its delete');

  return { commits, partial: partialCommits.size, duplicates, gaps, problems };
}

/**
 * The killed child's connections must be gone before the checks: a COMMIT
 * it sent just before the kill may still be landing on the server, and a
 * check racing it would see a gap that is not there. The child connects
 * with its own application_name; wait until the server has no session
 * under it.
 */
async function waitForSessionsGone(db, appName) {
  for (let i = 0; i < 500; i++) {
    const [{ n }] = await db.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '${appName}'`);
    if (n === 0) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}

/**
 * Runs `kills` child lifetimes on a SQLite file, or on a fresh schema of the
 * PostgreSQL server at `pgUrl` (dropped at the end). Returns the figures:
 * { engine, kills, survived, commitsChecked, acked, lost, partial,
 *   duplicates, gaps, retries, replays, exactlyOnce, problems[] }.
 */
export async function runCrash({ kills = 10, seed = 7, maxDelayMs, synchronous, pgUrl, log, pushers = 1 } = {}) {
  // The kill comes up to maxDelayMs after "ready". A child's first push on
  // SQLite is acknowledged 20-40 ms after "ready" on 2 loaded cores (glibc),
  // 30-55 ms with the musl build (musl's allocator): a 40 ms window let whole
  // runs of 10 kills end before any acknowledgement. 80 ms, as for
  // PostgreSQL, spans several commits on both; a slower machine
  // (SYNCULAR_TEST_TIME_SCALE) gets more.
  maxDelayMs ??= 80 * TIME_SCALE;
  const dir = mkdtempSync(join(tmpdir(), 'syncular-crash-'));
  const reportPath = join(dir, 'crash.report');
  let db;
  let childOptions;
  let appName;
  if (pgUrl === undefined) {
    db = sqliteTarget(join(dir, 'crash.db'), { synchronous });
    childOptions = db.options;
  } else {
    const schema = freshSchemaName('syncular_crash');
    appName = schema;
    const u = new URL(pgUrl);
    u.searchParams.set('application_name', appName);
    db = pgTarget(pgUrl, { schema, maxConnections: 3 });
    childOptions = { ...db.options, url: u.toString() };
  }
  const random = rng(seed);
  const acked = new Map(); // k -> commitSeq
  const f = { engine: db.engine, pushers, kills: 0, survived: 0, commitsChecked: 0, acked: 0, lost: 0, partial: 0, duplicates: 0, gaps: 0, retries: 0, replays: 0, exactlyOnce: 0, problems: [] };
  let next = 1;
  try {
    for (let i = 0; i < kills; i++) {
      const early = random() < 0.1;
      const delay = Math.floor(random() * (early ? 2 * maxDelayMs + 60 : maxDelayMs));
      const run = await runChild(childOptions, reportPath, next, delay, early, pushers);
      f.kills++;
      if (run.signal !== 'SIGKILL') {
        f.problems.push(`child ${i} ended with ${run.signal ?? `code ${run.code}`}: ${run.stderr.slice(0, 500)}`);
        continue;
      }
      if (process.env.CRASH_DEBUG) console.log(i, early, delay, run.ready, run.acks.length, run.inFlight.join(','));
      for (const a of run.acks) acked.set(a.k, a.seq);
      f.acked += run.acks.length;

      // Reopen with a fresh storage: acknowledged commits and their results.
      let survived = true;
      if (appName !== undefined && !(await waitForSessionsGone(db, appName))) {
        survived = false;
        f.problems.push(`after kill ${i}: the killed host's sessions are still open on the server after 5 s`);
      }
      const storage = db.open();
      try {
        await storage.ensureSchema(fixtureSchema());
        for (const [k, seq] of acked) {
          const r = await storage.getPushResult(CRASH_PARTITION, CRASH_CLIENT, ccidOf(k));
          if (r === undefined || r.commitSeq !== seq || r.status !== 'applied') {
            f.lost++;
            survived = false;
            if (f.problems.length < 40) f.problems.push(`acknowledged commit ${k} (seq ${seq}) lost: ${JSON.stringify(r)}`);
          }
        }
        const layout = await checkLayout(db);
        f.commitsChecked += layout.commits.length;
        f.partial += layout.partial;
        f.duplicates += layout.duplicates;
        f.gaps += layout.gaps;
        if (layout.problems.length > 0) {
          survived = false;
          f.problems.push(...layout.problems.slice(0, 10).map((p) => `after kill ${i}: ${p}`));
        }
        const max = await storage.getMaxCommitSeq(CRASH_PARTITION);
        if (max !== (layout.commits.at(-1)?.seq ?? 0)) {
          f.gaps++;
          survived = false;
          f.problems.push(`after kill ${i}: getMaxCommitSeq ${max} disagrees with the log`);
        }

        // Deliver the commits in flight at the kill again, twice each.
        const retry = run.ready ? run.inFlight : [next];
        for (const k of retry) {
          const push = () => hostPush(storage, CRASH_PARTITION, { clientId: CRASH_CLIENT, clientCommitId: ccidOf(k), ops: opsOf(k), createdAtMs: 1_700_000_000_000 + k });
          const first = await push();
          const second = await push();
          f.retries++;
          if (!first.applied) f.replays++;
          const stored = (await db.query(`SELECT count(*) AS n FROM sync_commits WHERE partition = '${CRASH_PARTITION}' AND client_commit_id = '${ccidOf(k)}'`))[0].n;
          const sameResult = JSON.stringify(first.result) === JSON.stringify(second.result);
          if (stored === 1 && !second.applied && sameResult && first.result.commitSeq === second.result.commitSeq) {
            f.exactlyOnce++;
            acked.set(k, first.result.commitSeq);
          } else {
            survived = false;
            if (stored > 1) f.duplicates += stored - 1;
            f.problems.push(`after kill ${i}: retried commit ${k} stored ${stored} times (second delivery applied: ${second.applied})`);
          }
        }
        next = Math.max(next, run.last + 1, ...retry.map((k) => k + 1));
        // Everything the retry wrote must check out too.
        const after = await checkLayout(db);
        if (after.problems.length > 0) {
          survived = false;
          f.partial += after.partial;
          f.duplicates += after.duplicates;
          f.gaps += after.gaps;
          f.problems.push(...after.problems.slice(0, 10).map((p) => `after retry ${i}: ${p}`));
        }
      } finally {
        await storage.close();
      }
      if (survived) f.survived++;
      if (log && (i + 1) % 25 === 0) log(`crash (${db.engine}): ${i + 1}/${kills} kills, ${acked.size} acknowledged commits`);
    }
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return f;
}
