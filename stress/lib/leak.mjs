// Leaks (issue 7 §4): runs leak-child.mjs under --expose-gc in its own
// process, on a SQLite file or (`pgUrl`) on a fresh PostgreSQL schema
// (dropped afterwards), and returns its figures plus how it ended.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshSchemaName, pgTarget, sqliteTarget } from './sql.mjs';

const CHILD = fileURLToPath(new URL('./leak-child.mjs', import.meta.url));

// V8 grows its young generation with the allocation rate (semi-spaces of up
// to 16 MB each on 64-bit), and gc() does not shrink it back: a faster build
// measured 2-8 MB more RSS over 300k PostgreSQL calls with heapUsed flat and
// heapTotal 8-25 MB up, and heaptrack found the native heap's live bytes the
// same at 20k and 60k calls. Pinned, RSS growth is what leaks.
const SEMI_SPACE_MB = 1;

export function runLeak({ calls = 50_000, dropEvery = 2000, pgUrl } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'syncular-leak-'));
  const db = pgUrl === undefined ? sqliteTarget(join(dir, 'leak.db')) : pgTarget(pgUrl, { schema: freshSchemaName('syncular_leak'), maxConnections: 4 });
  return new Promise((resolve) => {
    execFile(process.execPath, ['--expose-gc', `--max-semi-space-size=${SEMI_SPACE_MB}`, CHILD, String(calls), JSON.stringify(db.options), String(dropEvery)], { timeout: 30 * 60_000, maxBuffer: 16 << 20 }, async (error, stdout, stderr) => {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
      if (error) {
        resolve({ crashed: true, problem: `${error.signal ?? `code ${error.code}`}: ${stderr.slice(0, 800)}` });
        return;
      }
      resolve({ crashed: false, ...JSON.parse(stdout.trim().split('\n').pop()) });
    });
  });
}
