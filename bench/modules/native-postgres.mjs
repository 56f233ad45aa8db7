// This package on PostgreSQL: one fresh schema per storage on the server at
// SYNCULAR_TEST_PG_URL (default: the local server of .ci/run and
// docs/testing.md), or a fresh database behind PgBouncer with
// SYNCULAR_BENCH_POOLER (bench/lib/pg-target.mjs), where the storage runs
// with `pooling` set to the pooler's mode.
import { target } from '../lib/pg-target.mjs';
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

export const label = 'native (postgres)';

export async function createStorage(context) {
  const t = await target('syncular_bench_', context.schema);
  const pooling = t.pooling === 'transaction' ? { pooling: 'transaction' } : {};
  const storage = new NativeStorage({ url: t.url, schema: t.schema, maxConnections: 16, errors: context.server, ...pooling });
  const close = storage.close.bind(storage);
  storage.close = async () => {
    await close();
    await t.drop();
  };
  return storage;
}
