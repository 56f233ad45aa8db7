// Shared helpers for the contract cases.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { encodeRow, hex } from './codec.mjs';
import { ACCOUNT_COLUMNS, NOTE_COLUMNS, TASK_COLUMNS, fixtureSchema } from './schema.mjs';
import { StorageQueryError } from './package.mjs';

/**
 * Create a storage on `engine`, optionally run ensureSchema, hand it to `fn`,
 * and always close it.
 */
export async function withStorage(engine, fn, { schema = fixtureSchema(), ensure = true, opts } = {}) {
  const storage = engine.create(opts);
  try {
    if (ensure) await storage.ensureSchema(schema);
    return await fn(storage);
  } finally {
    await storage.close();
  }
}

/** Reject when `promise` does not settle within `ms`. */
export function within(promise, ms = 5000, label = 'operation') {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Resolves true when `promise` is still pending after `ms`. */
export async function stillPending(promise, ms = 100) {
  const marker = Symbol('pending');
  const result = await Promise.race([
    promise.then(
      () => 'resolved',
      () => 'rejected',
    ),
    new Promise((r) => setTimeout(() => r(marker), ms)),
  ]);
  return result === marker;
}

// ---------------------------------------------------------------------------
// Rows

export function taskValues(id, v = {}) {
  return {
    id,
    project_id: v.project ?? 'p1',
    owner_id: v.owner ?? 'u1',
    title: v.title ?? `title ${id}`,
    done: v.done ?? false,
    count: v.count ?? null,
    score: v.score ?? null,
    meta: v.meta ?? null,
    data: v.data ?? null,
    file: v.file ?? null,
  };
}

export function taskPayload(id, v = {}) {
  return encodeRow(TASK_COLUMNS, taskValues(id, v));
}

/** A StoredRow for `tasks`. */
export function taskRow(id, v = {}, { version = 1, columnVersions } = {}) {
  const values = taskValues(id, v);
  const row = {
    rowId: id,
    serverVersion: version,
    scopes: { project_id: values.project_id, owner_id: values.owner_id },
    payload: encodeRow(TASK_COLUMNS, values),
  };
  if (columnVersions !== undefined) row.columnVersions = columnVersions;
  return row;
}

export function accountRow(id, org, email, { version = 1 } = {}) {
  return {
    rowId: id,
    serverVersion: version,
    scopes: { org_id: org },
    payload: encodeRow(ACCOUNT_COLUMNS, { id, org_id: org, email }),
  };
}

export function noteRow(id, project, body, { version = 1, payload } = {}) {
  return {
    rowId: id,
    serverVersion: version,
    scopes: { project_id: project },
    payload: payload ?? encodeRow(NOTE_COLUMNS, { id, project_id: project, body }),
  };
}

/** The NewChange for an upsert of `row` into `table`. */
export function upsertChange(table, row) {
  return {
    table,
    rowId: row.rowId,
    op: 'upsert',
    rowVersion: row.serverVersion,
    scopes: row.scopes,
    payload: row.payload,
  };
}

export function deleteChange(table, rowId, scopes) {
  return { table, rowId, op: 'delete', scopes };
}

// ---------------------------------------------------------------------------
// Writes

/**
 * Apply operations and append one commit in one transaction, roughly as the
 * host's push does (without idempotency). Returns the commitSeq.
 * ops: [{ table, row } | { table, delete: rowId, scopes }]
 */
export async function writeCommit(storage, partition, ops, meta = {}) {
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    const changes = [];
    for (const [opIndex, op] of ops.entries()) {
      if (op.delete !== undefined) {
        await tx.deleteRow(op.table, op.delete);
        changes.push(deleteChange(op.table, op.delete, op.scopes ?? {}));
      } else {
        await tx.upsertRow(op.table, op.row, { opIndex });
        changes.push(upsertChange(op.table, op.row));
      }
    }
    const seq = await tx.appendCommit({
      clientId: meta.clientId ?? 'client-1',
      clientCommitId: meta.clientCommitId ?? randomUUID(),
      actorId: meta.actorId ?? 'actor-1',
      createdAtMs: meta.createdAtMs ?? 1_700_000_000_000,
      changes: meta.changes ?? changes,
    });
    await tx.commit();
    return seq;
  } catch (error) {
    await tx.rollback();
    throw error;
  }
}

/** Append a commit with explicit changes (no row writes). */
export async function appendOnly(storage, partition, changes, meta = {}) {
  return writeCommit(storage, partition, [], { ...meta, changes });
}

/**
 * The host's push sequence for one commit (contract §7.1 step 5 / layout §11.1):
 * optimistic getPushResult, begin, lockPartitionForPush, tx.getPushResult,
 * apply, appendCommit, putPushResult, commit, then the canonical re-read.
 * Returns { applied: boolean, commitSeq?, result }.
 */
