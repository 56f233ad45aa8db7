// The lock batch's prepared reads (issue 27): each connection prepares the
// serve gate's and a push result's reads when it connects, and the lock
// batch EXECUTEs them. A session that lost them (as behind a pooler that
// hands a client another server session) must still push with the same
// answers, and prepare them again. The storage reaches the server through
// a proxy this test owns, which reads the protocol message by message and,
// when armed, sends DEALLOCATE on the connection just before a lock batch.
import assert from 'node:assert/strict';
import { createServer, connect } from 'node:net';
import { describe, test } from 'node:test';
import { engines, freshPgSchema } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { taskRow } from './support/harness.mjs';

const pg = engines.find((e) => e.dialect === 'postgres');
const GATE = 'syncular_after_lock_gate_v3';
const RESULT = 'syncular_after_lock_results_v2';
const LOCK = 'syncular_lock_partition_v1';
const PUT = 'syncular_put_push_result_v1';
const APPEND = 'syncular_append_commit_v1';

/** Splits a byte stream into whole protocol messages (the first one untyped when `startup`). */
function messages(startup, each) {
  let buf = Buffer.alloc(0);
  let untyped = startup;
  return (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    for (;;) {
      const head = untyped ? 0 : 1;
      if (buf.length < head + 4) return;
      const len = buf.readInt32BE(head) + head;
      if (buf.length < len) return;
      each(untyped ? '' : String.fromCharCode(buf[0]), buf.subarray(0, len));
      untyped = false;
      buf = buf.subarray(len);
    }
  };
}

