// The upstream @syncular/server tree the host-level tests drive (its real
// request handler, segment store and in-tree storages), given at run time:
// SYNCULAR_UPSTREAM_TREE names an extracted tree with its dependencies
// installed, SYNCULAR_BUN the bun that runs it (scripts/upstream-tree.sh
// prepares both from a git mirror). Nothing of upstream is in this
// repository. Without them the host-level tests skip and say why.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = join(here, '..', '..');
export const HOST_DIR = join(here, '..', 'host');

function resolveUpstream() {
  const tree = process.env.SYNCULAR_UPSTREAM_TREE;
  const bun = process.env.SYNCULAR_BUN || 'bun';
  if (!tree) return { skip: 'SYNCULAR_UPSTREAM_TREE is not set (scripts/upstream-tree.sh MIRROR prepares it)' };
  if (!existsSync(join(tree, 'packages', 'server', 'src', 'index-bun.ts'))) {
    return { skip: `SYNCULAR_UPSTREAM_TREE=${tree} holds no packages/server/src/index-bun.ts` };
  }
  return { tree, bun, server: join(tree, 'packages', 'server', 'src', 'index-bun.ts') };
}

/** `{ tree, bun, server }`, or `{ skip }` with the reason the host tests cannot run. */
export const upstream = resolveUpstream();

/** node:test options for a host-level test: skipped, with the reason, when no tree is given. */
export const hostTest = upstream.skip ? { skip: upstream.skip } : {};

/**
 * Runs `__test__/host/<program>` under bun with the upstream tree in its
 * environment; resolves with the JSON object the program printed last on
 * stdout. A non-zero exit, or no JSON, rejects with everything it printed.
 */
export function runHost(program, args = [], { env = {}, timeoutMs = 120_000 } = {}) {
  if (upstream.skip) throw new Error(upstream.skip);
  return new Promise((resolve, reject) => {
    const child = spawn(upstream.bun, [join(HOST_DIR, program), ...args], {
      cwd: REPO,
      env: { ...process.env, SYNCULAR_UPSTREAM_TREE: upstream.tree, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const last = out.trim().split('\n').pop() ?? '';
      let parsed;
      try {
        parsed = JSON.parse(last);
      } catch {
        parsed = undefined;
      }
      if (code !== 0 || parsed === undefined) {
        reject(new Error(`${program} exited ${code ?? signal}\n--- stdout\n${out}\n--- stderr\n${err}`));
      } else {
        resolve(parsed);
      }
    });
  });
}
