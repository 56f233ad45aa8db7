// The deferred upsert (src/postgres/deferred_upsert.rs, issue 27): inside a
// push (after lockPartitionForPush) an upsert into a table that cannot
// refuse it is answered at once and sent with the transaction's next
// batch. The rows must read the same as rows written at once, a write the
// host must see refused at upsertRow still is, and a transaction that does
// not commit leaves nothing.
//
// Which way a write went is seen with an operator's trigger that records
// statement_timestamp(): statements sent in one message share it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines, freshPgSchema } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { taskRow } from './support/harness.mjs';
import { blobRefJson } from './support/codec.mjs';
import { StorageConstraintError } from '../index.js';

const pg = engines.find((e) => e.dialect === 'postgres');

const hostile = ["quote ' and ''", 'back\\slash \\x00 E\'', 'ünïcödé 🚀', '$1 $$ $prepare$ ;COMMIT;', '{"json":"like"}', '\uFEFFbom first'];
const floats = [0, -0, 0.1, -1.5, 1e300, -1e-300, 5e-324, Number.MAX_VALUE, NaN, Infinity, -Infinity, 2 ** 53];
const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);

/** Rows covering every column type of `tasks` with hostile values (no JSON value: that one is written at once). */
function rows(prefix) {
  return floats.map((score, i) =>
    taskRow(`${prefix}${i} ${hostile[i % hostile.length]}`, {
      title: hostile[i % hostile.length],
      owner: `u ${hostile[(i + 1) % hostile.length]}`,
      done: i % 2 === 0,
      count: i % 3 === 0 ? null : Number.MAX_SAFE_INTEGER - i,
      score,
      data: i % 4 === 0 ? null : bytes.subarray(0, i * 20),
      file: i % 5 === 0 ? null : blobRefJson({ blobId: `sha256:${i.toString(16).padStart(64, '0')}`, byteLength: i }),
    }, { version: i + 1, columnVersions: i % 2 ? Uint8Array.of(1, i) : undefined }),
  );
}

