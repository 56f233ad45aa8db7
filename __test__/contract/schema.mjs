// ensureSchema: table creation, materialization, user indexes, version bumps,
// refusals (contract S1, storage-layout §3, §6.4, §14.6).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { encodeRow } from '../support/codec.mjs';
import {
  ACCOUNT_COLUMNS,
  NOTE_COLUMNS,
  TASK_COLUMNS,
  accountsTable,
  col,
  fixtureSchema,
  notesTable,
  schema,
  table,
  tasksTable,
} from '../support/schema.mjs';
import {
  accountRow,
  assertBytes,
  assertRow,
  noteRow,
  rejectsPlain,
  rejectsQueryError,
  taskRow,
  taskValues,
  unknownTablePattern,
  withStorage,
  writeCommit,
} from '../support/harness.mjs';
import { DecodeError, StorageConstraintError, StorageQueryError } from '../support/package.mjs';
import { noShell } from '../support/sqlite-cli.mjs';

const ITEM_V1 = [col('id', 'string'), col('project_id', 'string'), col('title', 'string'), col('qty', 'integer', true)];
const ITEM_V2 = [...ITEM_V1, col('note', 'string', true), col('flag', 'boolean', true)];

/** Runs statements on the database behind `shared` (the engine's own SQL); the last one's rows. */
async function rawSql(engine, shared, statements) {
  if (engine.dialect === 'sqlite') {
    const { exec, query } = await import('../support/sqlite-cli.mjs');
    for (const s of statements.slice(0, -1)) exec(shared.path, s);
    return query(shared.path, statements.at(-1));
  }
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: shared.url });
  await client.connect();
  try {
    await client.query(`SET search_path TO "${shared.schema}"`);
    let last;
    for (const s of statements) last = await client.query(s);
    return last.rows;
  } finally {
    await client.end();
  }
}

async function hasColumn(engine, shared, table, column) {
  const rows =
    engine.dialect === 'sqlite'
      ? await rawSql(engine, shared, [`SELECT count(*) AS n FROM pragma_table_info('${table}') WHERE name = '${column}'`])
      : await rawSql(engine, shared, [
          `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = '${shared.schema}' AND table_name = '${table}' AND column_name = '${column}'`,
        ]);
  return rows[0].n === 1;
}

function itemsTable(columns, extra = {}) {
  return table('items', columns, { scopes: [{ variable: 'project_id' }], ...extra });
}

function itemRow(columns, id, values, version = 1, partitionProject = 'p1') {
  return {
    rowId: id,
    serverVersion: version,
    scopes: { project_id: partitionProject },
    payload: encodeRow(columns, { id, project_id: partitionProject, ...values }),
  };
}

async function expectDecodeError(promise) {
  let caught;
  await assert.rejects(promise, (err) => {
    caught = err;
    return true;
  });
  assert.equal(caught.code, 'sync.invalid_request', `expected DecodeError code, got ${caught.code}: ${caught.message}`);
  assert.ok(caught instanceof DecodeError, `expected DecodeError instance, got ${caught.constructor?.name}`);
  return caught;
}

