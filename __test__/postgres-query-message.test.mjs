// PostgreSQL: a storage-level registered query is one message (its
// transaction, the confined settings, max_commit_seq, EXECUTE of a
// statement the session prepared, ROLLBACK), read back as the query bound
// its values, whatever the session's default for string literals.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { engines } from './support/engines.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { taskRow, writeCommit } from './support/harness.mjs';

const pgEngine = engines.find((e) => e.dialect === 'postgres');
const skip = pgEngine?.skip;

const query = (sql, params = []) => ({ sql, params, tables: ['tasks'] });

async function filled(open) {
  const s = open();
  await s.ensureSchema(fixtureSchema());
  await writeCommit(s, 'p', [
    { table: 'tasks', row: taskRow('t1', { title: 'a\\b' }) },
    { table: 'tasks', row: taskRow('t2', { title: "it's" }) },
  ]);
  return s;
}

test('postgres: a registered query is one message, BEGIN through ROLLBACK, and leaves its session idle', { skip, timeout: 30_000 }, async () => {
  const { schema, open } = pgEngine.shared();
  const s = await filled((o) => open({ maxConnections: 1, ...o }));
  const c = new pg.Client({ connectionString: pgEngine.url });
  await c.connect();
  try {
    const q = query('SELECT id, title FROM tasks WHERE id = ?', ['t2']);
    const first = await s.queryAuthoritative('p', q);
    assert.deepEqual(first.rows, [{ id: 't2', title: "it's" }]);
    assert.equal(first.maxCommitSeq, 1);
    // The second run finds the statement prepared on the session.
    const second = await s.queryAuthoritative('p', query('SELECT id, title FROM tasks WHERE id = ?', ['t1']));
    assert.deepEqual(second.rows, [{ id: 't1', title: 'a\\b' }]);
    const { rows } = await c.query(
      `SELECT state, query FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%max_commit_seq%' AND query LIKE $1`,
      [`%"${schema}"%`],
    );
    assert.equal(rows.length, 1, JSON.stringify(rows));
    const [{ state, query: text }] = rows;
    assert.equal(state, 'idle', 'the batch ended its transaction');
    assert.match(text, /^BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL /);
    assert.match(text, /; EXECUTE syncular_rq_\d+\(E't1'\); ROLLBACK$/);
    assert.doesNotMatch(text, /PREPARE/, 'prepared by the first run');
  } finally {
    await c.end();
    await s.close();
  }
});

test('postgres: with a host that evaluates the serve gate, the gate is read first in the same message', { skip, timeout: 30_000 }, async () => {
  const { schema, open } = pgEngine.shared();
  const gates = [];
  const host = {
    serveGateRefusal: (gate) => {
      gates.push(gate);
      return undefined;
    },
    serveNotReadyError: () => new Error('not ready'),
  };
  const s = await filled((o) => open({ maxConnections: 1, errors: host, ...o }));
  const c = new pg.Client({ connectionString: pgEngine.url });
  await c.connect();
  try {
    await s.touchPartition('p', 1, 'epoch-1');
    for (const id of ['t1', 't2']) {
      const out = await s.queryAuthoritative('p', query('SELECT id FROM tasks WHERE id = ?', [id]), []);
      assert.deepEqual(out.rows, [{ id }]);
      assert.equal(out.maxCommitSeq, 1);
    }
    assert.deepEqual(gates.at(-1), { storedSchemaVersion: 1, logEpoch: 'epoch-1', pending: [] });
    const { rows } = await c.query(
      `SELECT state, query FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%max_commit_seq%' AND query LIKE $1`,
      [`%"${schema}"%`],
    );
    assert.equal(rows.length, 1, JSON.stringify(rows));
    assert.equal(rows[0].state, 'idle');
    // The lock batch's gate statement, prepared when the session connected.
    assert.match(rows[0].query, /^BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; EXECUTE syncular_after_lock_gate_v3\(E'p'\); SET LOCAL /);
    assert.match(rows[0].query, /; EXECUTE syncular_rq_\d+\(E't2'\); ROLLBACK$/);
  } finally {
    await c.end();
    await s.close();
  }
});

test('postgres: values written into the one message read back as the values bound', { skip, timeout: 30_000 }, async () => {
  const { open } = pgEngine.shared();
  const s = await filled(open);
  try {
    const big = 2n ** 62n + 1n;
    const blob = Uint8Array.from([0, 255, 10, 39, 92]);
    const text = `q'"\\ \u00e9 \u{1f600}`;
    const out = await s.queryAuthoritative(
      'p',
      query('SELECT ? AS i, ? AS n, ? AS f, ? AS g, ? AS t, ? AS b, count(*) AS c FROM tasks WHERE id <> ?', [big, -7, 0.1, 1e300, text, blob, 'none']),
    );
    assert.equal(out.rows.length, 1);
    const [r] = out.rows;
    assert.equal(r.i, big);
    assert.equal(r.n, -7);
    assert.equal(r.f, 0.1);
    assert.equal(r.g, 1e300);
    assert.equal(r.t, text);
    assert.deepEqual(Uint8Array.from(r.b), blob);
    assert.equal(r.c, 2);
    // A NULL compares as an untyped parameter would: to nothing.
    const none = await s.queryAuthoritative('p', query('SELECT id FROM tasks WHERE title = ?', [null]));
    assert.deepEqual(none.rows, []);
  } finally {
    await s.close();
  }
});

test("postgres: a session whose default reads backslashes as escapes still runs the guard's text", { skip, timeout: 30_000 }, async () => {
  const { open } = pgEngine.shared();
  const url = new URL(pgEngine.url);
  url.searchParams.set('options', '-c standard_conforming_strings=off');
  const s = await filled((o) => open({ url: url.href, maxConnections: 1, ...o }));
  try {
    // Under standard_conforming_strings = off, 'a\b' would read as 'ab'
    // (and 'a\' would swallow the rest of the message). The batch is
    // tokenized before its SET LOCAL runs; the guard prints both as E''
    // strings, and the session sets the setting on when it connects.
    const out = await s.queryAuthoritative('p', query("SELECT id FROM tasks WHERE title = 'a\\b' OR title = 'a\\'"));
    assert.deepEqual(out.rows, [{ id: 't1' }]);
  } finally {
    await s.close();
  }
});
