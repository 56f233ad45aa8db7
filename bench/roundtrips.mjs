// Round trips per push on PostgreSQL, counted at the socket.
//
//   bun bench/roundtrips.mjs --server <tree>/packages/server/src/index-bun.ts \
//     --module bench/modules/native-postgres.mjs --module bench/modules/intree-postgres.mjs
//
// A TCP proxy in this process stands between the storages and the server at
// SYNCULAR_TEST_PG_URL (default: the local server of docs/testing.md) and
// reads the protocol's message types both ways. A round trip is a flight of
// client messages sent while the client had nothing outstanding: it then
// waits for the server's ReadyForQuery. Host-shaped pushes
// (`lib/host.mjs`) of 1 and 10 ops run after a warm-up, sequentially, and
// the table gives per push: round trips, simple-protocol queries ('Q', which
// may hold several statements), extended-protocol executes ('E'), and the
// bytes each way. Counting is exact; the proxy's own latency makes these
// runs useless for timing.
import net from 'node:net';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { push } from './lib/host.mjs';
import { batch } from './lib/workloads.mjs';
import { schema } from './lib/fixture.mjs';

const argv = process.argv.slice(2);
const modules = [];
let serverPath;
let pushes = 200;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--module') modules.push(resolve(argv[++i]));
  else if (argv[i] === '--server') serverPath = resolve(argv[++i]);
  else if (argv[i] === '--pushes') pushes = Number(argv[++i]);
  else throw new Error(`unknown argument ${argv[i]}`);
}
if (modules.length === 0) throw new Error('name at least one --module');

const target = new URL(process.env.SYNCULAR_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:55432/postgres');
const counts = { roundTrips: 0, queries: 0, executes: 0, sentBytes: 0, receivedBytes: 0 };

/** Splits a byte stream into protocol messages; calls `each(type)`. */
function reader(untypedFirst, each) {
  let buf = Buffer.alloc(0);
  let untyped = untypedFirst;
  return (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    for (;;) {
      if (untyped) {
        if (buf.length < 8) return;
        const len = buf.readInt32BE(0);
        if (buf.length < len) return;
        // SSLRequest / GSSENCRequest: the real startup message follows.
        const code = buf.readInt32BE(4);
        untyped = code === 80877103 || code === 80877104;
        buf = buf.subarray(len);
        continue;
      }
      if (buf.length < 5) return;
      const len = buf.readInt32BE(1);
      if (buf.length < len + 1) return;
      each(String.fromCharCode(buf[0]));
      buf = buf.subarray(len + 1);
    }
  };
}

const proxy = net.createServer((client) => {
  const upstream = net.connect(Number(target.port || 5432), target.hostname);
  let outstanding = 0;
  let ready = false; // past authentication: the first ReadyForQuery
  client.on('data', (d) => {
    if (ready) counts.sentBytes += d.length;
    fromClient(d);
    upstream.write(d);
  });
  upstream.on('data', (d) => {
    if (ready) counts.receivedBytes += d.length;
    fromServer(d);
    client.write(d);
  });
  const fromClient = reader(true, (t) => {
    if (!ready) return;
    if (t === 'Q' || t === 'S') {
      if (outstanding === 0) counts.roundTrips += 1;
      outstanding += 1;
    }
    if (t === 'Q') counts.queries += 1;
    if (t === 'E') counts.executes += 1;
  });
  const fromServer = reader(false, (t) => {
    if (t !== 'Z') return;
    if (!ready) ready = true;
    else if (outstanding > 0) outstanding -= 1;
  });
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
});
await new Promise((ok) => proxy.listen(0, '127.0.0.1', ok));
const proxied = new URL(target);
proxied.host = `127.0.0.1:${proxy.address().port}`;
process.env.SYNCULAR_TEST_PG_URL = proxied.href;

const server = serverPath ? await import(pathToFileURL(serverPath).href) : undefined;
const rows = [];
for (const path of modules) {
  const mod = await import(pathToFileURL(path).href);
  const storage = await mod.createStorage({ server, purpose: 'bench' });
  await storage.ensureSchema(schema);
  const row = { label: mod.label ?? path };
  for (const ops of [1, 10]) {
    for (let c = 0; c < 20; c++) await push(storage, 'bench', `warm-${ops}-${c}`, batch('row', 'p1', ops, c), c);
    for (const k of Object.keys(counts)) counts[k] = 0;
    for (let c = 0; c < pushes; c++) await push(storage, 'bench', `rt-${ops}-${c}`, batch('row', 'p1', ops, c + 100), c);
    row[ops] = Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / pushes]));
  }
  rows.push(row);
  await storage.close?.();
}
proxy.close();

const fmt = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
console.log(`per host-shaped push (${pushes} pushes each, after 20 warm-up)`);
console.log('| storage | ops | round trips | simple queries | executes | bytes sent | bytes received |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) {
  for (const ops of [1, 10]) {
    const c = r[ops];
    console.log(`| ${r.label} | ${ops} | ${fmt(c.roundTrips)} | ${fmt(c.queries)} | ${fmt(c.executes)} | ${fmt(c.sentBytes)} | ${fmt(c.receivedBytes)} |`);
  }
}
process.exit(0);
