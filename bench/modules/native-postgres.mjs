// This package on PostgreSQL: one fresh schema per storage on the server at
// SYNCULAR_TEST_PG_URL (default: the local server of .ci/run and docs/testing.md).
import { dropSchema } from '../lib/pg-schema.mjs';
import { createRequire } from 'node:module';

const { NativeStorage } = createRequire(import.meta.url)('../../index.js');

export const label = 'native (postgres)';

const url = process.env.SYNCULAR_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:55432/postgres';
let schemas = 0;

export function createStorage(context) {
  schemas += 1;
  const schema = context.schema ?? `syncular_bench_${process.pid}_${Date.now().toString(36)}_${schemas}`;
  const storage = new NativeStorage({ url, schema, maxConnections: 16, errors: context.server });
  if (context.schema === undefined) {
    const close = storage.close.bind(storage);
    storage.close = async () => {
      await close();
      await dropSchema(url, schema);
    };
  }
  return storage;
}
