// The engines every contract case runs against. PostgreSQL joins when
// SYNCULAR_TEST_PG_URL is set (one fresh schema per storage). It is not yet
// part of CI: the engine is incomplete (issue 5); .ci/run will start a
// server and require it once it is.
//
// Each engine:
//   name                 label used in test names
//   create(opts)         a fresh, isolated storage (a NativeStorage instance)
//   shared()             optional: { open(opts) } opening several storages over
//                        ONE database (for cases that need a second storage
//                        object: reopen, same-version layout checks)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NativeStorage } from './package.mjs';

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

export function freshPgSchema() {
  schemaCounter += 1;
  return `syncular_t_${process.pid}_${Date.now().toString(36)}_${schemaCounter}`;
}

if (pgUrl) {
  engines.push({
    name: 'postgres',
    dialect: 'postgres',
    url: pgUrl,
    create: (opts = {}) => new NativeStorage({ url: pgUrl, schema: freshPgSchema(), maxConnections: 4, ...opts }),
    shared: () => {
      const schema = freshPgSchema();
      return { url: pgUrl, schema, open: (opts = {}) => new NativeStorage({ url: pgUrl, schema, maxConnections: 4, ...opts }) };
    },
  });
}

export { tempDbPath };
