'use strict';
// syncular-native-storage: a ServerStorage for @syncular/server backed by a
// Rust engine. See README.md; the types are in index.d.ts.

const { NativeStorage } = require('./lib/storage');
const errors = require('./lib/errors');
const ops = require('./lib/ops');
const copy = require('./lib/copy');

/** Factory form: `createStorage({ url, errors })`. */
function createStorage(options) {
  return new NativeStorage(options);
}

// One `exports.name = …` per export: Node's CommonJS lexer reads these, so
// ESM hosts get every name as a named import (an object literal with
// member-expression values hides all but the first).
exports.NativeStorage = NativeStorage;
exports.createStorage = createStorage;
exports.SyncError = errors.SyncError;
exports.StorageQueryError = errors.StorageQueryError;
exports.StorageConstraintError = errors.StorageConstraintError;
exports.DecodeError = errors.DecodeError;
exports.versions = ops.versions;
exports.toPrometheus = ops.toPrometheus;
exports.copyStorage = copy.copyStorage;
exports.movedMark = copy.movedMark;
