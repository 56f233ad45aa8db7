// Stored JSON in every form the in-tree writers left it (docs/legacy-forms.md).
//
// PostgreSQL: a Bun.SQL host's JSON lands in JSONB as a jsonb *string*
// holding the JSON text. Written here with direct SQL over data this package
// wrote, and (host test) by the real in-tree PostgresServerStorage through
// Bun.SQL and node-postgres. Every read must return what was written: no
// commit missed by a pull, no row missed by a scan, no scope map handed out
// as a string. SQLite: TEXT JSON is the only form. A value neither engine
// can read is ERR_SYNCULAR_CORRUPT_VALUE naming the table and the row.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { engines, freshPgSchema } from './support/engines.mjs';
import { hostPush, norm, taskRow } from './support/harness.mjs';
import { schema, tasksTable } from './support/schema.mjs';
import { exec as sqliteExec, sqliteCliAvailable } from './support/sqlite-cli.mjs';
import { hostTest, runHost } from './support/upstream.mjs';

const P = 'p';
const FILTER = { project_id: ['p1'] };
const testSchema = () => schema(1, [tasksTable({ indexes: [{ name: 'tasks_by_meta', columns: ['meta'] }] })]);
const NOW = 1_700_000_000_000;

const REACTIONS = [
  ['r-object', { kind: 'mail', to: ['a'] }],
  ['r-array', [1, 'two']],
  ['r-number', 42],
  ['r-null', null],
  ['r-string', 'plain'],
  ['r-json-string', '42'],
];

/** Two pushes (upserts, a delete, a blob reference), a client record, reactions (one failed). */
async function fill(storage) {
  await hostPush(storage, P, {
    clientId: 'c1',
    clientCommitId: 'k1',
    ops: [
      { table: 'tasks', row: taskRow('a', { meta: '{"k":1}' }) },
      { table: 'tasks', row: taskRow('b') },
    ],
    onApplied: (tx) => tx.setBlobRefs('tasks', 'a', ['blob-1']),
  });
  await hostPush(storage, P, {
    clientId: 'c1',
    clientCommitId: 'k2',
    ops: [
      { table: 'tasks', delete: 'b', scopes: { project_id: 'p1', owner_id: 'u1' } },
      { table: 'tasks', row: taskRow('c', { meta: '[1,2]' }) },
    ],
  });
  await storage.putClientRecord(P, {
    clientId: 'c1',
    actorId: 'actor-1',
    wireVersion: 2,
    cursor: 2,
    updatedAtMs: NOW,
    subscriptions: [{ id: 's', table: 'tasks', scopes: FILTER }],
  });
  const tx = await storage.begin(P);
  await tx.enqueueReactions(
    REACTIONS.map(([key, payload], i) => ({
      idempotencyKey: key,
      type: 'notify',
      version: 1,
      payload,
      sourceClientId: 'c1',
      sourceClientCommitId: 'k1',
      sourceCommitSeq: 1,
      createdAtMs: NOW + i,
      maxAttempts: 3,
    })),
  );
  await tx.commit();
  const [claimed] = await storage.claimReactions(P, { leaseOwner: 'w', types: ['notify'], nowMs: NOW + 100, leaseDurationMs: 1000, limit: 1 });
  assert.equal(claimed.idempotencyKey, 'r-object');
  await storage.failReaction(P, 'r-object', { leaseOwner: 'w', retryAtMs: NOW + 5000, failure: { code: 'app.x', atMs: NOW + 100, details: { n: 1 } } });
}

