'use strict';
// The constructor's options, checked strictly: a misspelt key, an option of
// the other engine, or a url whose scheme names no engine is a coded error
// that names the key and what is accepted, never a silent default (a typo
// must not open a memory database whose data vanishes at close). The url's
// own syntax is checked natively (src/open.rs).

const { invalidArgument } = require('./errors');

const LOCATION = ['url', 'path', 'filename'];
const COMMON = [...LOCATION, 'errors', 'queryTimeoutMs', 'maxResultRows', 'maxResultBytes', 'closeDrainMs', 'transactionWarnMs', 'transactionTimeoutMs', 'logger', 'logFilter'];
const SQLITE_ONLY = ['synchronous', 'groupCommit', 'busyTimeoutMs'];
const POSTGRES_ONLY = ['maxConnections', 'schema', 'connectTimeoutMs', 'pooling'];
const ACCEPTED = [...COMMON, ...SQLITE_ONLY, ...POSTGRES_ONLY];

const isPostgresUrl = (url) => /^postgres(ql)?:/i.test(url);

/**
 * Checks `options` and returns the url to open (undefined: a private
 * memory database, only when no option at all was given).
 */
function checkOptions(options) {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidArgument('NativeStorage: options must be an object');
  }
  const given = Object.keys(options).filter((k) => options[k] !== undefined);
  for (const key of given) {
    if (!ACCEPTED.includes(key)) {
      throw invalidArgument(`NativeStorage: unknown option ${JSON.stringify(key)}; accepted: ${ACCEPTED.join(', ')}`);
    }
  }
  const locations = given.filter((k) => LOCATION.includes(k));
  if (locations.length > 1) {
    throw invalidArgument(`NativeStorage: give one of url, path or filename, not ${locations.join(' and ')}`);
  }
  if (locations.length === 0) {
    if (given.length === 0) return undefined;
    throw invalidArgument(
      "NativeStorage: no url: pass url ('sqlite:/path/to/sync.db', 'postgres://…', or 'sqlite::memory:' for a memory database that is gone at close)",
    );
  }
  const url = options[locations[0]];
  if (typeof url !== 'string') throw invalidArgument(`NativeStorage: ${locations[0]} must be a string`);
  const postgres = isPostgresUrl(url);
  const foreign = postgres ? SQLITE_ONLY : POSTGRES_ONLY;
  for (const key of given) {
    if (foreign.includes(key)) {
      throw invalidArgument(
        `NativeStorage: ${JSON.stringify(key)} is a ${postgres ? 'SQLite' : 'PostgreSQL'} option, and ${JSON.stringify(url)} opens ${postgres ? 'PostgreSQL' : 'SQLite'}`,
      );
    }
  }
  return url;
}

module.exports = { checkOptions, ACCEPTED };
