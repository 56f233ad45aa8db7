'use strict';
// Client cursors and the client list (the pruning horizon's inputs).
// getClientRecord and putClientRecord, which every request makes, are
// storage.js's own.

const { invalidArgument } = require('../errors');
const V = require('../values');

module.exports = ({ read, write }) => ({
  async listClientCursors(partition) {
    return read(this, partition, (n) => n.listClientCursors(partition));
  },

  async advanceClientCursor(partition, clientId, actorId, logEpoch, cursor, updatedAtMs) {
    if (typeof actorId !== 'string' || typeof logEpoch !== 'string') {
      throw invalidArgument('advanceClientCursor: actorId and logEpoch must be strings');
    }
    await write(this, partition, (n, id) => n.advanceClientCursor(id, partition, clientId, actorId, logEpoch, cursor, updatedAtMs));
  },

  async updateClientCursor(partition, clientId, cursor, updatedAtMs) {
    await write(this, partition, (n, id) => n.advanceClientCursor(id, partition, clientId, undefined, undefined, cursor, updatedAtMs));
  },

  async getActiveClientCursorFloor(partition, cutoffMs) {
    return read(this, partition, (n) => n.getActiveClientCursorFloor(partition, cutoffMs));
  },

  async listClientRecords(partition) {
    return (await read(this, partition, (n) => n.listClientRecords(partition))).map(V.clientOut);
  },
});