/** Every read of what `fill` wrote, normalized for deepStrictEqual. */
async function readAll(storage) {
  const tx = await storage.begin(P);
  try {
    const txScan = await tx.scanRows({ table: 'tasks', scopeFilter: FILTER, limit: 100 });
    const txGetRow = await Promise.all(['a', 'c'].map((id) => tx.getRow('tasks', id)));
    await tx.prefetchRows('tasks', ['a', 'c', 'b']);
    const prefetched = await Promise.all(['a', 'c', 'b'].map((id) => tx.getRow('tasks', id)));
    return norm({
      window: await storage.readCommitWindow(P, { table: 'tasks', scopeFilter: FILTER, afterSeq: 0, throughSeq: 10, limitChanges: 100 }),
      scan: await storage.scanRows(P, { table: 'tasks', scopeFilter: FILTER, limit: 100 }),
      txScan,
      getRow: await Promise.all(['a', 'c'].map((id) => storage.getRow(P, 'tasks', id))),
      txGetRow,
      prefetched,
      byIndex: await storage.scanRowsByIndex(P, { table: 'tasks', index: 'tasks_by_meta', values: ['{"k":1}'], limit: 10 }),
      rowScopes: await storage.getRowScopes(P, 'tasks', 'a'),
      blobRows: await storage.listRowsReferencingBlob(P, 'blob-1'),
      pushResults: await Promise.all(['k1', 'k2'].map((k) => storage.getPushResult(P, 'c1', k))),
      client: await storage.getClientRecord(P, 'c1'),
      clients: await storage.listClientRecords(P),
      reactions: await Promise.all(REACTIONS.map(([key]) => storage.getReaction(P, key))),
      reactionList: await storage.listReactions(P, { limit: 100 }),
    });
  } finally {
    await tx.rollback();
  }
}

/** What `fill` must read back as, checked once against the values written. */
function assertFilled(reads) {
  assert.deepEqual(
    reads.window.map((c) => c.changes.map((ch) => [ch.rowId, ch.op, ch.scopes])),
    [
      [
        ['a', 'upsert', { project_id: 'p1', owner_id: 'u1' }],
        ['b', 'upsert', { project_id: 'p1', owner_id: 'u1' }],
      ],
      [
        ['b', 'delete', { project_id: 'p1', owner_id: 'u1' }],
        ['c', 'upsert', { project_id: 'p1', owner_id: 'u1' }],
      ],
    ],
  );
  assert.deepEqual(reads.scan.map((r) => r.rowId), ['a', 'c']);
  assert.deepEqual(reads.byIndex.map((r) => r.rowId), ['a']);
  assert.deepEqual(reads.rowScopes.scopes, { project_id: 'p1', owner_id: 'u1' });
  assert.deepEqual(reads.blobRows, [{ table: 'tasks', rowId: 'a', scopes: { project_id: 'p1', owner_id: 'u1' } }]);
  assert.deepEqual(reads.client.subscriptions, [{ id: 's', table: 'tasks', scopes: FILTER }]);
  assert.deepEqual(
    reads.reactions.map((r) => r.payload),
    REACTIONS.map(([, payload]) => payload),
  );
  assert.deepEqual(reads.reactions[0].lastFailure, { code: 'app.x', atMs: NOW + 100, details: { n: 1 } });
  assert.equal(reads.pushResults[1].status, 'applied');
}

/** The row an error names: `partition "p", commit_seq 1`. */
const rowOf = (key) => Object.entries(key).map(([k, v]) => `${k} ${JSON.stringify(v)}`).join(', ');

/** Rejects with ERR_SYNCULAR_CORRUPT_VALUE naming `table.column` and the row `key`. */
async function rejectsCorrupt(promise, [table, column, key, shape = 'a JSON object'], what) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.code, 'ERR_SYNCULAR_CORRUPT_VALUE', `${what}: ${err.message}`);
    assert.equal(err.message, `unreadable stored value: ${table}.${column} of the row ${rowOf(key)} is not ${shape}`, what);
    return true;
  }, what);
}

// ---------------------------------------------------------------------------
// PostgreSQL

const pgEngine = engines.find((e) => e.dialect === 'postgres');