export function define(engine) {
  describe('ensureSchema', () => {
    test('row operations before ensureSchema reject with unknown table', () =>
      withStorage(
        engine,
        async (storage) => {
          await rejectsPlain(storage.getRow('p1', 'tasks', 'r1'), unknownTablePattern('tasks'));
          const tx = await storage.begin('p1');
          try {
            await rejectsPlain(tx.getRow('tasks', 'r1'), unknownTablePattern('tasks'));
            await rejectsPlain(tx.upsertRow('tasks', taskRow('r1')), unknownTablePattern('tasks'));
          } finally {
            await tx.rollback();
          }
          // still usable, and ensureSchema then enables the table
          await storage.ensureSchema(fixtureSchema());
          assert.equal(await storage.getRow('p1', 'tasks', 'r1'), undefined);
        },
        { ensure: false },
      ));

    test('creates every configured table; unknown and internal tables stay unknown', () =>
      withStorage(engine, async (storage) => {
        for (const name of ['tasks', 'accounts', 'notes']) {
          assert.equal(await storage.getRow('p1', name, 'missing'), undefined, name);
        }
        for (const name of ['nope', 'sync_commits', 'sync_backfill_checkpoints', 'sync_partitions', 'sync_schema_meta']) {
          await rejectsPlain(storage.getRow('p1', name, 'r1'), unknownTablePattern(name));
        }
      }));

    test('a second call at the same version resolves (memoized) and data survives', () =>
      withStorage(engine, async (storage) => {
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
        await storage.ensureSchema(fixtureSchema());
        await storage.ensureSchema(fixtureSchema(), []);
        assertRow(await storage.getRow('p1', 'tasks', 'r1'), taskRow('r1'));
        const gate = await storage.readServeGate('p1', 1);
        assert.equal(gate.storedSchemaVersion, 1);
      }));

    test('readServeGate reports the stored schema version (0 before ensureSchema)', () =>
      withStorage(
        engine,
        async (storage) => {
          const before = await storage.readServeGate('p1', 3);
          assert.equal(before.storedSchemaVersion, 0);
          assert.equal(before.logEpoch, undefined);
          assert.deepEqual(before.pending, []);
          await storage.ensureSchema(fixtureSchema(3));
          const after = await storage.readServeGate('p1', 3);
          assert.equal(after.storedSchemaVersion, 3);
          assert.deepEqual(after.pending, []);
        },
        { ensure: false },
      ));

    test('identifiers are quoted: odd table, column and index names work', () => {
      const odd = table('weird "t" table', [col('id', 'string'), col('select', 'string'), col('a"b', 'integer', true)], {
        scopes: [{ variable: 'select' }],
        indexes: [{ name: 'ix "odd"', columns: ['select', 'a"b'], unique: true }],
      });
      return withStorage(
        engine,
        async (storage) => {
          const cols = odd.columns;
          const row = (id, sel, n) => ({
            rowId: id,
            serverVersion: 1,
            scopes: { select: sel },
            payload: encodeRow(cols, { id, select: sel, 'a"b': n }),
          });
          await writeCommit(storage, 'p1', [{ table: odd.name, row: row('x', 's1', 1) }]);
          assertRow(await storage.getRow('p1', odd.name, 'x'), row('x', 's1', 1));
          const page = await storage.scanRows('p1', { table: odd.name, scopeFilter: { select: ['s1'] }, afterRowId: null, limit: 10 });
          assert.deepEqual(page.map((r) => r.rowId), ['x']);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await assert.rejects(tx.upsertRow(odd.name, row('y', 's1', 1), { opIndex: 0 }), StorageConstraintError);
          await tx.rollback();
        },
        { schema: schema(1, [odd]) },
      );
    });

    describe('materialization', () => {
      test('materialized table: undecodable payload rejects with DecodeError and writes nothing', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          try {
            await tx.lockPartitionForPush();
            await tx.upsertRow('tasks', taskRow('ok'), { opIndex: 0 });
            const bad = { ...taskRow('bad'), payload: Uint8Array.of(0xff, 0xff) };
            await expectDecodeError(tx.upsertRow('tasks', bad, { opIndex: 1 }));
            assert.equal(await tx.getRow('tasks', 'bad'), undefined);
            const scanned = await tx.scanRows({ table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 });
            assert.deepEqual(scanned.map((r) => r.rowId), ['ok']);
            await tx.commit();
          } catch (e) {
            await tx.rollback();
            throw e;
          }
          assert.equal(await storage.getRow('p1', 'tasks', 'bad'), undefined);
          assertRow(await storage.getRow('p1', 'tasks', 'ok'), taskRow('ok'));
        }));

      test('every kind of malformed payload is a DecodeError (§6.1 rules)', () =>
        withStorage(engine, async (storage) => {
          const cols = TASK_COLUMNS;
          const good = taskRow('g').payload;
          const raw = (values) => encodeRow(cols, { ...taskValues('x'), ...values }, { allowInvalid: true });
          const bad = {
            empty: new Uint8Array(0),
            truncated: good.subarray(0, good.length - 1),
            trailing: Uint8Array.of(...good, 0),
            'null bit on non-nullable': raw({ title: null }),
            'padding bit set': (() => {
              const b = Uint8Array.from(good);
              b[1] |= 0x80; // column 15 does not exist (10 columns)
              return b;
            })(),
            'boolean 2': raw({ done: 2 }),
            'json not json': raw({ meta: '{nope' }),
            'invalid utf-8': (() => {
              const b = encodeRow(cols, taskValues('x', { title: 'ab' }));
              const at = b.indexOf(0x61, 2); // the "a" of the title
              const copy = Uint8Array.from(b);
              copy[at] = 0xff;
              return copy;
            })(),
            'integer beyond 2^53-1': raw({ count: 2 ** 53 }),
            'blob_ref keys out of order': raw({ file: `{"byteLength":3,"blobId":"sha256:${'a'.repeat(64)}"}` }),
            'blob_ref bad id': raw({ file: '{"blobId":"md5:abc","byteLength":3}' }),
            'blob_ref unknown key': raw({ file: `{"blobId":"sha256:${'a'.repeat(64)}","byteLength":3,"extra":1}` }),
          };
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          for (const [label, payload] of Object.entries(bad)) {
            const err = await tx.upsertRow('tasks', { ...taskRow(`bad-${label}`), payload }, { opIndex: 0 }).then(
              () => assert.fail(`${label}: accepted`),
              (e) => e,
            );
            assert.equal(err.code, 'sync.invalid_request', `${label}: ${err.message}`);
            assert.ok(err instanceof DecodeError, `${label}: ${err.constructor?.name}`);
            assert.equal(await tx.getRow('tasks', `bad-${label}`), undefined, label);
          }
          await tx.rollback();
        }));

      test('edge-case payloads that the codec accepts are stored verbatim', () =>
        withStorage(engine, async (storage) => {
          const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"a":1}')]);
          const rows = {
            bom: { ...taskRow('bom'), payload: encodeRow(TASK_COLUMNS, { ...taskValues('bom'), meta: new TextDecoder('utf-8', { ignoreBOM: true }).decode(bom) }) },
            nan: taskRow('nan', { score: Number.NaN }),
            negzero: taskRow('negzero', { score: -0, count: -(2 ** 53 - 1) }),
            inf: taskRow('inf', { score: Number.POSITIVE_INFINITY, count: 2 ** 53 - 1 }),
            scalarJson: taskRow('scalarJson', { meta: ' 42 ' }),
            dupKeys: taskRow('dupKeys', { meta: '{"a":1,"a":2}' }),
            emptyString: taskRow('emptyString', { title: '' }),
            blob: taskRow('blob', { file: { blobId: `sha256:${'0'.repeat(64)}`, byteLength: 0, mediaType: 'text/plain', name: 'x.txt' } }),
            bytes: taskRow('bytes', { data: new Uint8Array(0) }),
          };
          await writeCommit(storage, 'p1', Object.values(rows).map((row) => ({ table: 'tasks', row })));
          for (const [label, row] of Object.entries(rows)) {
            assertRow(await storage.getRow('p1', 'tasks', row.rowId), row, label);
          }
        }));

      test('a failed re-upsert leaves the existing row intact', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1', { title: 'first' }) }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          const bad = { ...taskRow('r1', {}, { version: 2 }), payload: new Uint8Array(0) };
          await expectDecodeError(tx.upsertRow('tasks', bad, { opIndex: 0 }));
          assertRow(await tx.getRow('tasks', 'r1'), taskRow('r1', { title: 'first' }));
          await tx.commit();
          assertRow(await storage.getRow('p1', 'tasks', 'r1'), taskRow('r1', { title: 'first' }));
        }));

      test('non-materialized table stores any payload verbatim and skips user indexes', () =>
        withStorage(engine, async (storage) => {
          const garbage = noteRow('n1', 'p1', '', { payload: Uint8Array.of(0xde, 0xad, 0xbe, 0xef) });
          // notes declares a UNIQUE index on body, which must not exist physically
          const a = noteRow('n2', 'p1', 'same');
          const b = noteRow('n3', 'p1', 'same');
          await writeCommit(storage, 'p1', [
            { table: 'notes', row: garbage },
            { table: 'notes', row: a },
            { table: 'notes', row: b },
          ]);
          assertRow(await storage.getRow('p1', 'notes', 'n1'), garbage);
          assertRow(await storage.getRow('p1', 'notes', 'n3'), b);
        }));

      test('switching materialization on (version bump) back-fills projections', () =>
        withStorage(
          engine,
          async (storage) => {
            await writeCommit(storage, 'p1', [
              { table: 'notes', row: noteRow('n1', 'p1', 'alpha') },
              { table: 'notes', row: noteRow('n2', 'p1', 'beta') },
            ]);
            await storage.ensureSchema(schema(2, [notesTable({ materialize: true })]));
            assertRow(await storage.getRow('p1', 'notes', 'n1'), noteRow('n1', 'p1', 'alpha'));
            // The unique index on body now exists and covers the back-filled rows.
            const tx = await storage.begin('p1');
            await tx.lockPartitionForPush();
            const err = await tx.upsertRow('notes', noteRow('n3', 'p1', 'alpha'), { opIndex: 4 }).then(
              () => undefined,
              (e) => e,
            );
            assert.ok(err instanceof StorageConstraintError, `expected StorageConstraintError, got ${err}`);
            assert.equal(err.opIndex, 4);
            // payloads are now validated
            await expectDecodeError(tx.upsertRow('notes', noteRow('n4', 'p1', 'x', { payload: Uint8Array.of(1) })));
            await tx.rollback();
          },
          { schema: schema(1, [notesTable()]) },
        ));
      test('switching materialization off (version bump) stops validating payloads and keeps rows', () =>
        // Start non-materialized so that the projection columns are added by
        // ALTER TABLE (always nullable, §3.1); switching off then leaves them
        // in place, stale, and upserts only write the meta columns.
        withStorage(
          engine,
          async (storage) => {
            await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'same') }]);
            await storage.ensureSchema(schema(2, [accountsTable({ materialize: true })]));
            await expectDecodeError(writeCommit(storage, 'p1', [{ table: 'accounts', row: { ...accountRow('a0', 'o1', 'x'), payload: Uint8Array.of(7) } }]));
            await storage.ensureSchema(schema(3, [accountsTable({ materialize: false })]));
            assertRow(await storage.getRow('p1', 'accounts', 'a1'), accountRow('a1', 'o1', 'same'));
            const garbage = { ...accountRow('a2', 'o1', 'x'), payload: Uint8Array.of(7, 7, 7) };
            const rewritten = { ...accountRow('a1', 'o1', 'x', { version: 2 }), payload: Uint8Array.of(8) };
            await writeCommit(storage, 'p1', [
              { table: 'accounts', row: garbage },
              { table: 'accounts', row: rewritten },
            ]);
            assertRow(await storage.getRow('p1', 'accounts', 'a2'), garbage);
            assertRow(await storage.getRow('p1', 'accounts', 'a1'), rewritten);
          },
          { schema: schema(1, [accountsTable({ materialize: false })]) },
        ));
    });

    describe('user indexes', () => {
      test('unique index violation becomes StorageConstraintError with the context opIndex', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'x@example.com') }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          let caught;
          await assert.rejects(tx.upsertRow('accounts', accountRow('a2', 'o1', 'x@example.com'), { opIndex: 3 }), (e) => {
            caught = e;
            return true;
          });
          assert.ok(caught instanceof StorageConstraintError, `got ${caught?.constructor?.name}: ${caught?.message}`);
          assert.equal(caught.opIndex, 3);
          await tx.rollback();
          assert.equal(await storage.getRow('p1', 'accounts', 'a2'), undefined);
        }));

      test('opIndex 0 is preserved (not dropped as falsy)', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'z@x') }]);
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          const e = await tx.upsertRow('accounts', accountRow('a2', 'o1', 'z@x'), { opIndex: 0 }).then(
            () => undefined,
            (err) => err,
          );
          await tx.rollback();
          assert.ok(e instanceof StorageConstraintError);
          assert.strictEqual(e.opIndex, 0);
        }));

      test('constraint error without context has opIndex undefined', () =>
        withStorage(engine, async (storage) => {
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.upsertRow('accounts', accountRow('a1', 'o1', 'dup@example.com'));
          let caught;
          await assert.rejects(tx.upsertRow('accounts', accountRow('a2', 'o1', 'dup@example.com')), (e) => {
            caught = e;
            return true;
          });
          assert.ok(caught instanceof StorageConstraintError);
          assert.equal(caught.opIndex, undefined);
          await tx.rollback();
        }));

      test('updating the same row keeps its unique value; non-unique indexes allow duplicates', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'x@example.com') }]);
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'x@example.com', { version: 2 }) }]);
          assert.equal((await storage.getRow('p1', 'accounts', 'a1')).serverVersion, 2);
          // tasks_by_title is not unique
          await writeCommit(storage, 'p1', [
            { table: 'tasks', row: taskRow('t1', { title: 'same' }) },
            { table: 'tasks', row: taskRow('t2', { title: 'same' }) },
          ]);
          assert.ok(await storage.getRow('p1', 'tasks', 't2'));
        }));

      test('unique indexes are per partition', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'pa', [{ table: 'accounts', row: accountRow('a1', 'o1', 'x@example.com') }]);
          await writeCommit(storage, 'pb', [{ table: 'accounts', row: accountRow('a9', 'o1', 'x@example.com') }]);
          assert.ok(await storage.getRow('pb', 'accounts', 'a9'));
        }));

      test('a freed unique value can be reused after delete', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'x@example.com') }]);
          await writeCommit(storage, 'p1', [
            { table: 'accounts', delete: 'a1', scopes: { org_id: 'o1' } },
            { table: 'accounts', row: accountRow('a2', 'o1', 'x@example.com') },
          ]);
          assert.equal(await storage.getRow('p1', 'accounts', 'a1'), undefined);
          assert.ok(await storage.getRow('p1', 'accounts', 'a2'));
        }));

      test('a long index name (hashed physical name) is created and enforced', () => {
        const longName = `accounts_${'x'.repeat(70)}`;
        const t = accountsTable({ indexes: [{ name: longName, columns: ['email'], unique: true }] });
        return withStorage(
          engine,
          async (storage) => {
            const tx = await storage.begin('p1');
            await tx.lockPartitionForPush();
            await tx.upsertRow('accounts', accountRow('a1', 'o1', 'e'), { opIndex: 0 });
            await assert.rejects(tx.upsertRow('accounts', accountRow('a2', 'o1', 'e'), { opIndex: 1 }), StorageConstraintError);
            await tx.rollback();
          },
          { schema: schema(1, [t]) },
        );
      });
    });

    describe('version bumps', () => {
      test('adding a table keeps existing data', () =>
        withStorage(
          engine,
          async (storage) => {
            await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
            await rejectsPlain(storage.getRow('p1', 'accounts', 'a1'), unknownTablePattern('accounts'));
            await storage.ensureSchema(schema(2, [tasksTable(), accountsTable()]));
            assertRow(await storage.getRow('p1', 'tasks', 'r1'), taskRow('r1'));
            await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'e@x') }]);
            assertRow(await storage.getRow('p1', 'accounts', 'a1'), accountRow('a1', 'o1', 'e@x'));
            assert.equal((await storage.readServeGate('p1', 2)).storedSchemaVersion, 2);
          },
          { schema: schema(1, [tasksTable()]) },
        ));

      test('adding nullable columns re-encodes stored payloads (old layout is a prefix)', () =>
        withStorage(
          engine,
          async (storage) => {
            const v1 = [
              itemRow(ITEM_V1, 'i1', { title: 'one', qty: 1 }, 3),
              itemRow(ITEM_V1, 'i2', { title: 'two', qty: null }, 1),
            ];
            const cv = Uint8Array.of(2, 3);
            v1[0].columnVersions = cv;
            await writeCommit(storage, 'p1', v1.map((row) => ({ table: 'items', row })));
            await writeCommit(storage, 'p2', [{ table: 'items', row: itemRow(ITEM_V1, 'i1', { title: 'other', qty: 7 }, 1, 'p2') }]);

            await storage.ensureSchema(schema(2, [itemsTable(ITEM_V2)]));

            const r1 = await storage.getRow('p1', 'items', 'i1');
            assertBytes(r1.payload, encodeRow(ITEM_V2, { id: 'i1', project_id: 'p1', title: 'one', qty: 1 }), 'i1 payload');
            assert.equal(r1.serverVersion, 3);
            assert.deepEqual(r1.scopes, { project_id: 'p1' });
            assertBytes(r1.columnVersions, cv, 'column versions untouched');
            const r2 = await storage.getRow('p1', 'items', 'i2');
            assertBytes(r2.payload, encodeRow(ITEM_V2, { id: 'i2', project_id: 'p1', title: 'two' }), 'i2 payload');
            assert.equal('columnVersions' in r2, false);
            const r3 = await storage.getRow('p2', 'items', 'i1');
            assertBytes(r3.payload, encodeRow(ITEM_V2, { id: 'i1', project_id: 'p2', title: 'other', qty: 7 }), 'p2 payload');

            // After the bump, payloads are validated against the new layout.
            const tx = await storage.begin('p1');
            await tx.lockPartitionForPush();
            await expectDecodeError(tx.upsertRow('items', itemRow(ITEM_V1, 'i3', { title: 'old shape' }), { opIndex: 0 }));
            await tx.upsertRow('items', itemRow(ITEM_V2, 'i3', { title: 'new', note: 'n', flag: true }), { opIndex: 0 });
            await tx.commit();
            assertRow(await storage.getRow('p1', 'items', 'i3'), itemRow(ITEM_V2, 'i3', { title: 'new', note: 'n', flag: true }));
          },
          { schema: schema(1, [itemsTable(ITEM_V1)]) },
        ));

      test('re-encoding covers more rows than one rewrite batch', () =>
        withStorage(
          engine,
          async (storage) => {
            const tx = await storage.begin('p1');
            await tx.lockPartitionForPush();
            for (let i = 0; i < 1203; i++) {
              const id = `i${String(i).padStart(5, '0')}`;
              await tx.upsertRow('items', itemRow(ITEM_V1, id, { title: `t${i}`, qty: i }), { opIndex: i });
            }
            await tx.commit();
            await storage.ensureSchema(schema(2, [itemsTable(ITEM_V2)]));
            for (const i of [0, 499, 500, 501, 999, 1000, 1202]) {
              const id = `i${String(i).padStart(5, '0')}`;
              const row = await storage.getRow('p1', 'items', id);
              assertBytes(row.payload, encodeRow(ITEM_V2, { id, project_id: 'p1', title: `t${i}`, qty: i }), id);
            }
          },
          { schema: schema(1, [itemsTable(ITEM_V1)]) },
        ));

      test('a table removed by a bump is dropped (re-adding it starts empty)', () =>
        withStorage(engine, async (storage) => {
          await writeCommit(storage, 'p1', [{ table: 'notes', row: noteRow('n1', 'p1', 'x') }]);
          await storage.ensureSchema(schema(2, [tasksTable(), accountsTable()]));
          await rejectsPlain(storage.getRow('p1', 'notes', 'n1'), unknownTablePattern('notes'));
          await storage.ensureSchema(schema(3, [tasksTable(), accountsTable(), notesTable()]));
          assert.equal(await storage.getRow('p1', 'notes', 'n1'), undefined);
          const page = await storage.scanRows('p1', { table: 'notes', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 });
          assert.deepEqual(page, []);
        }));

      for (const [label, v2] of [
        ['adding a non-nullable column', [...ITEM_V1, col('extra', 'string', false)]],
        ['removing a column', ITEM_V1.slice(0, 3)],
        ['changing a column type', [ITEM_V1[0], ITEM_V1[1], col('title', 'integer'), ITEM_V1[3]]],
        ['changing nullability', [ITEM_V1[0], ITEM_V1[1], col('title', 'string', true), ITEM_V1[3]]],
        ['reordering columns', [ITEM_V1[0], ITEM_V1[1], ITEM_V1[3], ITEM_V1[2]]],
        ['inserting a nullable column in the middle', [ITEM_V1[0], ITEM_V1[1], col('note', 'string', true), ITEM_V1[2], ITEM_V1[3]]],
      ]) {
        test(`refuses a migration outside the append-only subset: ${label}`, () =>
          withStorage(
            engine,
            async (storage) => {
              await writeCommit(storage, 'p1', [{ table: 'items', row: itemRow(ITEM_V1, 'i1', { title: 'one', qty: 1 }) }]);
              await rejectsPlain(storage.ensureSchema(schema(2, [itemsTable(v2)])));
              // nothing changed: still version 1 with the old payload
              assert.equal((await storage.readServeGate('p1', 1)).storedSchemaVersion, 1);
              assertRow(await storage.getRow('p1', 'items', 'i1'), itemRow(ITEM_V1, 'i1', { title: 'one', qty: 1 }));
              await writeCommit(storage, 'p1', [{ table: 'items', row: itemRow(ITEM_V1, 'i2', { title: 'two' }) }]);
            },
            { schema: schema(1, [itemsTable(ITEM_V1)]) },
          ));
      }

      test('a bump that fails part-way (unique index over duplicates) changes nothing', () =>
        withStorage(
          engine,
          async (storage) => {
            const plain = accountsTable({ indexes: [] });
            await storage.ensureSchema(schema(1, [plain]));
            await writeCommit(storage, 'p1', [
              { table: 'accounts', row: accountRow('a1', 'o1', 'dup@x') },
              { table: 'accounts', row: accountRow('a2', 'o1', 'dup@x') },
            ]);
            const v2 = schema(2, [table('accounts', [...ACCOUNT_COLUMNS, col('extra', 'string', true)], {
              scopes: [{ variable: 'org_id' }],
              indexes: [{ name: 'accounts_email', columns: ['email'], unique: true }],
            }), notesTable()]);
            await assert.rejects(storage.ensureSchema(v2));
            assert.equal((await storage.readServeGate('p1', 1)).storedSchemaVersion, 1);
            assertRow(await storage.getRow('p1', 'accounts', 'a1'), accountRow('a1', 'o1', 'dup@x'));
            // still on the v1 layout: v1 payloads are accepted, duplicates still allowed
            await writeCommit(storage, 'p1', [{ table: 'accounts', row: accountRow('a3', 'o1', 'dup@x') }]);
            await rejectsPlain(storage.getRow('p1', 'notes', 'n1'), unknownTablePattern('notes'));
          },
          { ensure: false },
        ));

      test('a back-fill over an undecodable stored payload fails with DecodeError and changes nothing', () =>
        withStorage(
          engine,
          async (storage) => {
            const garbage = noteRow('n1', 'p1', '', { payload: Uint8Array.of(0xff, 1) });
            await writeCommit(storage, 'p1', [{ table: 'notes', row: garbage }]);
            const err = await storage.ensureSchema(schema(2, [notesTable({ materialize: true })])).then(
              () => assert.fail('expected the bump to fail'),
              (e) => e,
            );
            assert.equal(err.code, 'sync.invalid_request', err.message);
            assert.equal((await storage.readServeGate('p1', 1)).storedSchemaVersion, 1);
            assertRow(await storage.getRow('p1', 'notes', 'n1'), garbage);
          },
          { schema: schema(1, [notesTable()]) },
        ));

      test('refuses to run when the stored version is newer than the running one', () =>
        withStorage(
          engine,
          async (storage) => {
            await storage.ensureSchema(fixtureSchema(5));
            const err = await rejectsPlain(storage.ensureSchema(fixtureSchema(4)));
            assert.ok(!(err instanceof StorageQueryError));
            assert.equal((await storage.readServeGate('p1', 5)).storedSchemaVersion, 5);
            // the storage still works at the ensured version
            await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
            assert.ok(await storage.getRow('p1', 'tasks', 'r1'));
          },
          { ensure: false },
        ));
    });

    if (engine.shared) {
      describe('across storage objects on one database', () => {
        async function twoStorages(fn) {
          const shared = engine.shared();
          const first = shared.open();
          try {
            await fn(first, shared);
          } finally {
            await first.close();
          }
        }

        test('a second storage at the same version and layout starts normally', () =>
          twoStorages(async (first, shared) => {
            await first.ensureSchema(fixtureSchema(2));
            await writeCommit(first, 'p1', [{ table: 'tasks', row: taskRow('r1') }]);
            await first.close();
            const second = shared.open();
            try {
              await second.ensureSchema(fixtureSchema(2));
              assertRow(await second.getRow('p1', 'tasks', 'r1'), taskRow('r1'));
            } finally {
              await second.close();
            }
          }));

        test('a second storage with an older schema version is refused', () =>
          twoStorages(async (first, shared) => {
            await first.ensureSchema(fixtureSchema(2));
            await first.close();
            const second = shared.open();
            try {
              await rejectsPlain(second.ensureSchema(fixtureSchema(1)));
            } finally {
              await second.close();
            }
          }));

        const mismatches = [
          [
            'a column changed type',
            schema(1, [table('items', [col('id', 'string'), col('project_id', 'string'), col('title', 'integer'), col('qty', 'integer', true)], { scopes: [{ variable: 'project_id' }] })]),
            { table: 'items', column: 'title' },
          ],
          [
            'a column renamed',
            schema(1, [table('items', [col('id', 'string'), col('project_id', 'string'), col('name', 'string'), col('qty', 'integer', true)], { scopes: [{ variable: 'project_id' }] })]),
            { table: 'items', column: 'name' },
          ],
          [
            'a column added without a bump',
            schema(1, [itemsTable([...ITEM_V1, col('note', 'string', true)])]),
            { table: 'items', column: 'note' },
          ],
          [
            'a column removed without a bump',
            schema(1, [itemsTable(ITEM_V1.slice(0, 3))]),
            { table: 'items', column: 'qty' },
          ],
        ];
        for (const [label, configured, details] of mismatches) {
          test(`same version, different layout (${label}) → stored_layout_mismatch`, () =>
            twoStorages(async (first, shared) => {
              await first.ensureSchema(schema(1, [itemsTable(ITEM_V1)]));
              await first.close();
              const second = shared.open();
              try {
                const err = await rejectsQueryError(second.ensureSchema(configured), 'sync.storage.stored_layout_mismatch');
                assert.deepEqual({ ...err.details }, details);
              } finally {
                await second.close();
              }
            }));
        }

        // What the in-tree 0.15.48 storage wrote: row tables without
        // _sync_column_versions, user indexes over the declared columns only
        // (a UNIQUE one spanning partitions).
        const dropColumnVersions = (t) => `ALTER TABLE ${t} DROP COLUMN "_sync_column_versions"`;
        const legacyUniqueIndex = [
          'DROP INDEX "sync_ix_accounts_email"',
          'CREATE UNIQUE INDEX "sync_ix_accounts_email" ON "accounts" ("email")',
        ];

        // rawSql on SQLite goes through the sqlite3 shell.
        const rawSkip = engine.dialect === 'sqlite' && noShell;

        test('same version over an in-tree 0.15.48 layout: completed in place, rows kept, uniqueness per partition', { skip: rawSkip }, () =>
          twoStorages(async (first, shared) => {
            await first.ensureSchema(fixtureSchema(2));
            await writeCommit(first, 'p1', [{ table: 'accounts', row: accountRow('a1', 'o1', 'a@example.com') }]);
            await first.close();
            await rawSql(engine, shared, [dropColumnVersions('tasks'), dropColumnVersions('accounts'), ...legacyUniqueIndex]);
            assert.equal(await hasColumn(engine, shared, 'accounts', '_sync_column_versions'), false);
            const second = shared.open();
            try {
              await second.ensureSchema(fixtureSchema(2));
              assertRow(await second.getRow('p1', 'accounts', 'a1'), accountRow('a1', 'o1', 'a@example.com'));
              // The same email in another partition is no longer a violation.
              await writeCommit(second, 'p2', [{ table: 'accounts', row: accountRow('a1', 'o1', 'a@example.com') }]);
              assertRow(await second.getRow('p2', 'accounts', 'a1'), accountRow('a1', 'o1', 'a@example.com'));
              // Column versions round-trip on the added column.
              const tx = await second.begin('p1');
              await tx.lockPartitionForPush();
              const row = taskRow('t1');
              await tx.upsertRow('tasks', { ...row, columnVersions: Uint8Array.of(2, 3) }, { opIndex: 0 });
              await tx.commit();
              assert.deepEqual([...(await second.getRow('p1', 'tasks', 't1')).columnVersions], [2, 3]);
            } finally {
              await second.close();
            }
            for (const t of ['tasks', 'accounts']) assert.equal(await hasColumn(engine, shared, t, '_sync_column_versions'), true, t);
            assert.equal(Number((await rawSql(engine, shared, ['SELECT schema_version AS v FROM sync_schema_meta']))[0].v), 2);
          }));

        test('same version: a refusal after a repairable table rolls the repair back', { skip: rawSkip }, () =>
          twoStorages(async (first, shared) => {
            await first.ensureSchema(fixtureSchema(2));
            await first.close();
            // tasks alone would be repaired; accounts lost an app column.
            await rawSql(engine, shared, [dropColumnVersions('tasks'), 'DROP INDEX "sync_ix_accounts_email"', 'ALTER TABLE accounts DROP COLUMN email']);
            const second = shared.open();
            try {
              const err = await rejectsQueryError(second.ensureSchema(fixtureSchema(2)), 'sync.storage.physical_layout_mismatch');
              assert.equal(err.details.table, 'accounts');
              assert.equal(err.details.column, 'email');
              assert.match(err.details.fix, /schema version/);
            } finally {
              await second.close();
            }
            assert.equal(await hasColumn(engine, shared, 'tasks', '_sync_column_versions'), false);
          }));

        test('same version with a stored table missing from the schema → stored_layout_mismatch {table}', () =>
          twoStorages(async (first, shared) => {
            await first.ensureSchema(schema(1, [itemsTable(ITEM_V1), table('extra', NOTE_COLUMNS, { scopes: [{ variable: 'project_id' }] })]));
            await first.close();
            const second = shared.open();
            try {
              const err = await rejectsQueryError(second.ensureSchema(schema(1, [itemsTable(ITEM_V1)])), 'sync.storage.stored_layout_mismatch');
              assert.deepEqual({ ...err.details }, { table: 'extra' });
            } finally {
              await second.close();
            }
          }));
      });
    }

    test('an uncompiled ServerSchema is refused, naming compileSchema, and creates nothing', async () => {
      const storage = engine.create();
      try {
        // As a host declares it: the key is `id`, the second column, and a
        // scope pattern; taken as compiled, the first column would become the key.
        const declared = {
          version: 1,
          tables: [
            {
              name: 'items',
              columns: [col('project_id', 'string'), col('id', 'string')],
              primaryKey: 'id',
              scopes: ['project:{project_id}'],
            },
          ],
        };
        await assert.rejects(storage.ensureSchema(declared), (e) => {
          assert.equal(e.code, 'ERR_SYNCULAR_INVALID_ARGUMENT');
          assert.match(e.message, /table "items" is uncompiled.*compileSchema\(schema\)/);
          return true;
        });
        await assert.rejects(storage.getRow('p1', 'items', 'x'), { message: unknownTablePattern('items') });
      } finally {
        await storage.close();
      }
    });

    test('ensureSchema rejects (never throws) for a malformed schema argument', async () => {
      const storage = engine.create();
      try {
        for (const bad of [undefined, null, 42, {}, { version: 'x', tables: new Map() }]) {
          let p;
          assert.doesNotThrow(() => {
            p = storage.ensureSchema(bad);
          });
          await assert.rejects(p, Error, `ensureSchema(${String(bad)})`);
        }
        await storage.ensureSchema(schema(1, [table('accounts', ACCOUNT_COLUMNS, { scopes: [{ variable: 'org_id' }] })]));
        assert.equal(await storage.getRow('p1', 'accounts', 'x'), undefined);
      } finally {
        await storage.close();
      }
    });
  });
}
