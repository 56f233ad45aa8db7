// This package on a SQLite file (WAL) with synchronous=NORMAL pinned,
// whatever the package default is.
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

// The floor (benches/floor.rs) runs at this module's own setting.
export const synchronous = 'normal';

export const label = 'native (sqlite, normal)';

export function createStorage(context) {
  return new NativeStorage({ url: `sqlite:${context.path}`, synchronous: 'normal', errors: context.server });
}
