'use strict';
// The reaction queue (storage-layout §15): claims, lease updates, reads
// and pruning. Enqueueing is a transaction's member (transaction.js); the
// values are adapted in ../reactions.js.

const { invalidArgument } = require('../errors');
const R = require('../reactions');

module.exports = ({ read, write }) => ({
  async claimReactions(partition, query) {
    if (!query || typeof query !== 'object' || !Array.isArray(query.types)) {
      throw invalidArgument('claimReactions: query must be a ReactionClaimQuery with a types array');
    }
    if (typeof partition !== 'string') throw invalidArgument('claimReactions: partition must be a string');
    if (query.types.length === 0 || query.limit <= 0) return [];
    const types = [...query.types];
    const list = await write(this, partition, (n, id) =>
      n.claimReactions(id, partition, query.leaseOwner, types, query.nowMs, query.leaseDurationMs, query.limit),
    );
    return R.claimedOut(list);
  },

  async completeReaction(partition, idempotencyKey, leaseOwner, completedAtMs) {
    return write(this, partition, (n, id) => n.updateReaction(id, partition, idempotencyKey, { kind: 'complete', leaseOwner, atMs: completedAtMs }));
  },

  async extendReactionLease(partition, idempotencyKey, leaseOwner, leaseExpiresAtMs) {
    return write(this, partition, (n, id) => n.updateReaction(id, partition, idempotencyKey, { kind: 'extend', leaseOwner, atMs: leaseExpiresAtMs }));
  },

  async failReaction(partition, idempotencyKey, update) {
    if (!update || typeof update !== 'object') throw invalidArgument('failReaction: update must be a ReactionFailureUpdate');
    const json = R.failureJson(update.failure);
    const atMs = update.failure.atMs;
    // As in-tree: a present retryAtMs (even null) means retry, at retryAtMs ?? failure.atMs.
    const retryAt = update.retryAtMs === undefined ? undefined : (update.retryAtMs ?? atMs);
    return write(this, partition, (n, id) =>
      n.updateReaction(id, partition, idempotencyKey, {
        kind: 'fail',
        leaseOwner: update.leaseOwner,
        atMs,
        failure: json,
        retryAtMs: retryAt,
      }),
    );
  },

  async retryReaction(partition, idempotencyKey, nowMs) {
    return write(this, partition, (n, id) => n.updateReaction(id, partition, idempotencyKey, { kind: 'retry', atMs: nowMs }));
  },

  async getReaction(partition, idempotencyKey) {
    const r = await read(this, partition, (n) => n.getReaction(partition, idempotencyKey));
    return r === null || r === undefined ? undefined : R.reactionOut(r);
  },

  async listReactions(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('listReactions: query must be a ReactionListQuery');
    const statuses = R.listFilter(query.statuses, 'statuses');
    const types = R.listFilter(query.types, 'types');
    const list = await read(this, partition, (n) => n.listReactions(partition, statuses, types, query.limit));
    return list.map(R.reactionOut);
  },

  async pruneReactions(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('pruneReactions: query must be a ReactionPruneQuery');
    if (typeof partition !== 'string') throw invalidArgument('pruneReactions: partition must be a string');
    if (query.limit <= 0) return { completed: 0, deadLetter: 0 };
    return write(this, partition, (n, id) =>
      n.pruneReactions(id, partition, query.completedBeforeMs, query.deadLetterBeforeMs, query.limit),
    );
  },
});
