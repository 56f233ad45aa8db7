// Shared by the host programs: the upstream server and core modules from the
// tree named by SYNCULAR_UPSTREAM_TREE, loaded at run time, and this
// package. Each program prints one JSON line with what it saw.
import { join } from 'node:path';

const tree = process.env.SYNCULAR_UPSTREAM_TREE;
if (!tree) throw new Error('SYNCULAR_UPSTREAM_TREE is not set');

export const server: any = await import(join(tree, 'packages/server/src/index-bun.ts'));
export const core: any = await import(join(tree, 'packages/core/src/index.ts'));
export const native: any = await import(join(import.meta.dir, '..', '..', 'index.js'));

export function report(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}
