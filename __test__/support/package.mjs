// Loads the package under test (CommonJS index.js at the repository root).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const pkg = require('../../index.js');
export const { NativeStorage, createStorage, SyncError, StorageQueryError, StorageConstraintError, DecodeError } = pkg;
