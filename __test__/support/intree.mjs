// The in-tree 0.15.48 fixture (__test__/fixtures/intree-0.15.48.db, made by
// scripts/make-fixture.ts) and the reads the in-tree storage recorded on
// it: shared by compat.test.mjs (the file opened in place) and
// copy.test.mjs (the file copied to PostgreSQL), which check a storage
// answers them.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));
export const FIXTURE_DB = join(here, '..', 'fixtures', 'intree-0.15.48.db');
export const expected = require('../fixtures/intree-0.15.48.expected.json');

/** Build the CompiledSchema (Maps and Sets) the host would pass, from the recorded ServerSchema. */
export function compile(serverSchema, version = serverSchema.version) {
  const tables = new Map();
  const declaredVariables = new Set();
  for (const t of serverSchema.tables) {
    const columns = t.columns.map((c) => ({ ...c }));
    const columnIndex = new Map(columns.map((c, i) => [c.name, i]));
    const scopePatterns = t.scopes.map((spec) => {
      const m = /^([^{}]+):\{([^{}:]+)\}$/.exec(spec);
      assert.ok(m, `scope pattern ${spec}`);
      const [, prefix, variable] = m;
      return { variable, prefix, column: variable, columnIndex: columnIndex.get(variable) };
    });
    const table = {
      name: t.name,
      columns,
      primaryKeyIndex: columnIndex.get(t.primaryKey),
      scopePatterns,
      indexes: (t.indexes ?? []).map((ix) => ({ ...ix, columns: [...ix.columns] })),
      materialize: t.materialize ?? true,
      columnIndex,
      declaredVariables: new Set(scopePatterns.map((s) => s.variable)),
      blobRefColumnIndices: columns.flatMap((c, i) => (c.type === 'blob_ref' ? [i] : [])),
      crdtColumns: [],
      encryptedColumnIndices: [],
    };
    tables.set(t.name, table);
    for (const v of table.declaredVariables) declaredVariables.add(v);
  }
  return { version, tables, declaredVariables };
}

/** JSON-comparable form: bytes → base64, undefined-valued keys dropped. */
export function norm(value) {
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
  if (Array.isArray(value)) return value.map(norm);
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = norm(v);
    return out;
  }
  return value;
}

/**
 * A newer reader fills a missing `conflictColumns` with empty bytes
 * (storage-layout.md §5.1); 0.15.48 never wrote it. Accept absent or empty,
 * nothing else, and compare the rest exactly.
 */
export function withoutEmptyConflictColumns(result) {
  if (result === null || result === undefined) return result;
  return {
    ...result,
    results: result.results.map((r) => {
      if (!('conflictColumns' in r)) return r;
      assert.equal(r.conflictColumns, '', `conflictColumns of op ${r.opIndex} must be empty`);
      const { conflictColumns, ...rest } = r;
      return rest;
    }),
  };
}

/** Every read the in-tree storage recorded, through `storage`. */
export async function assertInTreeReads(storage) {
  for (const { partition, table, rowId, row } of expected.rows) {
    const got = await storage.getRow(partition, table, rowId);
    assert.deepEqual(got === undefined ? null : norm(got), row, `getRow ${partition}/${table}/${rowId}`);
  }
  for (const { partition, query, result } of expected.windows) {
    const got = await storage.readCommitWindow(partition, query);
    assert.deepEqual(norm(got), result, `readCommitWindow ${partition} ${JSON.stringify(query)}`);
  }
  for (const { partition, query, result } of expected.scans) {
    const got = await storage.scanRows(partition, query);
    assert.deepEqual(norm(got), result, `scanRows ${partition} ${JSON.stringify(query)}`);
  }
  for (const { partition, clientId, clientCommitId, result } of expected.pushResults) {
    const got = await storage.getPushResult(partition, clientId, clientCommitId);
    assert.deepEqual(
      got === undefined ? null : withoutEmptyConflictColumns(norm(got)),
      result,
      `getPushResult ${partition}/${clientId}/${clientCommitId}`,
    );
  }
  for (const { partition, clientId, record } of expected.clients) {
    const got = await storage.getClientRecord(partition, clientId);
    assert.deepEqual(got === undefined ? null : norm(got), record, `getClientRecord ${partition}/${clientId}`);
  }
  assert.deepEqual(norm(await storage.listPartitionRegistry()), expected.registry);
  for (const [partition, seq] of Object.entries(expected.maxCommitSeq)) {
    assert.equal(await storage.getMaxCommitSeq(partition), seq, `getMaxCommitSeq ${partition}`);
  }
}
