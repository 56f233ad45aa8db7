// Upstream's in-tree SqliteServerStorage over a SQLite database switched to
// WAL with synchronous=NORMAL: the same durability setting as
// native-sqlite-normal.mjs, for a like-for-like comparison. Under bun it
// runs on bun:sqlite (BunSqliteDatabase, from index-bun.ts); under Node 24
// on node:sqlite (NodeSqliteDatabase, from a bundle of index-node.ts: see
// bench/README.md, "Under Node 24").
export const label = 'in-tree (sqlite, WAL)';

export async function createStorage(context) {
  const { SqliteServerStorage, BunSqliteDatabase, NodeSqliteDatabase } = context.server ?? {};
  const Driver = typeof Bun !== 'undefined' ? BunSqliteDatabase : NodeSqliteDatabase;
  if (typeof SqliteServerStorage !== 'function' || typeof Driver !== 'function') {
    throw new Error('intree-sqlite-wal: pass --server naming upstream index-bun.ts (bun) or a bundle of index-node.ts (Node ≥ 22.5)');
  }
  const db = new Driver(context.path);
  db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL');
  return new SqliteServerStorage(db);
}
