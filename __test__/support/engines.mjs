// The engines every contract case runs against. Add PostgreSQL here later.
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

export { tempDbPath };
