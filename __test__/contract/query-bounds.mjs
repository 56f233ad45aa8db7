// Registered queries bounded in rows, bytes, time and event-loop stall, on
// both engines (issue 28): whatever parameters a client picks,
// - a result past maxResultRows or maxResultBytes is refused while it is
//   produced, with ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE naming the bound,
//   and the process's memory stays near the bound;
// - a large result is handed to the host over several event-loop turns,
//   never in one long one;
// - work inside one row (one function call made expensive by its
//   arguments, or many calls in one row) stops near queryTimeoutMs.
// Timing assertions carry a margin for a debug build on a shared machine;
// the acceptance figures are the stress run's (stress/attack.mjs).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withStorage } from '../support/harness.mjs';
import { OWN, seedTenants } from '../support/isolation.mjs';
import { TIME_SCALE } from '../support/emulation.mjs';
import { measured } from '../support/measure.mjs';
import { describeTempFiles, peakTempDisk, tempDiskBytes } from '../support/temp-disk.mjs';

const TOO_LARGE = 'ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE';
const TIMEOUT = 'ERR_SYNCULAR_QUERY_TIMEOUT';
const REFUSED = 'ERR_SYNCULAR_QUERY_REFUSED';


/** The two call forms: storage-level, and inside an open push. */
function forms(storage) {
  return {
    storage: (sql, params = []) => storage.queryAuthoritative(OWN, { sql, params, tables: [] }),
    tx: async (sql, params = []) => {
      const tx = await storage.begin(OWN);
      try {
        await tx.lockPartitionForPush();
        const out = await tx.queryAuthoritative({ sql, params, tables: [] });
        // The transaction is still usable after its query, refused or not.
        assert.equal((await tx.getRow('tasks', 'own-1'))?.rowId, 'own-1');
        return out;
      } finally {
        await tx.rollback();
      }
    },
  };
}

