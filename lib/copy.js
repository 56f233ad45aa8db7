'use strict';
// Moving a SQLite database to PostgreSQL, and a PostgreSQL one back into
// a SQLite file (issue 51, docs/copy.md): the JS side of
// `storage.copyTo(url, options)` and of the command's
// `copyStorage(from, to, options)`. The addon answers reports and
// progress as JSON text; this parses them and checks the options.

const { invalidArgument, translate, resolveErrorClasses } = require('./errors');
const native = require('./native');

/** `{ schema, verify, verifyOnly, resume, finalPass }` for the addon, and the progress callback. */
function copyOptions(member, options) {
  if (options === undefined || options === null) return { native: undefined, onProgress: undefined, finalPass: false };
  if (typeof options !== 'object') throw invalidArgument(`${member}: options must be an object`);
  const { schema, verify, verifyOnly, finalPass, resume, onProgress, lockTimeoutMs } = options;
  if (schema !== undefined && schema !== null && (typeof schema !== 'string' || schema.length === 0)) {
    throw invalidArgument(`${member}: schema must be a non-empty string`);
  }
  for (const [k, v] of [['verify', verify], ['verifyOnly', verifyOnly], ['finalPass', finalPass], ['resume', resume]]) {
    if (v !== undefined && v !== null && typeof v !== 'boolean') throw invalidArgument(`${member}: ${k} must be a boolean`);
  }
  if (lockTimeoutMs !== undefined && lockTimeoutMs !== null && !(Number.isInteger(lockTimeoutMs) && lockTimeoutMs >= 0 && lockTimeoutMs <= 0xffffffff)) {
    throw invalidArgument(`${member}: lockTimeoutMs must be a non-negative integer`);
  }
  if (onProgress !== undefined && onProgress !== null && typeof onProgress !== 'function') {
    throw invalidArgument(`${member}: onProgress must be a function`);
  }
  const o = {};
  if (schema !== undefined && schema !== null) o.schema = schema;
  if (verify !== undefined && verify !== null) o.verify = verify;
  if (verifyOnly !== undefined && verifyOnly !== null) o.verifyOnly = verifyOnly;
  if (resume !== undefined && resume !== null) o.resume = resume;
  // The addon refuses it when copying from PostgreSQL (a snapshot only).
  if (finalPass === true) o.finalPass = true;
  if (lockTimeoutMs !== undefined && lockTimeoutMs !== null) o.lockTimeoutMs = lockTimeoutMs;
  if (finalPass === true && verifyOnly === true) throw invalidArgument(`${member}: finalPass and verifyOnly exclude each other`);
  return { native: o, onProgress: onProgress ?? undefined, finalPass: finalPass === true };
}

/** The addon's progress callback: parses each report; a throwing callback is ignored. */
function progressCallback(onProgress) {
  if (onProgress === undefined) return undefined;
  return (text) => {
    try {
      onProgress(JSON.parse(text));
    } catch {
      // the caller's callback failing does not stop the copy
    }
  };
}

function checkUrl(member, name, url) {
  if (typeof url !== 'string' || url.length === 0) throw invalidArgument(`${member}: ${name} must be a non-empty url`);
}

/**
 * Copies the SQLite database `from` into the PostgreSQL database `to`, or
 * the PostgreSQL database `from` into the new SQLite file `to` (or, with
 * `verifyOnly`, only compares them); resolves with the report.
 * The command's entry (bin/syncular-native-storage.mjs).
 */
async function copyStorage(from, to, options) {
  checkUrl('copyStorage', 'from', from);
  checkUrl('copyStorage', 'to', to);
  const { native: o, onProgress, finalPass } = copyOptions('copyStorage', options);
  // The command's final pass: the addon takes the file's write lock itself.
  const n = finalPass ? { ...o, finalPass: true } : o;
  try {
    return JSON.parse(await native.copyStorage(from, to, n, progressCallback(onProgress)));
  } catch (err) {
    throw translate(err, resolveErrorClasses(undefined));
  }
}

/**
 * The moved mark of the SQLite database `from` (docs/copy.md, "The mark in
 * the file"); `{ clear: true }` removes it first. Resolves with
 * `{ moved: { target, movedAtMs } | null, cleared }`.
 */
async function movedMark(from, options) {
  checkUrl('movedMark', 'from', from);
  if (options !== undefined && options !== null && typeof options !== 'object') throw invalidArgument('movedMark: options must be an object');
  const clear = options?.clear ?? false;
  if (typeof clear !== 'boolean') throw invalidArgument('movedMark: clear must be a boolean');
  try {
    return JSON.parse(await native.movedMark(from, clear));
  } catch (err) {
    throw translate(err, resolveErrorClasses(undefined));
  }
}

/** Catch-up passes after the snapshot, at most. */
const MAX_PASSES = 8;
/** A pass that copied at most this many commits is followed by the final one. */
const FINAL_PASS_COMMITS = 100;

module.exports = { MAX_PASSES, FINAL_PASS_COMMITS, copyOptions, progressCallback, checkUrl, copyStorage, movedMark };
