// The engines every contract case runs against. PostgreSQL joins when
// SYNCULAR_TEST_PG_URL is set (one fresh schema per storage); under CI=true
// it is required (see below). The URL's role needs no superuser rights:
// creating schemas in the database is enough (.ci/run connects as such a
// role).
//
// Each engine:
//   name                 label used in test names
//   create(opts)         a fresh, isolated storage (a NativeStorage instance)
//   shared()             optional: { open(opts) } opening several storages over
//                        ONE database (for cases that need a second storage
//                        object: reopen, same-version layout checks)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { NativeStorage } from './package.mjs';
import { sweepSchemas } from '../../scripts/pg-sweep.mjs';

const tempDirs = [];
let tempRoot;

function tempDbPath() {
  if (tempRoot === undefined) {
    tempRoot = mkdtempSync(join(tmpdir(), 'syncular-native-test-'));
    tempDirs.push(tempRoot);
  }
  const dir = mkdtempSync(join(tempRoot, 'db-'));
  return join(dir, 'storage.db');
}

process.on('exit', () => {
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
});

export function sqliteFileUrl(path) {
  return `sqlite:${path}`;
}

export const engines = [
  {
    name: 'sqlite-memory',
    dialect: 'sqlite',
    create: (opts = {}) => new NativeStorage({ url: 'sqlite::memory:', ...opts }),
    shared: undefined,
  },
  {
    name: 'sqlite-file',
    dialect: 'sqlite',
    create: (opts = {}) => new NativeStorage({ url: sqliteFileUrl(tempDbPath()), ...opts }),
    shared: () => {
      const path = tempDbPath();
      const url = sqliteFileUrl(path);
      return { path, url, open: (opts = {}) => new NativeStorage({ url, ...opts }) };
    },
  },
];

const pgUrl = process.env.SYNCULAR_TEST_PG_URL;
let schemaCounter = 0;

const madeSchemas = new Set();

export function freshPgSchema() {
  schemaCounter += 1;
  const schema = `syncular_t_${process.pid}_${Date.now().toString(36)}_${schemaCounter}`;
  if (madeSchemas.size === 0) process.once('beforeExit', dropMadeSchemas);
  madeSchemas.add(schema);
  return schema;
}

// Every schema this test file named is dropped when it ends, with those
// that earlier processes left behind (scripts/pg-sweep.mjs): child processes
// that exit without `beforeExit`, and runs that were killed.
async function dropMadeSchemas() {
  const schemas = [...madeSchemas];
  madeSchemas.clear();
  if (!pgUrl) return;
  await sweepSchemas(pgUrl, schemas);
}

/** Why the server at `url` cannot be used, or undefined when it answers. */
async function pgUnreachable(url) {
  let host;
  let port;
  try {
    const u = new URL(url);
    host = u.hostname || '127.0.0.1';
    port = Number(u.port || 5432);
  } catch {
    return `SYNCULAR_TEST_PG_URL is not a URL: ${url}`;
  }
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (why) => {
      socket.destroy();
      resolve(why);
    };
    socket.setTimeout(3000, () => done(`no answer from ${host}:${port} within 3 s`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (err) => done(`cannot reach ${host}:${port}: ${err.message}`));
  });
}

// Locally the PostgreSQL cases join when SYNCULAR_TEST_PG_URL is set. Under
// CI=true (.ci/run starts a server) they are required: a missing URL or an
// unreachable server makes every PostgreSQL case fail, never skip.
const required = process.env.CI === 'true';
const pgProblem = pgUrl
  ? await pgUnreachable(pgUrl)
  : required
    ? 'SYNCULAR_TEST_PG_URL is not set (required when CI=true; .ci/run starts a server)'
    : undefined;

if (pgUrl && pgProblem === undefined) {
  engines.push({
    name: 'postgres',
    dialect: 'postgres',
    url: pgUrl,
    create: (opts = {}) => new NativeStorage({ url: pgUrl, schema: freshPgSchema(), maxConnections: 4, ...opts }),
    // For cases that drive the server themselves: the URL (throws the reason when unavailable).
    requireUrl: () => pgUrl,
    shared: () => {
      const schema = freshPgSchema();
      return { url: pgUrl, schema, open: (opts = {}) => new NativeStorage({ url: pgUrl, schema, maxConnections: 4, ...opts }) };
    },
  });
  // PgBouncer in front of the same server (pooler.test.mjs starts it and
  // names its urls here, so that the child processes some cases start find
  // the same engines): the storage in transaction pooling, and in session
  // pooling where it behaves as on a direct connection.
  const bouncer = process.env.SYNCULAR_TEST_PGBOUNCER ? JSON.parse(process.env.SYNCULAR_TEST_PGBOUNCER) : undefined;
  for (const mode of bouncer ? ['transaction', 'session'] : []) {
    const url = bouncer[mode];
    const pooling = mode === 'transaction' ? { pooling: 'transaction' } : {};
    const open = (schema, opts) => new NativeStorage({ url, schema, maxConnections: 4, ...pooling, ...opts });
    engines.push({
      name: `postgres-pgbouncer-${mode}`,
      dialect: 'postgres',
      url: pgUrl,
      pooler: mode,
      create: (opts = {}) => open(freshPgSchema(), opts),
      // An operator's own tools reach the server directly.
      requireUrl: () => pgUrl,
      // Shared storages name the pooling in the url, as Prisma spells it.
      shared: () => {
        const schema = freshPgSchema();
        const spelt = mode === 'transaction' ? `${url}?pgbouncer=true` : url;
        return { url: spelt, schema, open: (opts = {}) => new NativeStorage({ url: spelt, schema, maxConnections: 4, ...opts }) };
      },
    });
  }
} else if (pgProblem !== undefined && (required || pgUrl)) {
  // Set but unreachable (or required and missing): every case fails with the reason.
  const fail = () => {
    throw new Error(`PostgreSQL engine unavailable: ${pgProblem}`);
  };
  engines.push({ name: 'postgres', dialect: 'postgres', url: pgUrl, create: fail, shared: fail, requireUrl: fail });
}

export { tempDbPath };