async function pgClient(url, schemaName) {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schemaName}` });
  await client.connect();
  return client;
}

async function typeofs(client, sql) {
  return (await client.query(sql)).rows.map((r) => r.t);
}

describe('postgres: the jsonb-string form of every JSON column', { skip: pgEngine ? false : 'SYNCULAR_TEST_PG_URL is not set' }, () => {
  test('data rewritten to Bun.SQL\'s form reads back exactly as written; index lookups find both forms', async () => {
    const { url, schema: name, open } = pgEngine.shared();
    const writer = open();
    await writer.ensureSchema(testSchema());
    await fill(writer);
    const before = await readAll(writer);
    assertFilled(before);
    await writer.close();

    const client = await pgClient(url, name);
    try {
      // What a Bun.SQL host stores: a jsonb string holding the JSON text.
      await client.query('UPDATE sync_changes SET scopes = to_jsonb(scopes::text)');
      await client.query(`UPDATE tasks SET "_sync_scopes" = to_jsonb("_sync_scopes"::text),
        meta = CASE "_sync_row_id" WHEN 'a' THEN to_jsonb('{"k":1}'::text) ELSE to_jsonb(meta::text) END`);
      await client.query('UPDATE sync_push_results SET result = to_jsonb(result::text)');
      await client.query('UPDATE sync_clients SET subscriptions = to_jsonb(subscriptions::text)');
      // String payloads are stored in that form already (this package writes them so).
      await client.query(`UPDATE sync_reactions SET payload = to_jsonb(payload::text) WHERE jsonb_typeof(payload) <> 'string'`);
      await client.query('UPDATE sync_reactions SET last_failure = to_jsonb(last_failure::text) WHERE last_failure IS NOT NULL');
      const forms = await typeofs(
        client,
        `SELECT DISTINCT t FROM (SELECT jsonb_typeof(scopes) t FROM sync_changes
           UNION ALL SELECT jsonb_typeof("_sync_scopes") FROM tasks UNION ALL SELECT jsonb_typeof(meta) FROM tasks
           UNION ALL SELECT jsonb_typeof(result) FROM sync_push_results UNION ALL SELECT jsonb_typeof(subscriptions) FROM sync_clients
           UNION ALL SELECT jsonb_typeof(payload) FROM sync_reactions UNION ALL SELECT jsonb_typeof(last_failure) FROM sync_reactions
             WHERE last_failure IS NOT NULL) x`,
      );
      assert.deepEqual(forms, ['string']);

      const reader = open();
      try {
        await reader.ensureSchema(testSchema());
        assert.deepEqual(await readAll(reader), before);
        // A Bun.SQL host's string payload, and node-postgres's form of one.
        const insert = `INSERT INTO sync_reactions (partition, idempotency_key, type, version, payload, source_client_id,
          source_client_commit_id, source_commit_seq, created_at_ms, available_at_ms, status, attempts, max_attempts)
          VALUES ('p', $1, 'notify', 1, $2::jsonb, 'c1', 'k1', 1, 1, 1, 'completed', 1, 3)`;
        await client.query(insert, ['bun-string', JSON.stringify(JSON.stringify('via bun'))]);
        await client.query(insert, ['pg-string', JSON.stringify('via pg')]);
        assert.equal((await reader.getReaction(P, 'bun-string')).payload, 'via bun');
        assert.equal((await reader.getReaction(P, 'pg-string')).payload, 'via pg');
      } finally {
        await reader.close();
      }
    } finally {
      await client.end();
    }
  });

  test('a value neither form holds is ERR_SYNCULAR_CORRUPT_VALUE naming the table and the row', async () => {
    const { url, schema: name, open } = pgEngine.shared();
    const writer = open();
    await writer.ensureSchema(testSchema());
    await fill(writer);
    await writer.close();
    const client = await pgClient(url, name);
    const storage = open();
    try {
      await storage.ensureSchema(testSchema());
      const window = () => storage.readCommitWindow(P, { table: 'tasks', scopeFilter: FILTER, afterSeq: 0, throughSeq: 10, limitChanges: 100 });
      const change = ['sync_changes', 'scopes', { partition: P, commit_seq: 1, idx: 1 }];
      for (const value of [`'[1]'`, `to_jsonb('not json'::text)`, `to_jsonb('[]'::text)`, `'"{\\"x\\":"'::jsonb`]) {
        await client.query(`UPDATE sync_changes SET scopes = ${value} WHERE commit_seq = 1 AND idx = 1`);
        await rejectsCorrupt(window(), change, value);
      }

      const row = ['tasks', '_sync_scopes', { _sync_partition: P, _sync_row_id: 'c' }];
      await client.query(`UPDATE tasks SET "_sync_scopes" = to_jsonb('[]'::text) WHERE "_sync_row_id" = 'c'`);
      await rejectsCorrupt(storage.getRow(P, 'tasks', 'c'), row, 'getRow');
      await rejectsCorrupt(storage.scanRows(P, { table: 'tasks', scopeFilter: FILTER, limit: 100 }), row, 'scanRows');
      await rejectsCorrupt(storage.getRowScopes(P, 'tasks', 'c'), row, 'getRowScopes');
      await rejectsCorrupt(storage.scanRowsByIndex(P, { table: 'tasks', index: 'tasks_by_meta', values: ['[1,2]'], limit: 10 }), row, 'scanRowsByIndex');
      const tx = await storage.begin(P);
      await rejectsCorrupt(tx.getRow('tasks', 'c'), row, 'tx.getRow');
      await rejectsCorrupt(tx.prefetchRows('tasks', ['c']), row, 'prefetchRows');
      await tx.rollback();

      await client.query(`UPDATE sync_clients SET subscriptions = '{}'`);
      await rejectsCorrupt(
        storage.getClientRecord(P, 'c1'),
        ['sync_clients', 'subscriptions', { partition: P, client_id: 'c1' }, 'a JSON array'],
        'getClientRecord',
      );
      await client.query(`UPDATE sync_reactions SET last_failure = '5' WHERE idempotency_key = 'r-object'`);
      await rejectsCorrupt(
        storage.getReaction(P, 'r-object'),
        ['sync_reactions', 'last_failure', { partition: P, idempotency_key: 'r-object' }],
        'getReaction',
      );
    } finally {
      await client.end();
      await storage.close();
    }
  });
});

// The in-tree storage writes the data itself, through its real drivers
// (bench/modules' in-tree PostgreSQL modules); ours opens it at the same
// schema version.
describe(
  'host: data the in-tree PostgreSQL storage wrote through Bun.SQL and node-postgres',
  pgEngine ? hostTest : { skip: 'SYNCULAR_TEST_PG_URL is not set' },
  () => {
    test('every commit, row, record and reaction reads as the in-tree storage reads it, through the handler too', async () => {
      const url = pgEngine.requireUrl();
      const out = await runHost('legacy-json-pg.ts', [freshPgSchema()], { env: { SYNCULAR_TEST_PG_URL: url }, timeoutMs: 240_000 });
      const bun = out.drivers.bun;
      const all = (form) => Object.fromEntries(Object.keys(bun.written).map((k) => [k, [form]]));
      assert.deepEqual(bun.written, all('string'), 'Bun.SQL stored every JSON value as a jsonb string');
      assert.deepEqual(bun.after, bun.written, 'opening the schema left the stored forms as they were');
      assert.equal(out.drivers.pg.written['tasks._sync_scopes'][0], 'object');
      for (const [driver, side] of Object.entries(out.drivers)) {
        const { intree, ours } = side;
        assert.equal(intree.window.length, 4, `${driver}: the in-tree window holds the four commits`);
        assert.equal(intree.scan.length, 5, `${driver}: the in-tree scan holds the five live rows`);
        assert.equal(intree.pulls.bootstrap.rows.flat().length, 5, `${driver}: the in-tree bootstrap`);
        assert.equal(intree.pulls.incremental.commits.length, 4, `${driver}: the in-tree incremental pull`);
        for (const key of Object.keys(intree)) assert.deepEqual(ours[key], intree[key], `${driver}: ${key}`);
      }
    });
  },
);

// ---------------------------------------------------------------------------
// SQLite

const sqliteFile = engines.find((e) => e.name === 'sqlite-file');
const noCli = sqliteCliAvailable() ? false : 'the sqlite3 shell is not installed';

describe('sqlite: stored JSON text', { skip: noCli }, () => {
  test('JSON text with whitespace reads as written; a BLOB or text that is not JSON of the column\'s shape is ERR_SYNCULAR_CORRUPT_VALUE', async () => {
    const { path, open } = sqliteFile.shared();
    const writer = open();
    await writer.ensureSchema(testSchema());
    await fill(writer);
    const before = await readAll(writer);
    assertFilled(before);
    await writer.close();

    // In-tree JSON.parse accepts JSON whitespace around and inside.
    sqliteExec(
      path,
      `UPDATE sync_changes SET scopes = ' { "project_id" : "p1", "owner_id":"u1" } ';
       UPDATE tasks SET "_sync_scopes" = char(10) || '{"project_id": "p1", "owner_id": "u1"}';`,
    );
    let storage = open();
    try {
      await storage.ensureSchema(testSchema());
      assert.deepEqual(await readAll(storage), before);
    } finally {
      await storage.close();
    }

    const window = (s) => s.readCommitWindow(P, { table: 'tasks', scopeFilter: FILTER, afterSeq: 0, throughSeq: 10, limitChanges: 100 });
    const change = ['sync_changes', 'scopes', { partition: P, commit_seq: 2, idx: 1 }];
    const row = ['tasks', '_sync_scopes', { _sync_partition: P, _sync_row_id: 'c' }];
    const cases = [
      [`UPDATE sync_changes SET scopes = CAST(scopes AS BLOB) WHERE commit_seq = 2 AND idx = 1`, (s) => window(s), change],
      [`UPDATE sync_changes SET scopes = '{"project_id":' WHERE commit_seq = 2 AND idx = 1`, (s) => window(s), change],
      [`UPDATE sync_changes SET scopes = '"{\\"project_id\\":\\"p1\\"}"' WHERE commit_seq = 2 AND idx = 1`, (s) => window(s), change],
      [`UPDATE tasks SET "_sync_scopes" = '["p1"]' WHERE "_sync_row_id" = 'c'`, (s) => s.getRow(P, 'tasks', 'c'), row],
      [`UPDATE tasks SET "_sync_scopes" = CAST('{"project_id":"p1"}' AS BLOB) WHERE "_sync_row_id" = 'c'`, (s) => s.scanRows(P, { table: 'tasks', scopeFilter: FILTER, limit: 100 }), row],
      [`UPDATE tasks SET "_sync_scopes" = '"x"' WHERE "_sync_row_id" = 'c'`, (s) => s.getRowScopes(P, 'tasks', 'c'), row],
      [`UPDATE sync_clients SET subscriptions = '{}'`, (s) => s.getClientRecord(P, 'c1'), ['sync_clients', 'subscriptions', { partition: P, client_id: 'c1' }, 'a JSON array']],
      [`UPDATE sync_reactions SET payload = 'nope' WHERE idempotency_key = 'r-array'`, (s) => s.getReaction(P, 'r-array'), ['sync_reactions', 'payload', { partition: P, idempotency_key: 'r-array' }, 'JSON']],
      [`UPDATE sync_reactions SET last_failure = '[]' WHERE idempotency_key = 'r-object'`, (s) => s.getReaction(P, 'r-object'), ['sync_reactions', 'last_failure', { partition: P, idempotency_key: 'r-object' }]],
    ];
    for (const [sql, read, details] of cases) {
      sqliteExec(path, sql);
      storage = open();
      try {
        await storage.ensureSchema(testSchema());
        await rejectsCorrupt(read(storage), details, sql);
      } finally {
        await storage.close();
      }
    }
  });
});
