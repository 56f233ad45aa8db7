// PostgreSQL outages under load (issue 22): the storage reaches the server
// through a TCP proxy this test owns, pushes run from four pushers, and the
// proxy is stopped (every connection cut, new ones refused) and started
// again on the same port. While the server cannot be reached, no call may
// wait longer than `connectTimeoutMs` plus a margin, and each fails with a
// code; once the server answers again, a push succeeds within a second
// (the connect back-off is capped at a fifth of `connectTimeoutMs`); and
// every push that was acknowledged is there afterwards.
import assert from 'node:assert/strict';
import { createServer, connect } from 'node:net';
import { describe, test } from 'node:test';
import { engines, freshPgSchema } from './support/engines.mjs';
import { NativeStorage } from './support/package.mjs';
import { fixtureSchema } from './support/schema.mjs';
import { taskRow, writeCommit } from './support/harness.mjs';

const pg = engines.find((e) => e.dialect === 'postgres');
const CONNECT_TIMEOUT_MS = 1000;
// Room for a loaded 2-core machine beyond the documented bound.
const MARGIN_MS = 1500;

/** A TCP proxy to `target` that can be stopped (cutting every connection) and started again on its port. */
class Proxy {
  #target;
  #server;
  #sockets = new Set();
  port = 0;

  constructor(target) {
    this.#target = target;
  }

  async start() {
    this.#server = createServer((client) => {
      const upstream = connect(this.#target);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.port, '127.0.0.1', resolve);
    });
    this.port = this.#server.address().port;
  }

  async stop() {
    const closed = new Promise((resolve) => this.#server.close(resolve));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }
}

if (pg) {
  describe('postgres: outages', () => {
    test('calls fail within connectTimeoutMs while the server is away, and the storage serves again within a second of its return', async (t) => {
      const real = new URL(pg.requireUrl());
      const proxy = new Proxy({ host: real.hostname, port: Number(real.port || 5432) });
      await proxy.start();
      const url = new URL(real);
      url.host = `127.0.0.1:${proxy.port}`;
      const storage = new NativeStorage({ url: url.toString(), schema: freshPgSchema(), maxConnections: 4, connectTimeoutMs: CONNECT_TIMEOUT_MS });
      const acked = [];
      const failures = [];
      let stopping = false;
      let n = 0;
      try {
        await storage.ensureSchema(fixtureSchema());
        const pusher = async (k) => {
          while (!stopping) {
            const id = `r${k}-${(n += 1)}`;
            const started = performance.now();
            try {
              await writeCommit(storage, 'p', [{ table: 'tasks', row: taskRow(id, { title: id, project: 'p' }) }]);
              acked.push({ id, at: performance.now() });
            } catch (err) {
              failures.push({ code: err?.code, ms: performance.now() - started, message: String(err?.message).slice(0, 160) });
              await new Promise((r) => setTimeout(r, 20));
            }
          }
        };
        const pushers = [0, 1, 2, 3].map(pusher);
        await new Promise((r) => setTimeout(r, 500));
        assert.ok(acked.length > 0, 'pushes went through before the outage');

        // The outage: every connection cut, new ones refused, for three seconds.
        await proxy.stop();
        const outageStarted = performance.now();
        await new Promise((r) => setTimeout(r, 3000));
        const duringOutage = failures.filter((f) => f.ms !== undefined);
        assert.ok(duringOutage.length > 0, 'calls failed during the outage');
        for (const f of duringOutage) {
          assert.equal(typeof f.code, 'string', `uncoded failure: ${f.message}`);
          assert.ok(f.ms <= CONNECT_TIMEOUT_MS + MARGIN_MS, `a call waited ${f.ms.toFixed(0)} ms (${f.code})`);
        }

        // The server answers again: a push succeeds within a second.
        const ackedBefore = acked.length;
        await proxy.start();
        const back = performance.now();
        while (acked.length === ackedBefore && performance.now() - back < 10_000) await new Promise((r) => setTimeout(r, 10));
        assert.ok(acked.length > ackedBefore, 'no push succeeded after the server came back');
        const firstAfter = acked[ackedBefore].at - back;
        assert.ok(firstAfter <= 1000 + MARGIN_MS / 3, `first push ${firstAfter.toFixed(0)} ms after the server came back (outage ${(back - outageStarted).toFixed(0)} ms)`);

        const worst = Math.max(...duringOutage.map((f) => f.ms));
        t.diagnostic(`outage: ${duringOutage.length} calls failed (${[...new Set(duringOutage.map((f) => f.code))].join(', ')}), the longest after ${worst.toFixed(0)} ms; first push ${firstAfter.toFixed(0)} ms after the server came back`);
        stopping = true;
        await Promise.all(pushers);
        // Nothing acknowledged is lost.
        for (const { id } of acked) {
          const row = await storage.getRow('p', 'tasks', id);
          assert.equal(row?.rowId, id, `acknowledged ${id} is missing`);
        }
        assert.ok((await storage.getMaxCommitSeq('p')) >= acked.length, 'commitSeq below the acknowledged pushes');
      } finally {
        stopping = true;
        await storage.close();
        await proxy.stop().catch(() => {});
      }
    });
  });
}