export function define(engine) {
  const pg = engine.dialect === 'postgres';
  // `n` rows numbered 1…n, with n a client parameter.
  const series = (select) =>
    pg
      ? `SELECT ${select} FROM generate_series(1, CAST(? AS integer)) AS s(n)`
      : `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?) SELECT ${select} FROM s`;
  // A value of 100 KB.
  const big = pg ? "repeat('0123456789', 10000)" : "printf('%.*c', 100000, 'x')";

  describe(`${engine.name}: registered query results are bounded`, () => {
    for (const form of ['storage', 'tx']) {
      test(`${form}: past maxResultRows the query is refused naming it; at the bound it answers`, async () => {
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            const run = forms(storage)[form];
            const at = await run(series('n'), [1000]);
            assert.equal(at.rows.length, 1000);
            assert.deepEqual(at.rows[999], { n: 1000 });
            const past = await measured(() => run(series('n'), [3_000_000]));
            assert.equal(past.ok, false, 'answered past the bound');
            assert.equal(past.error.code, TOO_LARGE, past.error.message);
            assert.match(past.error.message, /1000 rows \(maxResultRows\)/);
            // Refused when the bound is passed, not after the 3M rows.
            assert.ok(past.ms < 2000 * TIME_SCALE, `took ${past.ms.toFixed(0)} ms`);
          },
          { opts: { maxResultRows: 1000 } },
        );
      });

      test(`${form}: past maxResultBytes the query is refused as rows arrive, and memory stays near the bound`, async () => {
        const maxResultBytes = 8 << 20;
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            const run = forms(storage)[form];
            // 20 rows of 100 KB fit; 3000 (300 MB) do not.
            const fits = await run(series(`n, ${big} AS v`), [20]);
            assert.equal(fits.rows.length, 20);
            assert.equal(fits.rows[19].v.length, 100_000);
            const past = await measured(() => run(series(`n, ${big} AS v`), [3000]));
            assert.equal(past.ok, false, 'answered past the bound');
            assert.equal(past.error.code, TOO_LARGE, past.error.message);
            assert.match(past.error.message, /8388608 bytes \(maxResultBytes\)/);
            // The rows held before the refusal, the engine's own buffers and
            // the allocator's slack: a few times the bound, never the 300 MB.
            assert.ok(past.rss < 4 * maxResultBytes + (64 << 20), `RSS grew ${(past.rss / 2 ** 20).toFixed(0)} MiB`);
          },
          { opts: { maxResultBytes } },
        );
      });
    }

    // Review 5, finding 1: a sort or grouping over a client-chosen row
    // count spilled to SQLite's temporary files, which no heap bound saw
    // (6.3 GiB of disk for this query). The files of a registered query are
    // counted (src/sqlite/temp_vfs.rs): past maxResultBytes + 64 MiB the
    // query is refused, and its files are gone when it answers.
    if (!pg) {
      const maxResultBytes = 8 << 20;
      const budget = maxResultBytes + (64 << 20);
      const sort =
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < ?) SELECT row_number() OVER (ORDER BY printf('%.*c',100000,'x')||n DESC) AS k, n FROM r";
      const group =
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < ?) SELECT count(*) AS c FROM (SELECT printf('%.*c',100000,'x')||n AS g FROM r GROUP BY g)";
      for (const form of ['storage', 'tx']) {
        test(`${form}: a sort or grouping that spills is bounded on disk, refused past maxResultBytes + 64 MiB`, async () => {
          await withStorage(
            engine,
            async (storage) => {
              await seedTenants(storage);
              const run = forms(storage)[form];
              // 300 rows of 100 KB spill (30 MB) within the budget: answered.
              const fits = await peakTempDisk(() => run(group, [300]));
              assert.equal(fits.ok, true, fits.error?.message);
              assert.deepEqual(fits.value.rows, [{ c: 300 }]);
              assert.ok(fits.peak === null || fits.peak > 0, 'the grouping did not spill');
              const sorted = await run(sort, [300]);
              const byRank = new Map(sorted.rows.map((r) => [r.k, r.n]));
              assert.equal(byRank.size, 300);
              assert.equal(byRank.get(1), 99);
              assert.equal(byRank.get(2), 98);
              for (const [name, sql] of [['sort', sort], ['group', group]]) {
                const past = await peakTempDisk(() => run(sql, [200_000]));
                assert.equal(past.ok, false, `${name}: answered`);
                assert.equal(past.error.code, TOO_LARGE, past.error.message);
                assert.match(past.error.message, /temporary storage/);
                if (past.peak !== null) {
                  assert.ok(past.peak <= budget + (4 << 20), `${name}: ${(past.peak / 2 ** 20).toFixed(0)} MiB of temporary files`);
                }
                assert.equal(tempDiskBytes() ?? 0, 0, `${name}: temporary files left open: ${describeTempFiles()}`);
              }
              // The storage's own statements after the refusal are unbounded
              // as before, and the connection serves the next query.
              assert.equal((await run(group, [10])).rows[0].c, 10);
            },
            { opts: { maxResultBytes } },
          );
        });
      }
    }

    for (const form of ['storage', 'tx']) {
      test(`${form}: rows read slower than the engine makes them stop near queryTimeoutMs`, async () => {
        const limit = 200;
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            // Within the row and byte bounds: only the time limit stops
            // them (PostgreSQL sends them all before its own limit; the
            // storage reads them afterwards).
            const sql = series('n, n + 1 AS a, n * 2 AS b, n % 7 AS c, n - 1 AS d, n * 3 AS e, n + 5 AS f, n % 3 AS g');
            const r = await measured(() => forms(storage)[form](sql, [1_000_000]));
            assert.equal(r.ok, false, `answered in ${r.ms.toFixed(0)} ms`);
            assert.equal(r.error.code, TIMEOUT, r.error.message);
            // A debug build stops 30-40 ms past the limit (and took 500-900
            // ms before the storage checked it between rows).
            assert.ok(r.ms < (limit + 250) * TIME_SCALE, `took ${r.ms.toFixed(0)} ms`);
          },
          { opts: { queryTimeoutMs: limit, maxResultRows: 2_000_000, maxResultBytes: 1 << 30 } },
        );
      });
    }

    test('the defaults: 100,000 rows answer, 3 million are refused at once', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        const run = forms(storage).storage;
        const past = await measured(() => run(series('n'), [3_000_000]));
        assert.equal(past.error?.code, TOO_LARGE, past.error?.message);
        assert.match(past.error.message, /100000 rows \(maxResultRows\)/);
        const at = await run(series('n'), [100_000]);
        assert.equal(at.rows.length, 100_000);
      });
    });
  });

  describe(`${engine.name}: a large result never holds the event loop`, () => {
    for (const form of ['storage', 'tx']) {
      test(`${form}: 100,000 rows of 8 columns reach the host over several turns`, async () => {
        await withStorage(engine, async (storage) => {
          await seedTenants(storage);
          const run = forms(storage)[form];
          const cols = ['n', 'n + 1 AS a', 'n * 2 AS b', "'x' AS c", 'n % 7 AS d', "'yy' AS e", 'n - 1 AS f', 'n * 3 AS g'];
          const sql = series(cols.join(', '));
          await run(sql, [10]);
          const r = await measured(() => run(sql, [100_000]));
          assert.equal(r.ok, true, r.error?.message);
          assert.equal(r.value.rows.length, 100_000);
          assert.deepEqual(r.value.rows[99_999], { n: 100_000, a: 100_001, b: 200_000, c: 'x', d: 100_000 % 7, e: 'yy', f: 99_999, g: 300_000 });
          assert.deepEqual(Object.keys(r.value).sort(), ['maxCommitSeq', 'rows']);
          // A few ms per turn; the margin is for a debug build on a loaded machine.
          assert.ok(r.stall < 100 * TIME_SCALE, `event loop stalled ${r.stall.toFixed(0)} ms`);
        });
      });
    }
  });

  describe(`${engine.name}: work inside one row stops near queryTimeoutMs`, { skip: pg && 'PostgreSQL: the cost classes below' }, () => {
    const limit = 200;
    // One row: a 1 MiB value built in the query, and a 256-byte pattern
    // that almost matches at every offset (SQLite's own matcher compares
    // the pattern at each: about 0.3 s a call).
    const like = "WITH m AS (SELECT printf('%.*c', ?, 'a') AS v, '%' || printf('%.*c', 250, 'a') || 'b' AS p) SELECT (v LIKE p) + (v LIKE p) + (v LIKE p) + (v GLOB replace(p, '%', '*')) + (v LIKE p) + (v LIKE p ESCAPE '!') + (v GLOB replace(p, '%', '*')) + (v LIKE p) AS n FROM m";
    // A row of `n` result columns (a registered query may have at most
    // 256), each `calls` calls scanning one value (`I` is the column's
    // number, so no two calls are the same). The value's size is the
    // query's parameter: each shape runs at the largest its query may hold.
    const wide = (f, { n = 250, calls = 3, v = "printf('%.*c', ?, 'a')" } = {}) =>
      `WITH m AS MATERIALIZED (SELECT ${v} AS v) SELECT ${Array.from({ length: n }, (_, i) => `(${['a', 'b', 'c'].slice(0, calls).map((k) => f.replaceAll('I', `${k}${i}`)).join(') + (')}) AS c${i}`).join(', ')} FROM m`;
    // The largest value `sql` may hold (its value limit, named when a
    // value of 1,000,000 bytes is refused), less a margin for what the query adds.
    const largest = async (run, sql) => {
      const r = await measured(() => run(sql, [1_000_000]));
      if (r.ok || r.error.code !== TOO_LARGE) return { refused: r };
      const m = /a value of more than (\d+) bytes/.exec(r.error.message);
      assert.ok(m, r.error.message);
      return { size: Number(m[1]) - 64 };
    };
    const shapes = [
      ['LIKE and GLOB, repeated in one expression', like],
      ['250 columns of length()', wide("length(v || 'I') + length(v || 'I-') + length(v || 'I+')")],
      ['250 columns of instr()', wide("instr(v, 'I')")],
      ['250 columns of upper()', wide("length(upper(v || 'I'))")],
      ['250 columns of printf()', wide("length(printf('%sI', v))")],
      ['250 columns of json_type()', wide("length(json_type(v || '\"I\"]'))", { v: `'["' || printf('%.*c', ?, 'a') || '",'` })],
      ['40 columns of upper()', wide("length(upper(v || 'I'))", { n: 40, calls: 1 })],
      ['a row of 250 additions over digits', wide("v + 'I'", { calls: 1, v: "printf('%.*c', ?, '7')" })],
      ['a row of 250 casts over digits', wide("CAST(v || 'I' AS INTEGER)", { calls: 1, v: "printf('%.*c', ?, '7')" })],
      ['a row of 40 multiplications over digits', wide("v * v * 'I'", { n: 40, calls: 1, v: "printf('%.*c', ?, '7')" })],
      ['250 columns of substr()', wide("length(substr(v || 'I', 900000, 1))")],
    ];
    for (const form of ['storage', 'tx']) {
      for (const [what, sql] of shapes) {
        test(`${form}: ${what}`, async () => {
          await withStorage(
            engine,
            async (storage) => {
              await seedTenants(storage);
              const run = forms(storage)[form];
              // A value of 1,000,000 bytes is refused at once, naming the query's
              // value limit; a program too long between two checks for
              // values of even 4 KiB is refused outright.
              const { size, refused } = await largest(run, sql);
              const r = refused ?? (await measured(() => run(sql, [size])));
              if (!r.ok) {
                // Stopped by a bound: the time limit, the working-memory
                // bound, or the program's length.
                assert.ok([TIMEOUT, TOO_LARGE, REFUSED].includes(r.error.code), `${r.error.code}: ${r.error.message}`);
                if (r.error.code === TOO_LARGE) assert.match(r.error.message, /working memory/);
                if (r.error.code === REFUSED) assert.match(r.error.message, /operators between two loops/);
              }
              // At most 100 ms past the limit, answered or not (times
              // TIME_SCALE on a slower, emulated machine); today's main
              // took seconds on these shapes.
              assert.ok(r.ms < (limit + 100) * TIME_SCALE, `took ${r.ms.toFixed(0)} ms`);
              // A stall past the budget is measured once more: the machine
              // (CI runs two test files on two cores, in a VM) can hold the
              // thread for one gap; work of ours on the event loop holds it
              // on every run.
              const stall = r.stall < 50 * TIME_SCALE ? r.stall : (await measured(() => run(sql, refused ? [1_000_000] : [size]))).stall;
              assert.ok(stall < 50 * TIME_SCALE, `event loop stalled ${r.stall.toFixed(0)} ms, then ${stall.toFixed(0)} ms`);
            },
            { opts: { queryTimeoutMs: limit } },
          );
        });
      }
    }

    for (const form of ['storage', 'tx']) {
      test(`${form}: a row of 40 arithmetic operators over 1 MiB of digits never runs on the event loop`, async () => {
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            // Operators, not function calls: no check of the storage's runs
            // between them, a few ms each. Too heavy for the calling thread.
            const forty = `WITH m AS MATERIALIZED (SELECT printf('%.*c', 1000000, '7') AS v) SELECT ${Array.from({ length: 40 }, (_, i) => `v + ${i} AS c${i}`).join(', ')} FROM m`;
            const r = await measured(() => forms(storage)[form](forty));
            assert.ok(r.stall < 100 * TIME_SCALE, `event loop stalled ${r.stall.toFixed(0)} ms`);
          },
          { opts: { queryTimeoutMs: limit } },
        );
      });
    }

    for (const form of ['storage', 'tx']) {
      test(`${form}: a row's working memory is bounded by maxResultBytes plus a constant`, async () => {
        const maxResultBytes = 16 << 20;
        await withStorage(
          engine,
          async (storage) => {
            await seedTenants(storage);
            const run = forms(storage)[form];
            const v = "printf('%.*c', 1000000, 'a')";
            // 250 values of 1 MiB made by function calls in one row: stopped
            // once SQLite's heap grew by maxResultBytes + 64 MiB, before the
            // row is counted.
            const calls = `WITH m AS MATERIALIZED (SELECT ${v} AS v) SELECT ${Array.from({ length: 250 }, (_, i) => `upper(v || 'c${i}') AS c${i}`).join(', ')} FROM m`;
            // 1500 values made by `||` (no function call between them):
            // refused while it compiles, for its columns.
            const wide = `WITH m AS MATERIALIZED (SELECT ${v} AS v) SELECT ${Array.from({ length: 1500 }, (_, i) => `v || 'c${i}' AS c${i}`).join(', ')} FROM m`;
            for (const [sql, message] of [
              // Made by functions: the working-memory bound, or first the
              // value bound of a query this long.
              [calls, /working memory|a value of more than \d+ bytes/],
              [wide, /too wide: too many columns in result set \(at most 256 columns/],
            ]) {
              const r = await measured(() => run(sql));
              assert.equal(r.ok, false, `answered in ${r.ms.toFixed(0)} ms`);
              assert.equal(r.error.code, TOO_LARGE, r.error.message);
              assert.match(r.error.message, message);
              assert.ok(r.rss < 4 * maxResultBytes + (64 << 20), `RSS grew ${(r.rss / 2 ** 20).toFixed(0)} MiB`);
            }
          },
          { opts: { maxResultBytes, queryTimeoutMs: 10_000 } },
        );
      });
    }

    test('the checked functions answer what SQLite answers, JSON subtypes included', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        const r = await forms(storage).storage(
          "SELECT json_object('a', json_array(1, json('[2]')), 'b', '{\"x\":1}' -> '$.x') AS j, length('héllo') AS n, 'abc' LIKE 'A_C' AS l, 'abc' GLOB 'A*' AS g, printf('%05.1f', 2.25) AS p, upper('ab') || lower('CD') AS s",
        );
        assert.deepEqual(r.rows, [{ j: '{"a":[1,[2]],"b":1}', n: 5, l: 1, g: 0, p: '002.3', s: 'ABcd' }]);
      });
    });
  });

  describe(`${engine.name}: operators that compare every part with every part are bounded`, { skip: !pg && 'SQLite: the functions above' }, () => {
    const limit = 200;
    // A 2 MB haystack built in the query (in milliseconds, between rows),
    // and needles that almost match at every offset.
    const hay = "(SELECT string_agg(repeat('a', 10000), '') AS h FROM generate_series(1, 200)) AS x";
    const needle = "'b' || repeat('a', 2000)";
    const arr = (n, sign = '') => `array(SELECT ${sign}generate_series(1, ${n}))`;
    // 20 KB (and the marker the server-side check looks for).
    const piece = "repeat('0123456789', 2000)";
    const md5s = (v) => Array.from({ length: 32 }, () => `md5(${v})`).join(' || ');
    // `levels` subqueries, each making four copies of the one below.
    const nest = (base, levels, four = (c) => `concat(${c}, ${c}, ${c}, ${c})`) => {
      let from = `(SELECT ${base} AS a OFFSET 0) AS l0`;
      let col = 'a';
      for (let i = 1; i <= levels; i += 1) {
        const next = i === levels ? 'g' : `c${i}`;
        from = `(SELECT ${four(col)} AS ${next} FROM ${from} OFFSET 0) AS l${i}`;
        col = next;
      }
      return from;
    };
    const shapes = [
      ['LIKE', `SELECT h LIKE '%' || repeat('a', 2000) || 'b%' AS r FROM ${hay}`],
      ['NOT ILIKE', `SELECT h NOT ILIKE '%' || repeat('a', 2000) || 'b%' AS r FROM ${hay}`],
      ['LIKE ANY', `SELECT h LIKE ANY (ARRAY['%' || repeat('a', 2000) || 'b%']) AS r FROM ${hay}`],
      ['strpos', `SELECT strpos(h, ${needle}) AS r FROM ${hay}`],
      ['position', `SELECT position(${needle} IN h) AS r FROM ${hay}`],
      ['split_part', `SELECT length(split_part(h, ${needle}, 2)) AS r FROM ${hay}`],
      ['replace', `SELECT length(replace(h, ${needle}, 'x')) AS r FROM ${hay}`],
      ['string_to_array', `SELECT cardinality(string_to_array(h, ${needle})) AS r FROM ${hay}`],
      ['translate', `SELECT length(translate(h, (SELECT string_agg(chr(1000 + g), '') FROM generate_series(1, 4000) g), 'x')) AS r FROM ${hay}`],
      ['array &&', `SELECT ${arr(30000)} && ${arr(30000, '-')} AS r`],
      ['array @>', `SELECT ${arr(30000)} @> array(SELECT -g FROM generate_series(-30000, -1) g) AS r`],
      ['jsonb @>', `SELECT to_jsonb(${arr(30000)}) @> to_jsonb(array(SELECT -g FROM generate_series(-30000, -1) g)) AS r`],
      // Review 5: 60 bytes that kept a backend busy for 7 s past a 200 ms limit.
      ['normalize of a repeat of a repeat', "SELECT length(normalize(repeat(repeat('é', 10000), 10000), NFD)) AS r"],
      ['upper x8 of a repeat of a repeat', "SELECT length(upper(upper(upper(upper(upper(upper(upper(upper(repeat(repeat('é', 10000), 10000)))))))))) AS r"],
      // Review 5, the rest of finding 2: a value of 10-20 MB built within
      // the limit with an aggregate, nested building functions or a
      // recursive ||, then read by 32 md5 calls in one row (0.4-0.8 s with
      // no check for cancellation). Each built value is now checked as it
      // is made.
      ['md5 x32 of a string_agg', `SELECT ${md5s('h')} AS r FROM (SELECT string_agg(${piece}, '') AS h FROM generate_series(1, 1000)) AS x`],
      ['md5 x32 of nested concat', `SELECT ${md5s('g')} AS r FROM ${nest(piece, 5)}`],
      ['md5 x32 of a recursive ||', `WITH RECURSIVE d(v, i) AS (SELECT ${piece}, 0 UNION ALL SELECT v || v, i + 1 FROM d WHERE i < 9) SELECT ${md5s('v')} AS r FROM d WHERE i = 9`],
      // Found after review 5: array and row constructors build the same
      // values (253 ms against the 200 ms limit, and the partition's lock
      // held 324-505 ms longer).
      ['md5 x32 of nested ARRAY[] over subqueries', `SELECT ${md5s('CAST(g AS text)')} AS r FROM ${nest(`ARRAY[${piece}, ${piece}, ${piece}, ${piece}]`, 3, (c) => `ARRAY[${c}, ${c}, ${c}, ${c}]`)}`],
      ['md5 x32 of nested ROW() over subqueries', `SELECT ${md5s('CAST(g AS text)')} AS r FROM ${nest(piece, 4, (c) => `ROW(${c}, ${c}, ${c}, ${c})`)}`],
      ['md5 x32 of nested implicit rows', `SELECT ${md5s('CAST(g AS text)')} AS r FROM ${nest(piece, 4, (c) => `(${c}, ${c}, ${c}, ${c})`)}`],
      ['md5 x32 of ARRAY(SELECT …)', `SELECT ${md5s('CAST(a AS text)')} AS r FROM (SELECT ARRAY(SELECT ${piece} FROM generate_series(1, 1000)) AS a) AS x`],
    ];
    for (const form of ['storage', 'tx']) {
      for (const [what, sql] of shapes) {
        test(`${form}: ${what} over values built in the query`, async () => {
          await withStorage(
            engine,
            async (storage) => {
              await seedTenants(storage);
              const r = await measured(() => forms(storage)[form](sql));
              assert.equal(r.ok, false, 'answered');
              assert.ok(['ERR_SYNCULAR_QUERY_REFUSED', TIMEOUT].includes(r.error.code), `${r.error.code}: ${r.error.message}`);
              assert.ok(r.ms < (limit + 400) * TIME_SCALE, `took ${r.ms.toFixed(0)} ms`);
              // Nothing of it still runs on the server.
              assert.equal(await serverStillRunning(engine.url, '2000'), 0);
            },
            { opts: { queryTimeoutMs: limit } },
          );
        });
      }
    }

    test('within the bounds, aggregates, || and building functions answer as PostgreSQL does', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        const r = await storage.queryAuthoritative(OWN, {
          sql: "SELECT string_agg(id, ',' ORDER BY id) AS a, array_to_string(array_agg(id ORDER BY id), '|') AS b, CAST(jsonb_agg(id ORDER BY id) AS text) AS c, 'x' || 'y' || count(*) AS d, concat('a', 1, NULL, 'b') AS e, format('%s-%s', 'p', 'q') AS f, CAST(jsonb_build_object('k', 1) || jsonb_build_object('j', 2) AS text) AS g, array_length(array_cat(ARRAY[1], ARRAY[2, 3]), 1) AS h, encode(CAST('hi' AS bytea), 'hex') AS i FROM tasks GROUP BY owner_id ORDER BY 1",
          params: [],
          tables: ['tasks'],
        });
        assert.deepEqual(r.rows, [{ a: 'own-1,own-2,shared-1', b: 'own-1|own-2|shared-1', c: '["own-1", "own-2", "shared-1"]', d: 'xy3', e: 'a1b', f: 'p-q', g: '{"j": 2, "k": 1}', h: 3, i: '6869' }]);
        // A value over the statement's bound is refused, naming it.
        const big = await measured(() => forms(storage).storage("SELECT length(string_agg(repeat('x', 10000), '')) AS n FROM generate_series(1, 2000)"));
        assert.equal(big.ok, false);
        assert.equal(big.error.code, 'ERR_SYNCULAR_QUERY_REFUSED', big.error.message);
        assert.match(big.error.message, /one value built by an aggregate/);
      });
    });

    test('within the bounds, array and row constructors answer as PostgreSQL does', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        // Multidimensional brackets stay the constructor's direct
        // children; an empty array takes its type from its cast; literal
        // arrays coerce to their cast's element type; rows compare field
        // by field (<, IN, a subquery's test) and are read whole by a cast.
        const r = await storage.queryAuthoritative(OWN, {
          sql: "SELECT CAST(ARRAY[[id, owner_id], [title, id]] AS text) AS a, cardinality(CAST(ARRAY[] AS int[])) AS b, CAST(CAST(ARRAY['1', '2'] AS int[]) AS text) AS c, (ARRAY[id, title])[2] AS d, CAST(ROW(id, 1) AS text) AS e, ROW(id, 1) < ROW(id, 2) AS f, (id, owner_id) IN (SELECT id, owner_id FROM tasks) AS g, (id, 1) IN ((id, 1), ('x', 2)) AS h, array_length(ARRAY[ARRAY[1, 2], ARRAY[3, length(id)]], 2) AS j, (id, owner_id) IS NOT NULL AS k, CAST(x.r AS text) AS l FROM tasks, (SELECT (1, 'a') AS r) AS x WHERE id IN (?, 'own-2') ORDER BY id",
          params: ['own-1'],
          tables: ['tasks'],
        });
        assert.deepEqual(
          r.rows,
          [1, 2].map((n) => ({ a: `{{own-${n},u-own},{"own title ${n}",own-${n}}}`, b: 0, c: '{1,2}', d: `own title ${n}`, e: `(own-${n},1)`, f: 1, g: 1, h: 1, j: 2, k: 1, l: '(1,a)' })),
        );
        // GROUP BY (a, b) groups by a and b.
        const grouped = await storage.queryAuthoritative(OWN, { sql: 'SELECT owner_id, count(*) AS n FROM tasks GROUP BY (owner_id, project_id) ORDER BY 1', params: [], tables: ['tasks'] });
        assert.deepEqual(grouped.rows, [{ owner_id: 'u-own', n: 3 }]);
        // An array of rows cannot be checked, and is refused naming why.
        const rows = await measured(() => storage.queryAuthoritative(OWN, { sql: 'SELECT CAST(ARRAY[ROW(1, id)] AS text) AS h FROM tasks', params: [], tables: ['tasks'] }));
        assert.equal(rows.ok, false);
        assert.equal(rows.error.code, 'ERR_SYNCULAR_QUERY_REFUSED', rows.error.message);
        assert.match(rows.error.message, /array of rows/);
        // A row built past the statement's bound is refused, naming it.
        const big = await measured(() =>
          forms(storage).storage("SELECT length(CAST(ROW(g, g) AS text)) AS n FROM (SELECT repeat(repeat('x', 5000), 1000) AS g) AS x"),
        );
        assert.equal(big.ok, false);
        assert.equal(big.error.code, 'ERR_SYNCULAR_QUERY_REFUSED', big.error.message);
        assert.match(big.error.message, /array or row constructor/);
      });
    });

    test('within the bounds, repeat, normalize and case mapping answer as PostgreSQL does', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        const r = await forms(storage).storage(
          "SELECT repeat('ab', 3) AS a, normalize('e\u0301', NFC) = 'é' AS b, normalize('é') AS c, upper('abc') AS d, lower('AB') AS e, initcap('hi there') AS f, length(upper(repeat('x', 10000))) AS g",
        );
        assert.deepEqual(r.rows, [{ a: 'ababab', b: 1, c: 'é', d: 'ABC', e: 'ab', f: 'Hi There', g: 10000 }]);
      });
    });

    test('within the bounds the same operators answer as PostgreSQL does', async () => {
      await withStorage(engine, async (storage) => {
        await seedTenants(storage);
        const r = await forms(storage).storage(
          "SELECT 'abc' LIKE 'a%' AS a, 'ABC' ILIKE 'a_c' AS b, 'abc' NOT LIKE '%z%' AS c, 'abc' LIKE ANY (ARRAY['x%', '%c']) AS d, strpos('hello', 'll') AS e, position('lo' IN 'hello') AS f, split_part('a,b,c', ',', 2) AS g, replace('aXbX', 'X', '-') AS h, translate('abc', 'ab', 'xy') AS i, array_to_string(string_to_array('a|b', '|'), ',') AS j, btrim('xxhixx', 'x') AS k, ARRAY[1, 2, 3] @> ARRAY[2] AS l, ARRAY[1] <@ ARRAY[1, 2] AS m, ARRAY[1, 2] && ARRAY[2, 9] AS n, CAST('{\"a\": [1, 2]}' AS jsonb) @> CAST('{\"a\": [2]}' AS jsonb) AS o",
        );
        assert.deepEqual(r.rows, [{ a: 1, b: 1, c: 1, d: 1, e: 3, f: 4, g: 'b', h: 'a-b-', i: 'xyc', j: 'a,b', k: 'hi', l: 1, m: 1, n: 1, o: 1 }]);
        // Over the app's own rows, filters keep working.
        const t = await storage.queryAuthoritative(OWN, { sql: "SELECT id FROM tasks WHERE title LIKE 'own title%' AND strpos(title, '2') > 0", params: [], tables: ['tasks'] });
        assert.deepEqual(t.rows, [{ id: 'own-2' }]);
      });
    });

    test('storage: a statement that ignores cancellation is given up near the limit', async () => {
      await withStorage(
        engine,
        async (storage) => {
          await seedTenants(storage);
          // Numeric divisions of numbers of 85,000 and 43,000 digits: calls
          // of about half a second each, folded while the query is planned.
          const div = (k) => `length(CAST(power(CAST(7 AS numeric), 100000) / (power(CAST(3 AS numeric), 90000) + ${k}) AS text))`;
          const r = await measured(() => forms(storage).storage(`SELECT ${div(1)} + ${div(2)} + ${div(3)} + ${div(4)} AS n`));
          assert.equal(r.ok, false, 'answered');
          assert.equal(r.error.code, TIMEOUT, r.error.message);
          assert.ok(r.ms < (limit + 400) * TIME_SCALE, `took ${r.ms.toFixed(0)} ms`);
          // The storage goes on serving.
          const ok = await forms(storage).storage('SELECT 1 AS one');
          assert.deepEqual(ok.rows, [{ one: 1 }]);
        },
        { opts: { queryTimeoutMs: limit } },
      );
    });

    test('tx: a statement that ignores cancellation is given up near the limit, and its transaction with it', async () => {
      await withStorage(
        engine,
        async (storage) => {
          await seedTenants(storage);
          const div = (k) => `length(CAST(power(CAST(7 AS numeric), 100000) / (power(CAST(3 AS numeric), 90000) + ${k}) AS text))`;
          const tx = await storage.begin(OWN);
          await tx.lockPartitionForPush();
          const r = await measured(() => tx.queryAuthoritative({ sql: `SELECT ${div(1)} + ${div(2)} + ${div(3)} + ${div(4)} AS n`, params: [], tables: [] }));
          assert.equal(r.ok, false, 'answered');
          assert.equal(r.error.code, TIMEOUT, r.error.message);
          assert.match(r.error.message, /transaction was rolled back/);
          // 100 ms past the limit at most (the previous build: seconds).
          assert.ok(r.ms < (limit + 100) * TIME_SCALE, `took ${r.ms.toFixed(0)} ms`);
          // The transaction is over: its calls say so, its rollback succeeds.
          await assert.rejects(tx.getRow('tasks', 'own-1'), (e) => e.code === 'ERR_SYNCULAR_TX_FINISHED');
          await assert.rejects(tx.commit(), (e) => e.code === 'ERR_SYNCULAR_TX_FINISHED');
          await tx.rollback();
          // The storage goes on serving, the same partition too once the
          // server has ended the abandoned statement (its lock goes with it).
          const ok = await forms(storage).storage('SELECT 1 AS one');
          assert.deepEqual(ok.rows, [{ one: 1 }]);
          const next = await storage.begin(OWN);
          await next.lockPartitionForPush();
          assert.equal((await next.getRow('tasks', 'own-1'))?.rowId, 'own-1');
          await next.rollback();
        },
        { opts: { queryTimeoutMs: limit } },
      );
    });
  });
}

/** Server backends (other than the asking one) still running a statement containing `marker`, after a moment. */
async function serverStillRunning(url, marker) {
  const { Psql } = await import('../../stress/lib/sql.mjs');
  const psql = new Psql(url);
  try {
    let n = 0;
    for (let i = 0; i < 10; i += 1) {
      const rows = await psql.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND query LIKE '%${marker}%' AND query NOT LIKE '%pg_stat_activity%'`);
      n = Number(rows[0].n);
      if (n === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    return n;
  } finally {
    await psql.close();
  }
}
