// A write the file system refuses fails the commit that needed it, and
// nothing of that commit becomes visible: a child pushes commits under a
// file size limit (`ulimit -f`, SIGXFSZ ignored, so a write past the limit
// fails with EFBIG as it would with a full disk) until a push is refused;
// then, without the limit, the file holds exactly the acknowledged commits,
// each whole. The WAL's frames go to the OS in runs (src/sqlite/wal_gather.rs):
// a run's failed write must fail a commit, never leave an acknowledged one
// without its frames (the unit tests there check that another connection
// sees each commit as soon as it returns).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { checkLayout } from '../../stress/lib/crash.mjs';
import { ccidOf } from '../../stress/lib/shape.mjs';
import { noShell } from '../support/sqlite-cli.mjs';

const CHILD = fileURLToPath(new URL('../../stress/lib/crash-child.mjs', import.meta.url));

/** Runs the crash program's child under a file size limit until it stops. */
function pushUntilRefused(path, limitKiB, pushers) {
  const report = `${path}.report`;
  writeFileSync(report, '');
  const options = JSON.stringify({ url: `sqlite:${path}`, synchronous: 'normal' });
  const script = `trap '' XFSZ; ulimit -f ${limitKiB}; exec "$0" "$@"`;
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script, process.execPath, CHILD, options, '1', report, String(pushers)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.stdout.resume();
    const watchdog = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(watchdog);
      const acked = new Set();
      const begun = new Set();
      for (const line of readFileSync(report, 'utf8').split('\n')) {
        const [word, k] = line.split(' ');
        if (word === 'begin') begun.add(Number(k));
        if (word === 'ack') acked.add(Number(k));
      }
      resolve({ acked, begun, code, signal, stderr: err });
    });
  });
}

describe('reliability: a refused write (file size limit)', { skip: noShell || process.platform !== 'linux' }, () => {
  for (const pushers of [1, 4]) {
    test(`${pushers} pusher(s): the refused commit fails, the file holds exactly the acknowledged commits`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'syncular-disklimit-'));
      const path = join(dir, 'd.db');
      try {
        const run = await pushUntilRefused(path, 3072, pushers);
        assert.equal(run.signal, null, `the child ends on its own (stderr: ${run.stderr.slice(-400)})`);
        assert.notEqual(run.code, 0, 'a push was refused');
        assert.match(run.stderr, /SQLITE_FULL|SQLITE_IOERR|disk|write/i, 'with a storage error');
        assert.ok(run.acked.size > 10, `commits were acknowledged before the limit (${run.acked.size})`);
        const refused = [...run.begun].filter((k) => !run.acked.has(k));
        assert.ok(refused.length >= 1, 'a commit was begun and not acknowledged');
        const layout = await checkLayout(path);
        assert.deepEqual(layout.problems, []);
        assert.equal(layout.partial, 0);
        assert.equal(layout.gaps, 0);
        const stored = new Set(layout.commits.map((c) => c.ccid));
        for (const k of run.acked) assert.ok(stored.has(ccidOf(k)), `acknowledged commit ${k} is stored`);
        for (const k of refused) assert.ok(!stored.has(ccidOf(k)), `refused commit ${k} is not stored`);
        assert.equal(layout.commits.length, run.acked.size);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
