// Raw reads through the sqlite3 shell, with room for large results (the
// shared __test__/support/sqlite-cli.mjs keeps execFileSync's 1 MB default).
import { execFileSync } from 'node:child_process';

export function query(path, sql) {
  const out = execFileSync('sqlite3', ['-json', path, sql], { encoding: 'utf8', maxBuffer: 1 << 30 });
  return out.trim() === '' ? [] : JSON.parse(out);
}
