// This package on a SQLite file (WAL) with synchronous=NORMAL pinned,
// whatever the package default is.
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

export const label = 'native (sqlite, normal)';

export function createStorage(context) {
  return new NativeStorage({ url: `sqlite:${context.path}`, synchronous: 'normal', errors: context.server });
}
