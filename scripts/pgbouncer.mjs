// A real PgBouncer (Debian's package; .ci/run installs it) in front of the
// server named by SYNCULAR_TEST_PG_URL, on 127.0.0.1 and a free port, for
// the pooler tests (__test__/pooler.test.mjs) and the bench
// (bench/lib/pg-schema.mjs). Two database entries: `syncular_tx`, pooled in
// transaction mode, and `syncular_session`, in session mode, both on the
// url's database; with `anyDatabase`, also `*`, any other database name in
// `anyDatabase` mode. Everything else is PgBouncer's default,
// `ignore_startup_parameters` included (empty: any startup parameter
// PgBouncer does not track is refused), as an operator's plain
// configuration would be.
//
//   const bouncer = await startPgBouncer();   // throws the reason when it cannot start
//   bouncer.url('transaction') / bouncer.url('session') / bouncer.url('transaction', 'otherdb')
//   await bouncer.stop();
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The pgbouncer binary, or undefined. */
export function pgbouncerBinary() {
  if (process.env.SYNCULAR_PGBOUNCER) return process.env.SYNCULAR_PGBOUNCER;
  const found = CANDIDATES.find((p) => existsSync(p));
  if (found) return found;
  const which = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' });
  return which.status === 0 ? which.stdout.trim() : undefined;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function accepts(port) {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Starts PgBouncer in front of `pgUrl` (default SYNCULAR_TEST_PG_URL).
 * Options: `poolSize` (default_pool_size, default 20).
 */
export async function startPgBouncer({ pgUrl = process.env.SYNCULAR_TEST_PG_URL, poolSize = 20, anyDatabase } = {}) {
  if (!pgUrl) throw new Error('PgBouncer: SYNCULAR_TEST_PG_URL is not set');
  const bin = pgbouncerBinary();
  if (!bin) throw new Error('PgBouncer: no pgbouncer binary (apt-get install pgbouncer; .ci/run installs it)');
  const server = new URL(pgUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const dbname = decodeURIComponent(server.pathname.slice(1) || user);
  const host = server.hostname || '127.0.0.1';
  const serverPort = server.port || '5432';
  const dir = mkdtempSync(join(tmpdir(), 'syncular-pgbouncer-'));
  // PgBouncer refuses to run as root: as root it drops to `postgres`, which
  // must read the files and write the log.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const entry = (mode) =>
    `host=${host} port=${serverPort} dbname=${dbname} pool_mode=${mode}`;
  const ini = [
    '[databases]',
    `syncular_tx = ${entry('transaction')}`,
    `syncular_session = ${entry('session')}`,
    ...(anyDatabase ? [`* = host=${host} port=${serverPort} pool_mode=${anyDatabase}`] : []),
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'users.txt')}`,
    `logfile = ${join(dir, 'pgbouncer.log')}`,
    `pidfile = ${join(dir, 'pgbouncer.pid')}`,
    'max_client_conn = 1000',
    `default_pool_size = ${poolSize}`,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 });
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`, { mode: 0o644 });
  const args = [join(dir, 'pgbouncer.ini')];
  if (process.getuid?.() === 0) args.unshift('-u', 'postgres');
  const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  let exited;
  child.once('exit', (code, signal) => {
    exited = { code, signal };
  });
  const log = () => {
    try {
      return readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return '';
    }
  };
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (exited || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`PgBouncer did not start (${exited ? `exit ${exited.code ?? exited.signal}` : 'no answer in 10 s'}): ${stderr}${log()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  const auth = server.username ? `${server.username}${server.password ? `:${server.password}` : ''}@` : '';
  return {
    port,
    log,
    /** A url through the pooler, in `mode` ('transaction' or 'session'); with `db`, that database (`anyDatabase`'s mode). */
    url: (mode, db) => `postgres://${auth}127.0.0.1:${port}/${db ?? (mode === 'transaction' ? 'syncular_tx' : 'syncular_session')}`,
    stop: async () => {
      process.removeListener('exit', kill);
      if (!exited) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const t = setTimeout(kill, 3000);
        await gone;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
