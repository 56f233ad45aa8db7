// A child of sqlite-reads.test.mjs: does a registered query of a few hundred
// VM steps (cheap: microseconds) answer on the calling thread, under the
// SYNCULAR_NATIVE_STALL_MS this process was started with? Prints one JSON
// line: { atOnce, rows }.
import { createRequire } from 'node:module';
import { fixtureSchema } from './schema.mjs';

const require = createRequire(import.meta.url);
const native = require('../../lib/native.js');
const V = require('../../lib/values.js');

const engine = new native.NativeEngine({ url: 'sqlite::memory:' });
const lease = await engine.begin(null);
await engine.ensureSchema(lease, V.flattenSchema(fixtureSchema()), [], Date.now());
await engine.unlock(lease, true);
const sql = 'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 50) SELECT count(*) AS n FROM r';
const answer = engine.queryAuthoritative('p', { sql, tables: [] }, [], undefined);
const atOnce = !(answer instanceof Promise);
const { rows } = await answer;
await engine.close();
console.log(JSON.stringify({ atOnce, rows }));
