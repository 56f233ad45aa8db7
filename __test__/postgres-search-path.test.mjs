// PostgreSQL: the writer-fence trigger fires in whatever session inserts
// into sync_commits (an operator's script, a migration tool, a host process
// with another default search_path). Its function names the fence table
// with the storage's schema, so it answers the same whatever the caller's
// search_path. A function written without the schema (by an older version
// of this package, or by the in-tree storage's migrate()) is qualified
// again when a storage opens the schema.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { engines, freshPgSchema } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { taskRow, writeCommit } from './support/harness.mjs';
import { fixtureSchema } from './support/schema.mjs';

const engine = engines.find((e) => e.dialect === 'postgres');

const quoteIdent = (name) => `"${name.replaceAll('"', '""')}"`;

/** A raw session whose search_path does not name the storage's schema. */
async function foreignSession(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('SET search_path TO pg_catalog');
  return client;
}

/** Inserts a commit row into `schema`.sync_commits the way a foreign writer would. */
function insertCommit(client, schema, partition, seq, writerVersion) {
  return client.query(
    `INSERT INTO ${quoteIdent(schema)}.sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)
     VALUES ($1, $2, 'raw', $3, 'raw', 1, $4)`,
    [partition, seq, `raw-${seq}`, writerVersion],
  );
}

/** The fence function's body, as the in-tree storage's migrate() writes it: unqualified. */
const UNQUALIFIED_FENCE = `CREATE OR REPLACE FUNCTION syncular_writer_fence() RETURNS trigger AS $fence$
BEGIN
  IF EXISTS (
    SELECT 1 FROM sync_writer_fence f
    WHERE f.partition = NEW.partition
      AND (NEW.writer_version IS NULL OR NEW.writer_version < f.required_writer_version)
  ) THEN
    RAISE EXCEPTION 'sync.storage.writer_fence_rejected';
  END IF;
  RETURN NEW;
END
$fence$ LANGUAGE plpgsql`;

async function rejected(promise) {
  return promise.then(
    () => assert.fail('the insert was admitted'),
    (e) => e,
  );
}

if (engine) {
  describe('postgres: the writer fence answers whatever the caller search_path', () => {
    test('an insert into sync_commits from a session whose search_path lacks the schema meets the fence', async () => {
      const url = engine.requireUrl();
      const schema = freshPgSchema();
      const storage = new NativeStorage({ url, schema });
      const raw = await foreignSession(url);
      try {
        await storage.ensureSchema(fixtureSchema());
        await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t1') }]);
        await storage.declareCheckpoint('fenced', 'cp', 2, 1000);
        // No fence on this partition: admitted, whatever the writer version.
        await insertCommit(raw, schema, 'open', 1, null);
        // Fenced at 2: an old writer is refused with the fence's own error, not a missing relation.
        const e1 = await rejected(insertCommit(raw, schema, 'fenced', 1, null));
        assert.match(e1.message, /sync\.storage\.writer_fence_rejected/);
        assert.equal(e1.code, 'P0001');
        const e2 = await rejected(insertCommit(raw, schema, 'fenced', 2, 1));
        assert.match(e2.message, /sync\.storage\.writer_fence_rejected/);
        await insertCommit(raw, schema, 'fenced', 3, 2);
        // The storage itself still reads and writes as before.
        assert.equal(await writeCommit(storage, 'p1', [{ table: 'tasks', row: taskRow('t2') }]), 2);
      } finally {
        await raw.end();
        await storage.close();
      }
    });

    test('a function left unqualified (in-tree migrate, older versions) is qualified again when a storage opens the schema', async () => {
      const url = engine.requireUrl();
      const schema = freshPgSchema();
      const first = new NativeStorage({ url, schema });
      const raw = await foreignSession(url);
      try {
        await first.ensureSchema(fixtureSchema());
        await first.declareCheckpoint('fenced', 'cp', 2, 1000);
        await first.close();
        // What the in-tree storage's migrate() runs on every ensureSchema.
        await raw.query(`SET search_path TO ${quoteIdent(schema)}`);
        await raw.query(UNQUALIFIED_FENCE);
        await raw.query('DROP TRIGGER IF EXISTS sync_commits_writer_fence ON sync_commits');
        await raw.query('CREATE TRIGGER sync_commits_writer_fence BEFORE INSERT ON sync_commits FOR EACH ROW EXECUTE FUNCTION syncular_writer_fence()');
        await raw.query('SET search_path TO pg_catalog');
        const broken = await rejected(insertCommit(raw, schema, 'fenced', 1, null));
        assert.match(broken.message, /relation "sync_writer_fence" does not exist/, 'the unqualified body depends on the caller');

        // A storage opening the schema repairs it, and still works with what the in-tree storage left.
        const again = new NativeStorage({ url, schema });
        try {
          await again.ensureSchema(fixtureSchema());
          const e = await rejected(insertCommit(raw, schema, 'fenced', 1, null));
          assert.match(e.message, /sync\.storage\.writer_fence_rejected/);
          assert.equal(await writeCommit(again, 'p1', [{ table: 'tasks', row: taskRow('t1') }]), 1);
          assert.equal(await again.writerFenceAllows('fenced', 1), false);
        } finally {
          await again.close();
        }
      } finally {
        await raw.end();
      }
    });
  });
}
