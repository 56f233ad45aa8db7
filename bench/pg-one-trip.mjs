// What one round trip to PostgreSQL costs a process, four ways, in
// alternating rounds: a bare socket on the runtime's own event loop
// speaking just enough of the protocol for a simple query (the least any
// driver can pay: no parsing of rows, no pool, no promise machinery of its
// own), Bun.SQL (bun only), node-postgres, and this package's cheapest
// call that reaches the server (`getMaxCommitSeq`, one statement, no
// transaction). Prints per round trip the time, the CPU of every thread
// and of the calling thread (medians over rounds).
//
//   SYNCULAR_TEST_PG_URL=postgres://postgres@127.0.0.1:55433/postgres \
//     bun bench/pg-one-trip.mjs [--rounds 6] [--trips 2000]
//
// The bare socket speaks no authentication: the url's user must be
// trusted from 127.0.0.1 (as the bench servers of bench/README.md are);
// it refuses to run otherwise. The package's storage uses a schema of its
// own (named as scripts/pg-sweep.mjs expects), dropped at the end.
import { createRequire } from 'node:module';
import net from 'node:net';
import { sweepSchemas } from '../scripts/pg-sweep.mjs';

const require = createRequire(import.meta.url);
const pg = require('pg');
const { NativeStorage } = require('../index.js');

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? Number(args[args.indexOf(k) + 1]) : d);
const rounds = opt('--rounds', 6);
const trips = opt('--trips', 2000);
if (!Number.isSafeInteger(rounds) || rounds < 1 || !Number.isSafeInteger(trips) || trips < 1) {
  throw new Error('usage: pg-one-trip.mjs [--rounds N] [--trips N]');
}
const url = process.env.SYNCULAR_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:55432/postgres';
const target = new URL(url);

/** One protocol message: a type byte (or none, for the startup message), its length, its body. */
function message(type, body) {
  const head = type === undefined ? 4 : 5;
  const out = Buffer.alloc(head + body.length);
  if (type !== undefined) out[0] = type.charCodeAt(0);
  out.writeInt32BE(4 + body.length, head - 4);
  body.copy(out, head);
  return out;
}

/** A connection that sends `SELECT 1` as a simple query and waits for ReadyForQuery. */
function bareSocket() {
  const user = decodeURIComponent(target.username || 'postgres');
  const database = decodeURIComponent(target.pathname.slice(1) || user);
  const version = Buffer.alloc(4);
  version.writeInt32BE(196608);
  const startup = message(undefined, Buffer.concat([version, Buffer.from(`user\0${user}\0database\0${database}\0\0`)]));
  const query = message('Q', Buffer.from('SELECT 1\0'));
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(target.port || 5432), target.hostname);
    sock.setNoDelay(true);
    let pending = Buffer.alloc(0);
    let ready = false;
    /** The round trip in flight: { resolve, reject }. */
    let waiter;
    /** Ends the connection: the connect promise, or the trip in flight, fails with `error`. */
    const fail = (error) => {
      sock.destroy();
      if (!ready) reject(error);
      const w = waiter;
      waiter = undefined;
      w?.reject(error);
    };
    const client = {
      trip: () =>
        new Promise((res, rej) => {
          if (sock.destroyed) return rej(new Error('pg-one-trip: the connection is closed'));
          waiter = { resolve: res, reject: rej };
          sock.write(query);
        }),
      close: () => sock.end(),
    };
    sock.on('connect', () => sock.write(startup));
    sock.on('error', fail);
    sock.on('close', () => fail(new Error('pg-one-trip: the server closed the connection')));
    sock.on('data', (data) => {
      pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
      let at = 0;
      while (pending.length - at >= 5) {
        const type = String.fromCharCode(pending[at]);
        const len = pending.readInt32BE(at + 1);
        if (pending.length - at < 1 + len) break;
        if (type === 'R' && pending.readInt32BE(at + 5) !== 0) {
          return fail(new Error(`pg-one-trip: the server asks ${user} for a password; use a user it trusts from this host`));
        }
        if (type === 'E') {
          const text = pending.subarray(at + 5, at + 1 + len).toString().replace(/\0/g, ' ');
          return fail(new Error(`pg-one-trip: the server answered an error: ${text}`));
        }
        if (type === 'Z') {
          if (!ready) {
            ready = true;
            resolve(client);
          } else {
            const w = waiter;
            waiter = undefined;
            w?.resolve();
          }
        }
        at += 1 + len;
      }
      pending = pending.subarray(at);
    });
  });
}

const schema = `syncular_bench_${process.pid}_onetrip`;
const ways = [];
const bare = await bareSocket();
ways.push({ name: 'bare socket, simple query', trip: () => bare.trip(), close: () => bare.close() });
if (typeof Bun !== 'undefined') {
  const sql = new Bun.SQL(url, { max: 1 });
  ways.push({ name: 'Bun.SQL', trip: () => sql.unsafe('SELECT 1'), close: () => sql.end() });
}
const client = new pg.Client({ connectionString: url });
await client.connect();
ways.push({ name: 'node-postgres', trip: () => client.query('SELECT 1'), close: () => client.end() });
const storage = new NativeStorage({ url, schema, maxConnections: 4 });
ways.push({
  name: 'this package (getMaxCommitSeq)',
  trip: () => storage.getMaxCommitSeq('p'),
  close: async () => {
    await storage.close();
    await sweepSchemas(url, [schema]);
  },
});

const cpu = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};
const threadCpu = () => {
  const c = process.threadCpuUsage?.();
  return c === undefined ? NaN : c.user + c.system;
};
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
try {
  for (const w of ways) {
    Object.assign(w, { time: [], cpu: [], thread: [] });
    for (let i = 0; i < 300; i++) await w.trip();
  }
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < ways.length; k++) {
      const w = ways[(k + r) % ways.length];
      const c0 = cpu();
      const t0 = threadCpu();
      const s0 = performance.now();
      for (let i = 0; i < trips; i++) await w.trip();
      w.time.push(((performance.now() - s0) * 1000) / trips);
      w.cpu.push((cpu() - c0) / trips);
      w.thread.push((threadCpu() - t0) / trips);
    }
  }
  console.log(`µs per round trip, medians of ${rounds} rounds of ${trips}: time | CPU every thread | CPU calling thread`);
  for (const w of ways) console.log(`${w.name.padEnd(32)} ${median(w.time).toFixed(1)} | ${median(w.cpu).toFixed(1)} | ${median(w.thread).toFixed(1)}`);
} finally {
  for (const w of ways) await w.close();
}
