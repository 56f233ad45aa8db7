'use strict';
// syncular-native-storage: a ServerStorage for @syncular/server backed by a
// Rust engine. See README.md.

const { NativeStorage } = require('./lib/storage');
const errors = require('./lib/errors');

/** Factory form: `createStorage({ url, errors })`. */
function createStorage(options) {
  return new NativeStorage(options);
}

module.exports = {
  NativeStorage,
  createStorage,
  SyncError: errors.SyncError,
  StorageQueryError: errors.StorageQueryError,
  StorageConstraintError: errors.StorageConstraintError,
  DecodeError: errors.DecodeError,
};
