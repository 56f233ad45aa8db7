// This package on a SQLite file (WAL), at the package's default
// synchronous setting: whatever `new NativeStorage({ url })` picks when no
// `synchronous` option is given. The two modules beside it pin the setting:
// native-sqlite-normal.mjs and native-sqlite-full.mjs.
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

// The floor (benches/floor.rs) runs at this module's own setting.
export const synchronous = 'full';

export const label = 'native (sqlite)';

export function createStorage(context) {
  return new NativeStorage({ url: `sqlite:${context.path}`, errors: context.server });
}