async function withClient(fn) {
  const { default: Pg } = await import('pg');
  const client = new Pg.Client({ connectionString: pg.requireUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** An operator's trigger on `schema`.tasks logging each written row with its statement's start. */
async function addLogTrigger(client, schema) {
  await client.query(`
    CREATE TABLE "${schema}".write_log (row_id text, at timestamptz);
    CREATE FUNCTION "${schema}".log_write() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN INSERT INTO "${schema}".write_log VALUES (NEW."_sync_row_id", statement_timestamp()); RETURN NEW; END $f$;
    CREATE TRIGGER log_write AFTER INSERT OR UPDATE ON "${schema}".tasks FOR EACH ROW EXECUTE FUNCTION "${schema}".log_write();`);
}

/**
 * A storage on a fresh schema with the fixture schema ensured, then an
 * operator's write-logging trigger added (so the storage does not know of
 * it), and a client on the server: `fn(storage, client, schema)`.
 */
async function withLogged(fn) {
  const schema = freshPgSchema();
  const storage = new NativeStorage({ url: pg.requireUrl(), schema, maxConnections: 1 });
  try {
    await storage.ensureSchema(fixtureSchema());
    await withClient(async (client) => {
      await addLogTrigger(client, schema);
      await fn(storage, client, schema);
    });
  } finally {
    await storage.close();
  }
}

/** How many statements (distinct start times) wrote `ids`. */
async function statementsFor(client, schema, ids) {
  const r = await client.query(`SELECT count(DISTINCT at)::int AS n FROM "${schema}".write_log WHERE row_id = ANY($1)`, [ids]);
  return r.rows[0].n;
}

/** A push's writes: the lock (when `locked`), then each upsert a few ms apart, then commit. */
async function write(storage, partition, list, { locked = true, end = 'commit' } = {}) {
  const tx = await storage.begin(partition);
  if (locked) await tx.lockPartitionForPush();
  for (const row of list) {
    await tx.upsertRow('tasks', row, { opIndex: 0 });
    await new Promise((r) => setTimeout(r, 3));
  }
  if (end === 'commit') await tx.commit();
  return tx;
}

/** `partition`'s physical rows of tasks, every column as text, and its row-scope entries. */
async function physical(client, schema, partition) {
  const t = await client.query(
    `SELECT "_sync_row_id", id, project_id, owner_id, title, done::text, count::text, score::text, meta::text,
            encode(data, 'hex') AS data, file, "_sync_server_version"::text, "_sync_scopes"::text,
            encode("_sync_payload", 'hex') AS payload, encode("_sync_column_versions", 'hex') AS cv
       FROM "${schema}".tasks WHERE "_sync_partition" = $1 ORDER BY "_sync_row_id" COLLATE "C"`,
    [partition],
  );
  const s = await client.query(
    `SELECT tbl, var, value, row_id FROM "${schema}".sync_row_scopes WHERE partition = $1 ORDER BY 1, 2, 3, 4`,
    [partition],
  );
  return { rows: t.rows, scopes: s.rows };
}

if (pg) {
  describe('postgres: the deferred upsert', () => {
    test('rows written in a push read the same as rows written at once, and went in one batch with COMMIT', async () => {
      await withLogged(async (storage, client, schema) => {
        const list = rows('r');
        await write(storage, 'eager', list, { locked: false });
        await write(storage, 'deferred', list);
        assert.deepEqual(await physical(client, schema, 'deferred'), await physical(client, schema, 'eager'));
        assert.equal((await physical(client, schema, 'deferred')).rows.length, list.length);
        const ids = list.map((r) => r.rowId);
        const r = await client.query(`SELECT count(DISTINCT at)::int AS n FROM "${schema}".write_log`);
        // The eager partition: one statement per row; the deferred one: all in one.
        assert.equal(r.rows[0].n, list.length + 1, 'every deferred row was written by the COMMIT batch');
        // Written again over existing rows (the UPDATE arm), with other scopes.
        const moved = ids.map((id, i) => ({ ...taskRow(id, { project: `p${i % 3}` }, { version: 99 }) }));
        await write(storage, 'eager', moved, { locked: false });
        await write(storage, 'deferred', moved);
        assert.deepEqual(await physical(client, schema, 'deferred'), await physical(client, schema, 'eager'));
        assert.deepEqual(await storage.getRow('deferred', 'tasks', ids[3]), await storage.getRow('eager', 'tasks', ids[3]));
        assert.equal(await statementsFor(client, schema, ids), 2 * list.length + 2);
      });
    });

    test('a JSON value, a long indexed value, a \\u escape in the scopes or a large row is written at once; the rest still waits', async () => {
      await withLogged(async (storage, client, schema) => {
        const list = [
          taskRow('a', { meta: '{"k":1}' }),
          taskRow('b', { title: 'x'.repeat(1200) }),
          taskRow('c', { owner: 'u\u0001' }),
          taskRow('d'),
          taskRow('e'),
          taskRow('f', { data: new Uint8Array(20_000).fill(7) }),
        ];
        await write(storage, 'p', list);
        // a, b and c alone; d and e together, sent before f (too large to wait) goes alone.
        assert.equal(await statementsFor(client, schema, ['a', 'b', 'c', 'd', 'e', 'f']), 5);
        assert.equal(await statementsFor(client, schema, ['d', 'e']), 1);
        assert.equal((await physical(client, schema, 'p')).rows.length, 6);
      });
    });

    test('a read in the transaction sees the deferred rows', async () => {
      const storage = new NativeStorage({ url: pg.requireUrl(), schema: freshPgSchema(), maxConnections: 1 });
      try {
        await storage.ensureSchema(fixtureSchema());
        const tx = await write(storage, 'p', [taskRow('r1', { title: 't1' }), taskRow('r2')], { end: 'none' });
        const got = await tx.getRow('tasks', 'r1');
        assert.equal(got.rowId, 'r1');
        const scanned = await tx.scanRows({ table: 'tasks', scopeFilter: { project_id: ['p1'] }, afterRowId: null, limit: 10 });
        assert.deepEqual(scanned.map((r) => r.rowId), ['r1', 'r2']);
        await tx.commit();
        assert.equal((await storage.getRow('p', 'tasks', 'r2')).rowId, 'r2');
      } finally {
        await storage.close();
      }
    });

    test('rollback and a rejected push leave no deferred row behind', async () => {
      const storage = new NativeStorage({ url: pg.requireUrl(), schema: freshPgSchema(), maxConnections: 1 });
      try {
        await storage.ensureSchema(fixtureSchema());
        const a = await write(storage, 'p', [taskRow('gone1')], { end: 'none' });
        await a.rollback();
        const b = await write(storage, 'p', [taskRow('gone2')], { end: 'none' });
        await b.commitRejectedPushResult('c1', 'k1', { status: 'rejected', recordedAtMs: 1, cacheIdentity: 'x', results: [] });
        assert.equal(await storage.getRow('p', 'tasks', 'gone1'), undefined);
        assert.equal(await storage.getRow('p', 'tasks', 'gone2'), undefined);
        assert.equal((await storage.getPushResult('p', 'c1', 'k1')).status, 'rejected');
        // The connection carries on: the next push defers again and commits.
        await write(storage, 'p', [taskRow('kept')]);
        assert.equal((await storage.getRow('p', 'tasks', 'kept')).rowId, 'kept');
      } finally {
        await storage.close();
      }
    });

    test('a constraint known at ensureSchema refuses at upsertRow; one added later fails one commit, then refuses at upsertRow', async () => {
      const schema = freshPgSchema();
      const open = () => new NativeStorage({ url: pg.requireUrl(), schema, maxConnections: 1 });
      const refusedAtUpsert = async (storage, id) => {
        const tx = await storage.begin('p');
        await tx.lockPartitionForPush();
        await assert.rejects(tx.upsertRow('tasks', taskRow(id, { title: 'bad' }), { opIndex: 4 }), (e) => {
          assert.ok(e instanceof StorageConstraintError, String(e));
          assert.equal(e.opIndex, 4);
          return true;
        });
        await tx.rollback();
      };
      const storage = open();
      try {
        await storage.ensureSchema(fixtureSchema());
        await withClient(async (client) => {
          await client.query(`ALTER TABLE "${schema}".tasks ADD CONSTRAINT no_bad CHECK (title <> 'bad')`);
          // Added after ensureSchema: the upsert waits and the commit fails; nothing lands.
          const tx = await write(storage, 'p', [taskRow('r1', { title: 'bad' })], { end: 'none' });
          await assert.rejects(tx.commit(), /no_bad/);
          assert.equal(await storage.getRow('p', 'tasks', 'r1'), undefined);
          // From then on this storage writes at once, and the host sees the refusal where it expects it.
          await refusedAtUpsert(storage, 'r2');
          await write(storage, 'p', [taskRow('ok1')]);
          assert.equal((await storage.getRow('p', 'tasks', 'ok1')).rowId, 'ok1');
        });
        // A storage opened over the changed table finds the constraint at ensureSchema.
        const second = open();
        try {
          await second.ensureSchema(fixtureSchema());
          await refusedAtUpsert(second, 'r3');
        } finally {
          await second.close();
        }
      } finally {
        await storage.close();
      }
    });

    test('commit() after a call the server refused rejects (ERR_SYNCULAR_TX_ABORTED) and nothing is stored (review 5)', async () => {
      const schema = freshPgSchema();
      const storage = new NativeStorage({ url: pg.requireUrl(), schema, maxConnections: 1 });
      try {
        await storage.ensureSchema(fixtureSchema());
        await withClient(async (client) => {
          await client.query(`ALTER TABLE "${schema}".tasks ADD CONSTRAINT no_bad CHECK (title <> 'bad')`);
          const tx = await write(storage, 'p', [taskRow('a1', { title: 'bad' }), taskRow('a2')], { end: 'none' });
          // An unrelated read sends the waiting upserts first; the server refuses one, and the
          // transaction is aborted. A caller that ignores that and commits must not be told it held.
          await assert.rejects(tx.getRow('tasks', 'zz'), /no_bad/);
          await assert.rejects(tx.commit(), { code: 'ERR_SYNCULAR_TX_ABORTED' });
          assert.equal(await storage.getRow('p', 'tasks', 'a1'), undefined);
          assert.equal(await storage.getRow('p', 'tasks', 'a2'), undefined);
          // The storage goes on: the next push lands.
          await write(storage, 'p', [taskRow('ok1')]);
          assert.equal((await storage.getRow('p', 'tasks', 'ok1')).rowId, 'ok1');
        });
      } finally {
        await storage.close();
      }
    });

    test('a push larger than the pending limit goes out in several batches, every row kept', async () => {
      await withLogged(async (storage, client, schema) => {
        const list = Array.from({ length: 300 }, (_, i) => taskRow(`big${i}`, { title: `${i} ${'t'.repeat(900)}` }));
        const tx = await storage.begin('p');
        await tx.lockPartitionForPush();
        for (const row of list) await tx.upsertRow('tasks', row, { opIndex: 0 });
        await tx.commit();
        const n = await statementsFor(client, schema, list.map((r) => r.rowId));
        assert.ok(n >= 2 && n <= 10, `${n} batches`);
        const r = await client.query(`SELECT count(*)::int AS n FROM "${schema}".tasks WHERE "_sync_partition" = 'p'`);
        assert.equal(r.rows[0].n, 300);
      });
    });
  });
}
