// Drops a schema a PostgreSQL storage module made for one storage, when the
// bench closes that storage: every storage gets a fresh schema, and
// thousands left behind slow the server's catalog lookups (measured: a
// 1-op push went from about 2.5 ms to 3-15 ms with 4,500 stale schemas).
// The schemas earlier test, acceptance and bench processes left behind go
// with it (scripts/pg-sweep.mjs).
import { sweepSchemas } from '../../scripts/pg-sweep.mjs';

export async function dropSchema(url, schema) {
  const dropped = await sweepSchemas(url, [schema]);
  if (!dropped.includes(schema)) throw new Error(`bench: could not drop schema ${schema}`);
}
