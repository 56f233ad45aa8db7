// Durability setting (issue 7 §5): `synchronous` is validated with a coded
// error, and no setting loses an acknowledged commit when the process is
// killed (the default is covered by crash.test.mjs).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runCrash } from '../../stress/lib/crash.mjs';
import { NativeStorage } from '../support/package.mjs';
import { noShell } from '../support/sqlite-cli.mjs';

describe('reliability: durability setting', () => {
  test("synchronous accepts 'off' | 'normal' | 'full' (any case) and nothing else", () => {
    for (const synchronous of ['off', 'normal', 'full', 'FULL', undefined]) {
      assert.doesNotThrow(() => new NativeStorage({ url: 'sqlite::memory:', synchronous }), String(synchronous));
    }
    // Regression: the constructor used to throw the raw native error (wire text, code GenericFailure).
    for (const synchronous of ['bogus', '', 'extra', 5, {}]) {
      assert.throws(
        () => new NativeStorage({ url: 'sqlite::memory:', synchronous }),
        (err) => err instanceof TypeError && err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT' && !err.message.includes('\u0001'),
        JSON.stringify(synchronous),
      );
    }
    for (const busyTimeoutMs of [-1, Number.NaN, 'x']) {
      assert.throws(() => new NativeStorage({ url: 'sqlite::memory:', busyTimeoutMs }), (err) => err.code === 'ERR_SYNCULAR_INVALID_ARGUMENT');
    }
  });

  for (const synchronous of ['full', 'off']) {
    test(`synchronous '${synchronous}': SIGKILLed pushers lose no acknowledged commit`, { skip: noShell }, async () => {
      const f = await runCrash({ kills: 3, synchronous, seed: Date.now() });
      assert.deepEqual(f.problems, []);
      assert.equal(f.survived, 3);
      assert.equal(f.lost + f.partial + f.duplicates + f.gaps, 0);
    });
  }
});