export async function hostPush(storage, partition, { clientId, clientCommitId, ops, createdAtMs = 1_700_000_000_000, actorId = 'actor-1', onApplied }) {
  const cached = await storage.getPushResult(partition, clientId, clientCommitId);
  if (cached !== undefined) return { applied: false, result: cached };
  const tx = await storage.begin(partition);
  try {
    await tx.lockPartitionForPush();
    const again = await tx.getPushResult(clientId, clientCommitId);
    if (again !== undefined) {
      await tx.rollback();
      return { applied: false, result: again };
    }
    const changes = [];
    for (const [opIndex, op] of ops.entries()) {
      if (op.delete !== undefined) {
        await tx.deleteRow(op.table, op.delete);
        changes.push(deleteChange(op.table, op.delete, op.scopes ?? {}));
      } else {
        const existing = await tx.getRow(op.table, op.row.rowId);
        if (existing === undefined) {
          const tomb = await tx.getTombstoneSeq(op.table, op.row.rowId);
          if (tomb !== undefined) await tx.clearTombstone(op.table, op.row.rowId);
        }
        await tx.upsertRow(op.table, op.row, { opIndex });
        changes.push(upsertChange(op.table, op.row));
      }
    }
    if (onApplied) await onApplied(tx);
    const commitSeq = await tx.appendCommit({ clientId, clientCommitId, actorId, createdAtMs, changes });
    const result = {
      status: 'applied',
      commitSeq,
      recordedAtMs: createdAtMs,
      cacheIdentity: randomUUID(),
      results: ops.map((_, opIndex) => ({ opIndex, status: 'applied' })),
    };
    await tx.putPushResult(clientId, clientCommitId, result);
    await tx.commit();
    const canonical = await storage.getPushResult(partition, clientId, clientCommitId);
    return { applied: true, commitSeq, result: canonical };
  } catch (error) {
    await tx.rollback();
    throw error;
  }
}

// ---------------------------------------------------------------------------
// Assertions

/**
 * Deep-normalize a value for deepStrictEqual: Uint8Arrays become
 * 'bytes:<hex>' strings (after checking they are Uint8Arrays), objects are
 * rebuilt keeping exactly their own enumerable keys. Throws on bigint.
 */
export function norm(value, path = '$') {
  if (typeof value === 'bigint') throw new assert.AssertionError({ message: `bigint at ${path}` });
  if (value instanceof Uint8Array) return `bytes:${hex(value)}`;
  if (ArrayBuffer.isView(value)) throw new assert.AssertionError({ message: `non-Uint8Array view at ${path}` });
  if (Array.isArray(value)) return value.map((v, i) => norm(v, `${path}[${i}]`));
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const key of Object.keys(value)) out[key] = norm(value[key], `${path}.${key}`);
    return out;
  }
  return value;
}

export function assertSame(actual, expected, message) {
  assert.deepStrictEqual(norm(actual), norm(expected), message);
}

export function assertBytes(actual, expected, message) {
  assert.ok(actual instanceof Uint8Array, `${message ?? 'value'}: expected a Uint8Array, got ${Object.prototype.toString.call(actual)}`);
  assert.equal(hex(actual), hex(expected), message);
}

/** Assert that a StoredRow read back equals the written one (columnVersions omitted when absent). */
export function assertRow(actual, expected, message) {
  assert.ok(actual !== undefined && actual !== null, `${message ?? 'row'}: expected a row, got ${actual}`);
  assertSame(actual, expected, message);
}

export async function rejectsQueryError(promise, code, Cls = StorageQueryError) {
  let caught;
  await assert.rejects(promise, (err) => {
    caught = err;
    return true;
  });
  assert.ok(caught instanceof Cls, `expected ${Cls.name}, got ${caught?.constructor?.name}: ${caught?.message}`);
  assert.equal(caught.code, code);
  return caught;
}

/** A rejection with a plain (non-typed) Error whose message matches `pattern`. */
export async function rejectsPlain(promise, pattern) {
  let caught;
  await assert.rejects(promise, (err) => {
    caught = err;
    return true;
  });
  assert.ok(caught instanceof Error, `expected an Error, got ${String(caught)}`);
  assert.ok(!(caught instanceof StorageQueryError), `expected a plain Error, got StorageQueryError ${caught.code}`);
  if (pattern !== undefined) assert.match(caught.message, pattern);
  if ('code' in caught && caught.code !== undefined) assert.equal(typeof caught.code, 'string');
  return caught;
}

/** Any rejection with a non-empty message (bad input). */
export async function rejectsClearly(fn, label) {
  let promise;
  assert.doesNotThrow(() => {
    promise = fn();
  }, `${label}: threw synchronously instead of rejecting`);
  assert.ok(promise && typeof promise.then === 'function', `${label}: did not return a promise`);
  let caught;
  await assert.rejects(within(promise, 5000, label), (err) => {
    caught = err;
    return true;
  }, `${label}: expected a rejection`);
  assert.ok(caught instanceof Error, `${label}: rejected with a non-Error ${String(caught)}`);
  assert.ok(typeof caught.message === 'string' && caught.message.length > 0, `${label}: empty error message`);
  assert.doesNotMatch(caught.message, /did not settle/, `${label}: hung`);
  return caught;
}

export function unknownTablePattern(name) {
  return new RegExp(`^unknown table "${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`);
}

export { randomUUID };
