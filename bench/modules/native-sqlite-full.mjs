// This package on a SQLite file (WAL) with synchronous=FULL pinned,
// whatever the package default is.
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

// The floor (benches/floor.rs) runs at this module's own setting.
export const synchronous = 'full';

export const label = 'native (sqlite, full)';

export function createStorage(context) {
  return new NativeStorage({ url: `sqlite:${context.path}`, synchronous: 'full', errors: context.server });
}
