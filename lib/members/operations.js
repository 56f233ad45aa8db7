'use strict';
// Operations (docs/operations.md): ping, stats, backup, the swap back's
// restoreLayout, and copyTo, the move between engines (docs/copy.md).

const { invalidArgument } = require('../errors');
const ops = require('../ops');
const C = require('../copy');

module.exports = ({ engine, counts, settle, write }) => ({
  /** One round trip to the database (not queued behind writes). */
  async ping() {
    const n = engine(this).native;
    const started = performance.now();
    const serverVersion = await settle(this, () => n.ping());
    return { engine: n.kind, roundTripMs: performance.now() - started, serverVersion };
  },

  /** Plain numbers: calls and errors per member, waits, commits, pool and WAL. */
  async stats() {
    const { native: n, queue: q } = engine(this);
    const e = settle(this, () => n.engineStats());
    const out = {
      engine: n.kind,
      members: ops.snapshot(counts(this), this._txCounts),
      lockWaits: undefined,
      groupCommit: undefined,
      pool: undefined,
      wal: undefined,
    };
    if (q.exclusive) {
      out.lockWaits = { count: q.waits.count + e.lockWaits, totalMs: q.waits.totalMs + e.lockWaitMs };
      out.groupCommit = { ...q.commits };
    } else {
      // The partition row locks transactions took (src/postgres/prefetch.rs).
      out.lockWaits = { count: e.lockWaits, totalMs: e.lockWaitMs };
    }
    if (e.poolSize !== undefined && e.poolSize !== null) {
      out.pool = { size: e.poolSize, idle: e.poolIdle, waiting: e.poolWaiting, acquires: e.poolWaits, acquireMs: e.poolWaitMs };
    }
    if (e.walBytes !== undefined && e.walBytes !== null) {
      out.wal = { bytes: e.walBytes, checkpointLagFrames: e.checkpointLagFrames ?? undefined, checkpoints: e.checkpoints ?? undefined };
    }
    return out;
  },

  /**
   * Swap back (README, migration runbook): gives the declared indexes the
   * first ensureSchema rebuilt the form the older version created; the
   * physical names restored.
   */
  async restoreLayout() {
    return write(this, undefined, (n, id) => n.restoreLayout(id));
  },

  /**
   * SQLite: an online copy of the database into a new file at `path`,
   * holding every commit acknowledged before the call; writes go on
   * meanwhile. PostgreSQL refuses (use pg_dump; docs/operations.md).
   * Not queued behind writes: it copies what is committed, and a write
   * still in line (behind an open transaction, say) is not acknowledged.
   */
  async backup(path) {
    if (typeof path !== 'string' || path.length === 0) throw invalidArgument('backup: path must be a non-empty string');
    const n = engine(this).native;
    await settle(this, () => n.backup(path));
  },

  /**
   * Copies this storage's database (SQLite) into the PostgreSQL database
   * `url` while the storage stays open (docs/copy.md): one snapshot,
   * refused (ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY) when the target holds
   * sync data. `{ schema, verify, verifyOnly, finalPass, onProgress }`;
   * resolves with the report (and verify's, `report.verify`, when asked).
   * With `finalPass`, catch-up passes follow the snapshot until few commits
   * are left, then a last pass runs under the write lock, after which
   * every write of this storage (and, through the mark it leaves in the
   * file, of any process) is refused with ERR_SYNCULAR_MOVED; `verify`
   * then reads the target as that pass left it, so the host may switch at
   * its first refusal instead of waiting for the report.
   * On PostgreSQL, `url` is a new SQLite file: one snapshot of this
   * storage's schema (the addon refuses `schema`, `finalPass`, `resume`).
   */
  async copyTo(url, options) {
    C.checkUrl('copyTo', 'url', url);
    const { native: o, onProgress, finalPass } = C.copyOptions('copyTo', options);
    const n = engine(this).native;
    const cb = C.progressCallback(onProgress);
    const run = async (call) => JSON.parse(await settle(this, call));
    if (!finalPass) return run(() => n.copyTo(url, o, cb));
    const report = await run(() => n.copyTo(url, { ...o, verify: false }, cb));
    let positions = JSON.stringify(report.positions);
    report.catchUp = [];
    for (let i = 0; i < C.MAX_PASSES; i++) {
      const pass = await run(() => n.copyCatchUp(url, o, positions, cb));
      report.catchUp.push(pass);
      positions = JSON.stringify(pass.positions);
      if (pass.commits <= C.FINAL_PASS_COMMITS) break;
    }
    // Under the write lease: queued writes wait behind it, and find the
    // storage refusing them once it ends.
    const started = performance.now();
    const startedAtMs = Date.now();
    const last = await write(this, undefined, (nat, id) => nat.copyFinish(id, url, o, positions));
    const { verifyToken, ...finalPassReport } = JSON.parse(last);
    report.finalPass = { ...finalPassReport, writesHeldMs: Math.round(performance.now() - started), startedAtMs, endedAtMs: Date.now() };
    report.positions = report.finalPass.positions;
    // Against the target as the final pass left it (a snapshot taken before
    // its lease ended): a host that switches at its first ERR_SYNCULAR_MOVED
    // may already write there while this runs.
    if (verifyToken !== undefined) report.verify = await run(() => n.copyVerifySnapshot(verifyToken, cb));
    return report;
  },
});
