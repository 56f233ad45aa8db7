'use strict';
// Reaction values between the host and the native layer: JSON columns
// cross as text (JSON.stringify on the way in, JSON.parse on the way out),
// NULL columns become omitted fields, and claim results are ordered with
// the host's own comparator (storage-layout §15, §16).

const { invalidArgument } = require('./errors');

function reactionIn(r, i) {
  if (!r || typeof r !== 'object') throw invalidArgument(`enqueueReactions: reactions[${i}] must be a NewReaction`);
  return {
    idempotencyKey: r.idempotencyKey,
    type: r.type,
    version: r.version,
    payload: JSON.stringify(r.payload),
    sourceClientId: r.sourceClientId,
    sourceClientCommitId: r.sourceClientCommitId,
    sourceCommitSeq: r.sourceCommitSeq,
    createdAtMs: r.createdAtMs,
    maxAttempts: r.maxAttempts,
  };
}

function reactionOut(r) {
  const out = {
    idempotencyKey: r.idempotencyKey,
    type: r.type,
    version: r.version,
    payload: JSON.parse(r.payload),
    sourceClientId: r.sourceClientId,
    sourceClientCommitId: r.sourceClientCommitId,
    sourceCommitSeq: r.sourceCommitSeq,
    createdAtMs: r.createdAtMs,
    maxAttempts: r.maxAttempts,
    status: r.status,
    attempts: r.attempts,
    availableAtMs: r.availableAtMs,
  };
  if (r.leaseOwner != null) out.leaseOwner = r.leaseOwner;
  if (r.leaseExpiresAtMs != null) out.leaseExpiresAtMs = r.leaseExpiresAtMs;
  if (r.completedAtMs != null) out.completedAtMs = r.completedAtMs;
  if (r.lastFailure != null) out.lastFailure = JSON.parse(r.lastFailure);
  return out;
}

/** Claimed rows: createdAtMs, then idempotencyKey by localeCompare. */
function claimedOut(list) {
  return list
    .map(reactionOut)
    .sort((a, b) => a.createdAtMs - b.createdAtMs || a.idempotencyKey.localeCompare(b.idempotencyKey));
}

/** `{ code, atMs, details? }` as stored in `last_failure`. */
function failureJson(failure) {
  if (!failure || typeof failure !== 'object') throw invalidArgument('failReaction: update.failure must be a ReactionFailure');
  const out = { code: failure.code, atMs: failure.atMs };
  if (failure.details !== undefined) out.details = failure.details;
  return JSON.stringify(out);
}

function listFilter(list, name) {
  if (list === undefined || list === null) return undefined;
  if (!Array.isArray(list)) throw invalidArgument(`listReactions: ${name} must be an array`);
  return list.length === 0 ? undefined : [...list];
}

module.exports = { reactionIn, reactionOut, claimedOut, failureJson, listFilter };
