// Upstream's in-tree SqliteServerStorage over a bun:sqlite database switched
// to WAL with synchronous=NORMAL: the same durability setting as this
// package's default, for a like-for-like comparison. Bun only.
export const label = 'in-tree (sqlite, WAL)';

export async function createStorage(context) {
  const { SqliteServerStorage, BunSqliteDatabase } = context.server ?? {};
  if (typeof SqliteServerStorage !== 'function' || typeof BunSqliteDatabase !== 'function') {
    throw new Error('intree-sqlite-wal: run under bun with --server naming upstream index-bun.ts');
  }
  const db = new BunSqliteDatabase(context.path);
  db.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL');
  return new SqliteServerStorage(db);
}
