// Upstream's in-tree SqliteServerStorage on a SQLite file, as configured by
// default (rollback journal). Needs `--server` naming a @syncular/server
// entry, e.g. an extracted upstream tree's packages/server/src/index-bun.ts
// under bun.
export const label = 'in-tree (sqlite)';

export function createStorage(context) {
  const Storage = context.server?.SqliteServerStorage;
  if (typeof Storage !== 'function') {
    throw new Error('intree-sqlite: pass --server with a @syncular/server entry exporting SqliteServerStorage');
  }
  return new Storage(context.path);
}
