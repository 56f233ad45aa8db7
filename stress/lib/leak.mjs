// Leaks (issue 7 §4): runs leak-child.mjs under --expose-gc in its own
// process and returns its figures plus how it ended.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./leak-child.mjs', import.meta.url));

export function runLeak({ calls = 50_000, dropEvery = 2000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'syncular-leak-'));
  return new Promise((resolve) => {
    execFile(process.execPath, ['--expose-gc', CHILD, String(calls), dir, String(dropEvery)], { timeout: 30 * 60_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      rmSync(dir, { recursive: true, force: true });
      if (error) {
        resolve({ crashed: true, problem: `${error.signal ?? `code ${error.code}`}: ${stderr.slice(0, 800)}` });
        return;
      }
      resolve({ crashed: false, ...JSON.parse(stdout.trim().split('\n').pop()) });
    });
  });
}
