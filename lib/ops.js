'use strict';
// Operations (docs/operations.md): version information, the per-member
// call and error counters behind stats(), and the Prometheus text
// rendering of a stats() answer. Counting is a plain integer increment in
// the member's wrapper: no promise, no native call.

const native = require('./native');
const { invalidArgument } = require('./errors');

let cachedVersions;

/** `{ package, addon, addonProfile, sqlite, node }`: what this process runs. */
function versions() {
  if (cachedVersions === undefined) {
    const addon = native.addonVersions();
    cachedVersions = Object.freeze({
      package: require('../package.json').version,
      addon: addon.addon,
      addonProfile: addon.profile,
      sqlite: addon.sqlite,
      node: process.versions.node,
    });
  }
  return cachedVersions;
}

/** One `{ calls, errors }` per name. */
function counters(names) {
  const out = Object.create(null);
  for (const name of names) out[name] = { calls: 0, errors: 0, member: name };
  return out;
}

/** `{ member: { calls, errors } }` of the members called at least once. */
function snapshot(storageCounts, txCounts) {
  const members = {};
  for (const [prefix, counts] of [['', storageCounts], ['tx.', txCounts]]) {
    for (const name in counts) {
      const c = counts[name];
      if (c.calls > 0 || c.errors > 0) members[prefix + name] = { calls: c.calls, errors: c.errors };
    }
  }
  return members;
}

// ---- Prometheus text exposition format (version 0.0.4) --------------------

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

function labelValue(v) {
  return String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labels(obj) {
  const parts = Object.entries(obj).map(([k, v]) => `${k}="${labelValue(v)}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

function sample(v) {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

// [name, type, help, value of a stats() answer (undefined: left out)]
const GAUGES = [
  ['lock_waits_total', 'counter', 'Waits for the write lock (SQLite: queued behind another write, or held by another process; PostgreSQL: partition row locks taken).', (s) => s.lockWaits?.count],
  ['lock_wait_seconds_total', 'counter', 'Time spent waiting for the write lock (PostgreSQL: taking partition row locks).', (s) => (s.lockWaits === undefined ? undefined : s.lockWaits.totalMs / 1000)],
  ['group_commits_total', 'counter', 'Physical commits that made acknowledged transactions durable.', (s) => s.groupCommit?.count],
  ['group_commit_transactions_total', 'counter', 'Transactions made durable by those commits.', (s) => s.groupCommit?.sum],
  ['group_commit_max_size', 'gauge', 'Largest number of transactions one commit made durable.', (s) => s.groupCommit?.max],
  ['pool_size', 'gauge', 'Open connections of the pool.', (s) => s.pool?.size],
  ['pool_idle', 'gauge', 'Idle connections of the pool.', (s) => s.pool?.idle],
  ['pool_waiting', 'gauge', 'Calls waiting for a connection.', (s) => s.pool?.waiting],
  ['pool_acquires_total', 'counter', 'Calls that took a connection from the pool (opening one, or waiting).', (s) => s.pool?.acquires],
  ['pool_acquire_seconds_total', 'counter', 'Time spent taking connections from the pool.', (s) => (s.pool === undefined ? undefined : s.pool.acquireMs / 1000)],
  ['wal_bytes', 'gauge', 'Size of the write-ahead log file.', (s) => s.wal?.bytes],
  ['checkpoint_lag_frames', 'gauge', 'WAL frames the last checkpoint pass left uncopied.', (s) => s.wal?.checkpointLagFrames],
  ['checkpoints_total', 'counter', 'Checkpoint passes run by the storage.', (s) => s.wal?.checkpoints],
];

/**
 * A `stats()` answer in the Prometheus text exposition format: one
 * HELP/TYPE block per metric, labels `engine` (and `member` for the call
 * counters). `prefix` defaults to `syncular_storage_`.
 */
function toPrometheus(stats, options) {
  if (stats === null || typeof stats !== 'object' || typeof stats.engine !== 'string' || typeof stats.members !== 'object') {
    throw invalidArgument('toPrometheus: stats must be what storage.stats() answered');
  }
  const prefix = options?.prefix ?? 'syncular_storage_';
  if (typeof prefix !== 'string' || (prefix !== '' && !NAME.test(prefix))) {
    throw invalidArgument('toPrometheus: prefix must match [a-zA-Z_:][a-zA-Z0-9_:]*');
  }
  const engine = stats.engine;
  const lines = [];
  const block = (name, type, help, rows) => {
    if (rows.length === 0) return;
    lines.push(`# HELP ${prefix}${name} ${help}`, `# TYPE ${prefix}${name} ${type}`);
    for (const [l, v] of rows) lines.push(`${prefix}${name}${labels(l)} ${sample(v)}`);
  };
  const members = Object.entries(stats.members);
  block('calls_total', 'counter', 'Calls of each storage and transaction member.', members.map(([m, c]) => [{ engine, member: m }, c.calls]));
  block('errors_total', 'counter', 'Calls of each member that failed.', members.map(([m, c]) => [{ engine, member: m }, c.errors]));
  for (const [name, type, help, read] of GAUGES) {
    const v = read(stats);
    if (typeof v === 'number') block(name, type, help, [[{ engine }, v]]);
  }
  return lines.length === 0 ? '' : lines.join('\n') + '\n';
}

module.exports = { versions, toPrometheus, counters, snapshot };
