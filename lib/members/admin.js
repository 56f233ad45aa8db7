'use strict';
// The admin and blob reads (storage-layout §17): commit metadata, scope
// activity, a row's stored scopes, and the blob references.

const { invalidArgument } = require('../errors');

module.exports = ({ read }) => ({
  async listCommitMetadata(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('listCommitMetadata: query must be a CommitMetadataQuery');
    const table = query.table ? query.table : undefined;
    return read(this, partition, (n) => n.listCommitMetadata(partition, query.afterSeq, query.limit, table));
  },

  async scopeActivity(partition, query) {
    if (!query || typeof query !== 'object') throw invalidArgument('scopeActivity: query must be a ScopeActivityQuery');
    return read(this, partition, (n) => n.scopeActivity(partition, query.variable, query.value, query.limit));
  },

  async getRowScopes(partition, table, rowId) {
    const r = await read(this, partition, (n) => n.getRowScopes(partition, table, rowId));
    return r === null || r === undefined ? undefined : { serverVersion: r.serverVersion, scopes: JSON.parse(r.scopes) };
  },

  async listRowsReferencingBlob(partition, blobId) {
    const list = await read(this, partition, (n) => n.listRowsReferencingBlob(partition, blobId));
    return list.map((r) => ({ table: r.table, rowId: r.rowId, scopes: JSON.parse(r.scopes) }));
  },

  async listReferencedBlobIds(partition) {
    return read(this, partition, (n) => n.listReferencedBlobIds(partition));
  },
});
