// Raw access to a SQLite database file through the sqlite3 command-line shell,
// for SQLite-only checks of the physical layout (storage-layout.md).
import { execFileSync } from 'node:child_process';
import { skipUnder } from './emulation.mjs';

/**
 * A node:test `skip` value for the tests that read a database file through
 * the shell: none runs inside Wine here (no Windows build of it comes from
 * the registries this project uses).
 */
export const noShell = skipUnder('wine', 'no sqlite3 shell for Windows here (the test reads the file through it)');

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
