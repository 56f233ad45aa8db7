// This package on a SQLite file (WAL, synchronous=NORMAL).
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

export const label = 'native (sqlite)';

export function createStorage(context) {
  return new NativeStorage({ url: `sqlite:${context.path}`, errors: context.server });
}
