// Swap back (issue 48): the first ensureSchema on an older layout rebuilds
// declared indexes to lead with `_sync_partition`, so a 0.15.48 `unique`
// index, which spanned partitions, becomes unique per partition. The
// in-tree host swapped back onto that file would then accept a value
// another partition holds, which it refused before. `restoreLayout()`
// gives the index back the form the older version created (recorded when
// the repair replaced it), or refuses, changing nothing, when rows written
// since violate that form.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engines, freshPgSchema, sqliteFileUrl, tempDbPath } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { accountRow, hostPush } from './support/harness.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { exec, noShell, query } from './support/sqlite-cli.mjs';
import { Psql } from '../stress/lib/sql.mjs';
import { hostTest, runHost } from './support/upstream.mjs';

const INDEX = 'sync_ix_accounts_email';
const CONFLICT = 'ERR_SYNCULAR_RESTORE_CONFLICT';

const push = (storage, partition, id, email) =>
  hostPush(storage, partition, { clientId: `c-${partition}`, clientCommitId: `k-${partition}-${id}`, ops: [{ table: 'accounts', row: accountRow(id, 'o1', email) }] });

/**
 * The scenario on one engine. `db`: { open(), oldForm(), shape(), insertDuplicate() }.
 */
async function scenario(db) {
  // A database whose unique index has the 0.15.48 form.
  const a = db.open();
  await a.ensureSchema(fixtureSchema());
  await push(a, 'p1', 'a1', 'same@example.com');
  await a.close();
  await db.oldForm();
  assert.deepEqual(await db.shape(), ['email']);

  // Swap in: the repair makes it per partition, and a second partition may
  // now hold the same value.
  const b = db.open();
  try {
    await b.ensureSchema(fixtureSchema());
    assert.deepEqual(await db.shape(), ['_sync_partition', 'email']);
    await push(b, 'p2', 'a2', 'same@example.com');

    // Swap back refused while the data violates the original form; nothing
    // changed, and the storage goes on serving.
    await assert.rejects(b.restoreLayout(), (err) => {
      assert.equal(err.code, CONFLICT, err.message);
      assert.match(err.message, new RegExp(INDEX));
      return true;
    });
    assert.deepEqual(await db.shape(), ['_sync_partition', 'email']);
    assert.equal(await b.getMaxCommitSeq('p2'), 1);

    // Once the duplicate is gone, the original form comes back.
    const tx = await b.begin('p2');
    await tx.lockPartitionForPush();
    await tx.deleteRow('accounts', 'a2');
    await tx.commit();
    assert.deepEqual(await b.restoreLayout(), [INDEX]);
    assert.deepEqual(await db.shape(), ['email']);
    // Nothing left to restore.
    assert.deepEqual(await b.restoreLayout(), []);
  } finally {
    await b.close();
  }
  // The database refuses the cross-partition duplicate again, as the
  // in-tree host relies on.
  await assert.rejects(db.insertDuplicate(), /unique|UNIQUE/);
}

describe('restoreLayout', () => {
  test('sqlite: a 0.15.48 unique index gets its cross-partition form back', { skip: noShell }, async () => {
    const path = tempDbPath();
    await scenario({
      open: () => new NativeStorage({ url: sqliteFileUrl(path) }),
      oldForm: async () => exec(path, `DROP INDEX ${INDEX}; CREATE UNIQUE INDEX "${INDEX}" ON "accounts" ("email");`),
      shape: async () => query(path, `SELECT name FROM pragma_index_info('${INDEX}') ORDER BY seqno`).map((r) => r.name),
      insertDuplicate: async () =>
        exec(path, `INSERT INTO accounts (_sync_partition, _sync_row_id, _sync_server_version, _sync_scopes, _sync_payload, id, org_id, email) VALUES ('p9', 'x', 1, '{}', x'', 'x', 'o1', 'same@example.com')`),
    });
  });

  const pg = engines.find((e) => e.dialect === 'postgres');
  test('postgres: a 0.15.48 unique index gets its cross-partition form back', async () => {
    const url = pg.requireUrl();
    const schema = freshPgSchema();
    const psql = new Psql(url, { schema });
    try {
      await scenario({
        open: () => new NativeStorage({ url, schema }),
        oldForm: () => psql.exec(`DROP INDEX ${INDEX}; CREATE UNIQUE INDEX "${INDEX}" ON "accounts" ("email")`),
        shape: async () =>
          (
            await psql.query(
              `SELECT a.attname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, ord) ON true JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
               WHERE n.nspname = '${schema}' AND c.relname = '${INDEX}' ORDER BY k.ord`,
            )
          ).map((r) => r.name),
        insertDuplicate: () =>
          psql.exec(
            `INSERT INTO accounts (_sync_partition, _sync_row_id, _sync_server_version, _sync_scopes, _sync_payload, id, org_id, email) VALUES ('p9', 'x', 1, '{}', '\\x', 'x', 'o1', 'same@example.com')`,
          ),
      });
    } finally {
      await psql.close();
    }
  });

  test('through upstream\'s handler: the in-tree 0.15.48 host swapped back refuses the cross-partition duplicate again', hostTest, async () => {
    const r = await runHost('restore.ts', [tempDbPath()]);
    assert.deepEqual(r.first, { status: 'applied' });
    assert.deepEqual(r.refusedBefore, { status: 'rejected' }, 'the in-tree host refuses a title another partition holds');
    assert.deepEqual(r.acceptedByOurs, { status: 'applied' }, 'swapped in, uniqueness is per partition');
    assert.equal(r.conflict.code, CONFLICT, r.conflict.message);
    assert.deepEqual(r.deleted, { status: 'applied' });
    assert.deepEqual(r.restored, { value: ['sync_ix_tasks_title_unique'] });
    assert.deepEqual(r.refusedAfter, { status: 'rejected' }, 'swapped back with the restore step: refused again');
    assert.deepEqual(r.stillServes, { status: 'applied' });
    // The control: without the restore step, the swapped-back host accepts it.
    const control = await runHost('restore.ts', [tempDbPath(), '--no-restore']);
    assert.deepEqual(control.refusedAfter, { status: 'applied' });
  });
});
