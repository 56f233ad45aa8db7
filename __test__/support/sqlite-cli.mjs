// Raw access to a SQLite database file through the sqlite3 command-line shell,
// for SQLite-only checks of the physical layout (storage-layout.md).
import { execFileSync } from 'node:child_process';

export function sqliteCliAvailable() {
  try {
    execFileSync('sqlite3', ['-version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

/** Run SQL and return the rows as objects (sqlite3 -json). */
export function query(path, sql) {
  const out = execFileSync('sqlite3', ['-json', path, sql], { encoding: 'utf8' });
  return out.trim() === '' ? [] : JSON.parse(out);
}

export function exec(path, sql) {
  execFileSync('sqlite3', [path, sql], { encoding: 'utf8' });
}