function query(text) {
  const body = Buffer.from(`${text}\0`);
  const head = Buffer.alloc(5);
  head.write('Q');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** SQLSTATE of an ErrorResponse. */
function sqlstate(msg) {
  for (let i = 5; i < msg.length && msg[i] !== 0; ) {
    const end = msg.indexOf(0, i + 1);
    if (msg[i] === 0x43) return msg.toString('utf8', i + 1, end);
    i = end + 1;
  }
  return undefined;
}

class Proxy {
  /** Lock batches seen, errors the server sent, and DEALLOCATEs sent. */
  batches = [];
  /** The push-result inserts sent with COMMIT. */
  commits = [];
  errors = [];
  injected = 0;
  forget = false;
  /** Registered queries' messages; `forgetGate` drops the gate statement before the next one. */
  queries = [];
  forgetGate = false;
  #server;

  constructor(target) {
    this.#server = createServer((client) => {
      const upstream = connect(target.port, target.host);
      let swallow = 0;
      client.on('data', messages(true, (type, msg) => {
        const text = type === 'Q' ? msg.toString('utf8', 5, msg.length - 1) : '';
        if (text.includes('; SAVEPOINT syncular_push_candidate;')) {
          this.batches.push(text);
          if (this.forget && text.includes(`EXECUTE ${GATE}`)) {
            this.forget = false;
            this.injected += 1;
            swallow += 1;
            upstream.write(query([GATE, RESULT, LOCK, PUT, APPEND].map((s) => `DEALLOCATE ${s}`).join('; ')));
          }
        }
        if (text.startsWith('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;')) {
          this.queries.push(text);
          if (this.forgetGate) {
            this.forgetGate = false;
            this.injected += 1;
            swallow += 1;
            upstream.write(query(`DEALLOCATE ${GATE}`));
          }
        }
        if (text.endsWith('; COMMIT') && (text.includes('sync_push_results') || text.includes(`EXECUTE ${PUT}(`))) this.commits.push(text);
        upstream.write(msg);
      }));
      upstream.on('data', messages(false, (type, msg) => {
        if (swallow > 0) {
          if (type === 'Z') swallow -= 1;
          return;
        }
        if (type === 'E') this.errors.push(sqlstate(msg));
        client.write(msg);
      }));
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
  }

  async start() {
    await new Promise((ok) => this.#server.listen(0, '127.0.0.1', ok));
    return this.#server.address().port;
  }

  close() {
    return new Promise((ok) => this.#server.close(ok));
  }
}

/** A started Proxy to the test server, and the url that reaches the server through it. */
async function proxied() {
  const real = new URL(pg.requireUrl());
  const proxy = new Proxy({ host: real.hostname, port: Number(real.port || 5432) });
  const url = new URL(real);
  url.host = `127.0.0.1:${await proxy.start()}`;
  // The proxy reads the protocol from the first byte: no TLS request.
  url.searchParams.set('sslmode', 'disable');
  return { proxy, url: url.toString() };
}

/** One push in the host's order; returns what the lock batch answered. */
async function push(storage, commitId, rowId) {
  assert.equal(await storage.getPushResult('p1', 'c1', commitId), undefined);
  const tx = await storage.begin('p1');
  await tx.lockPartitionForPush();
  const gate = await tx.readServeGate(1);
  const before = await tx.getPushResult('c1', commitId);
  await tx.upsertRow('tasks', taskRow(rowId), { opIndex: 0 });
  const seq = await tx.appendCommit({ clientId: 'c1', clientCommitId: commitId, actorId: 'a', createdAtMs: 1, changes: [] });
  await tx.putPushResult('c1', commitId, { status: 'applied', commitSeq: seq, recordedAtMs: 1, cacheIdentity: 'x', results: [] });
  await tx.commit();
  return { gate, before, seq };
}

if (pg) {
  describe('postgres: the lock batch\'s prepared reads', () => {
    test('a session that lost them pushes with the same answers and prepares them again', async () => {
      const { proxy, url } = await proxied();
      const storage = new NativeStorage({ url, schema: freshPgSchema(), maxConnections: 1 });
      try {
        await storage.ensureSchema(fixtureSchema());
        await storage.touchPartition('p1', 1, 'e1');
        await storage.declareCheckpoint('p2', 'b', 1, 1000);
        const expected = { storedSchemaVersion: 1, logEpoch: 'e1', pending: [{ partition: 'p2', name: 'b' }] };

        const first = await push(storage, 'k1', 'r1');
        assert.deepEqual({ ...first.gate }, expected);
        assert.equal(first.before, undefined);
        assert.ok(proxy.batches.at(-1).includes(`EXECUTE ${GATE}`), 'the first batch uses the prepared reads');
        assert.ok(proxy.batches.at(-1).includes(`EXECUTE ${RESULT}`), 'and asks for the push result');
        assert.ok(proxy.batches.at(-1).startsWith(`BEGIN; EXECUTE ${LOCK}(`), 'and takes the lock with the prepared statement');
        assert.ok(proxy.commits.at(-1).startsWith(`EXECUTE ${PUT}(`), 'the push result goes with COMMIT, prepared');
        assert.ok(!proxy.commits.at(-1).includes(APPEND), 'the partition\'s first append went at once (no counter row to read)');

        const again = await push(storage, 'k1b', 'r1b');
        assert.equal(again.seq, first.seq + 1);
        assert.match(proxy.commits.at(-1), /^EXECUTE syncular_upsert_[0-9a-f]{16}\(/, 'the upsert goes with COMMIT, prepared (the first push prepared it)');
        assert.ok(proxy.commits.at(-1).includes(`; EXECUTE ${APPEND}(`), 'and so does the append');
        assert.ok(proxy.commits.at(-1).includes(`; EXECUTE ${PUT}(`), 'and so does the push result');

        proxy.forget = true;
        const second = await push(storage, 'k2', 'r2');
        assert.equal(proxy.injected, 1);
        assert.deepEqual(proxy.errors, ['26000'], 'the batch met the missing statement once');
        assert.deepEqual({ ...second.gate }, expected);
        assert.equal(second.before, undefined);
        assert.equal(second.seq, again.seq + 1);
        assert.ok(!proxy.batches.at(-1).includes('EXECUTE'), 'sent again whole');
        assert.ok(proxy.commits.at(-1).startsWith('INSERT INTO sync_push_results'), 'and so is the push result of that transaction (its append went at once)');

        const third = await push(storage, 'k3', 'r3');
        assert.ok(proxy.batches.at(-1).includes(`EXECUTE ${GATE}`), 'prepared again for the next batch');
        assert.match(proxy.commits.at(-1), /^EXECUTE syncular_upsert_[0-9a-f]{16}\(.*; EXECUTE syncular_append_commit_v1\(/s);
        assert.deepEqual(proxy.errors, ['26000']);
        assert.deepEqual({ ...third.gate }, expected);
        assert.equal(third.seq, second.seq + 1);

        assert.equal(await storage.getMaxCommitSeq('p1'), third.seq);
        for (const id of ['r1', 'r1b', 'r2', 'r3']) assert.ok(await storage.getRow('p1', 'tasks', id), `${id} was written`);
        for (const k of ['k1', 'k1b', 'k2', 'k3']) assert.equal((await storage.getPushResult('p1', 'c1', k)).status, 'applied');
      } finally {
        await storage.close();
        await proxy.close();
      }
    });

    test('a registered query on a session that lost the gate statement reads the gate written out', async () => {
      const { proxy, url } = await proxied();
      const host = { serveGateRefusal: () => undefined, serveNotReadyError: () => new Error('not ready') };
      const storage = new NativeStorage({ url, schema: freshPgSchema(), maxConnections: 1, errors: host });
      try {
        await storage.ensureSchema(fixtureSchema());
        await storage.touchPartition('p1', 1, 'e1');
        await storage.declareCheckpoint('p2', 'b', 1, 1000);
        const { seq } = await push(storage, 'k1', 'r1');
        const q = { sql: 'SELECT id FROM tasks WHERE id = ?', params: ['r1'], tables: ['tasks'] };
        const seen = [];
        const gated = (gate) => {
          seen.push({ ...gate, pending: gate.pending.map((p) => ({ ...p })) });
          return undefined;
        };
        host.serveGateRefusal = gated;
        const expected = { storedSchemaVersion: 1, logEpoch: 'e1', pending: [{ partition: 'p2', name: 'b' }] };
        const first = await storage.queryAuthoritative('p1', q, []);
        assert.deepEqual(first, { rows: [{ id: 'r1' }], maxCommitSeq: seq });
        assert.match(proxy.queries.at(-1), new RegExp(`^BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; EXECUTE ${GATE}\\(E'p1'\\); `));
        proxy.forgetGate = true;
        const errorsBefore = proxy.errors.length;
        const second = await storage.queryAuthoritative('p1', q, []);
        assert.equal(proxy.injected, 1);
        assert.deepEqual(proxy.errors.slice(errorsBefore), ['26000'], 'the message met the missing statement once');
        assert.deepEqual(second, first);
        assert.match(proxy.queries.at(-1), /^BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 0::int AS k, /, 'sent again with the gate written out');
        assert.deepEqual(seen, [expected, expected], 'the same gate both ways');
      } finally {
        await storage.close();
        await proxy.close();
      }
    });

    test('the commits asked about before the lock are read in one statement, each with its own answer', async () => {
      const { proxy, url } = await proxied();
      const schema = freshPgSchema();
      const storage = new NativeStorage({ url, schema, maxConnections: 1 });
      // Another host on the same schema, straight to the server.
      const other = new NativeStorage({ url: pg.requireUrl(), schema, maxConnections: 1 });
      try {
        await storage.ensureSchema(fixtureSchema());
        await storage.touchPartition('p1', 1, 'e1');
        await other.ensureSchema(fixtureSchema());
        const asked = ['ka', "k'b", 'kc'];
        // Round 1 prepared, round 2 after the session lost the statements (sent whole).
        for (const [round, lost] of [[1, false], [2, true]]) {
          const ids = asked.map((k) => `${k}-${round}`);
          for (const k of ids) assert.equal(await storage.getPushResult('p1', 'c1', k), undefined);
          // The other host pushes the second of them meanwhile.
          const stored = await push(other, ids[1], `r-${round}`);
          proxy.forget = lost;
          const tx = await storage.begin('p1');
          await tx.lockPartitionForPush();
          await tx.readServeGate(1);
          const batch = proxy.batches.at(-1);
          if (lost) {
            assert.ok(!batch.includes('EXECUTE'), 'sent whole');
            assert.equal(batch.split('FROM ROWS FROM (pg_catalog.unnest(').length - 1, 1, 'one statement reads the results');
          } else {
            assert.equal(batch.split(`EXECUTE ${RESULT}(`).length - 1, 1, 'one statement reads the results');
          }
          for (const k of ids) assert.ok(batch.includes(k.replace("'", "''")), `${k} is asked about`);
          const answers = [];
          for (const k of ids) answers.push(await tx.getPushResult('c1', k));
          await tx.rollback();
          assert.equal(answers[0], undefined);
          assert.equal(answers[2], undefined);
          assert.equal(answers[1]?.status, 'applied', 'the result the other host stored');
          assert.equal(answers[1]?.commitSeq, stored.seq);
        }
        assert.equal(proxy.injected, 1);
      } finally {
        await storage.close();
        await other.close();
        await proxy.close();
      }
    });
  });
}
