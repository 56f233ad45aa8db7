'use strict';
// RFC 0007 checkpoints and the serve gate (storage-layout §14.2–§14.5).

const { invalidArgument } = require('../errors');
const V = require('../values');

module.exports = ({ read, readEpoch, write }) => ({
  async readServeGate(partition, runningSchemaVersion) {
    return V.gateOut(await readEpoch(this, partition, (n) => n.readServeGate(partition, runningSchemaVersion)));
  },

  async readCheckpoints(partition) {
    return read(this, partition, (n) => n.readCheckpoints(partition));
  },

  async writerFenceAllows(partition, writerVersion) {
    return read(this, partition, (n) => n.writerFenceAllows(partition, writerVersion));
  },

  async declareCheckpoint(partition, name, schemaVersion, nowMs) {
    return write(this, partition, (n, id) => n.declareCheckpoint(id, { partition, name, schemaVersion }, nowMs));
  },

  async claimCheckpoint(partition, name, schemaVersion, nowMs) {
    return write(this, partition, (n, id) => n.claimCheckpoint(id, partition, name, schemaVersion, nowMs));
  },

  async advanceCheckpoint(partition, name, ownerEpoch, watermark, observedRows, nowMs) {
    return write(this, partition, (n, id) => n.advanceCheckpoint(id, partition, name, ownerEpoch, watermark, observedRows, nowMs));
  },

  async sourceCoverageSeq(partition, tables) {
    if (!Array.isArray(tables)) throw invalidArgument('sourceCoverageSeq: tables must be an array');
    return read(this, partition, (n) => n.sourceCoverageSeq(partition, tables));
  },

  async hasSourceChangesAbove(partition, tables, seq) {
    if (!Array.isArray(tables)) throw invalidArgument('hasSourceChangesAbove: tables must be an array');
    return read(this, partition, (n) => n.hasSourceChangesAbove(partition, tables, seq));
  },

  async activateCheckpoint(partition, name, ownerEpoch, watermark, sources, nowMs) {
    if (!Array.isArray(sources)) throw invalidArgument('activateCheckpoint: sources must be an array');
    return write(this, partition, (n, id) => n.activateCheckpoint(id, partition, name, ownerEpoch, watermark, sources, nowMs));
  },
});
