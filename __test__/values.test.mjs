// lib/values.js reading a row answer by hand-made bytes (the row form of
// src/core/records.rs; no addon needed): each row's scopes are an object of
// its own, whatever the shape of the shared dictionary entry.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const V = createRequire(import.meta.url)('../lib/values.js');

/** A row answer: `rows` of [rowId, serverVersion, scopes text]; each payload one byte. */
function answer(rows) {
  const dictionary = [...new Set(rows.map((r) => r[2]))];
  const nums = [dictionary.length, ...dictionary.map((d) => d.length), rows.length];
  rows.forEach(([id, version, scopes], i) => nums.push(id.length, version, dictionary.indexOf(scopes), i, 1, -1, 0));
  const text = rows.map((r) => r[0]).join('') + dictionary.join('');
  return [text, Float64Array.from(nums), Uint8Array.from(rows.map((_, i) => i))];
}

test('each row gets scopes of its own: one key, several keys, nested values, and "__proto__" as data', () => {
  const proto = '{"__proto__":"x"}';
  const two = '{"a":"1","b":2}';
  const nested = '{"a":{"b":1}}';
  const rows = V.unpackRows(
    answer([
      ['r1', 1, proto],
      ['r2', 2, proto],
      ['r3', 3, two],
      ['r4', 4, two],
      ['r5', 5, nested],
      ['r6', 6, nested],
      ['r7', 7, '{"only":null}'],
    ]),
  );
  assert.deepEqual(
    rows.map((r) => [r.rowId, r.serverVersion, [...r.payload]]),
    [['r1', 1, [0]], ['r2', 2, [1]], ['r3', 3, [2]], ['r4', 4, [3]], ['r5', 5, [4]], ['r6', 6, [5]], ['r7', 7, [6]]],
  );
  for (const r of rows.slice(0, 2)) {
    assert.equal(Object.getPrototypeOf(r.scopes), Object.prototype);
    assert.deepEqual(Object.keys(r.scopes), ['__proto__']);
    assert.equal(r.scopes.__proto__, 'x');
  }
  assert.deepEqual(rows[2].scopes, { a: '1', b: 2 });
  assert.deepEqual(rows[4].scopes, { a: { b: 1 } });
  assert.deepEqual(rows[6].scopes, { only: null });
  for (const [a, b] of [[0, 1], [2, 3], [4, 5]]) {
    assert.notEqual(rows[a].scopes, rows[b].scopes);
  }
  rows[0].scopes.__proto__ = 'changed';
  rows[2].scopes.a = 'changed';
  rows[4].scopes.a.b = 'changed';
  assert.equal(rows[1].scopes.__proto__, 'x');
  assert.equal(rows[3].scopes.a, '1');
  assert.equal(rows[5].scopes.a.b, 1);
});
