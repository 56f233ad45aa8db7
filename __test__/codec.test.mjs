// Self-check of the test suite's own row encoder against the worked example
// of storage-layout.md §6.1 (no addon needed).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { col } from './support/schema.mjs';
import { decodeRow, encodeColumnVersions, encodeRow, fromHex, hex } from './support/codec.mjs';

const NOTES = [
  col('id', 'string'),
  col('title', 'string', true),
  col('body', 'string'),
  col('count', 'integer', true),
  col('score', 'float'),
  col('done', 'boolean'),
  col('meta', 'json', true),
  col('blob', 'bytes', true),
];

const EXAMPLE = fromHex(`
  02
  03000000 6e2d32
  0a000000 706c61696e20626f6479
  f9ffffffffffffff
  000000000000c03f
  00
  0a000000 7b226b223a747275657d
  05000000 000102feff`);

test('encodeRow reproduces the §6.1 worked example', () => {
  const bytes = encodeRow(NOTES, {
    id: 'n-2',
    title: null,
    body: 'plain body',
    count: -7,
    score: 0.125,
    done: false,
    meta: '{"k":true}',
    blob: Uint8Array.of(0, 1, 2, 0xfe, 0xff),
  });
  assert.equal(hex(bytes), hex(EXAMPLE));
});

test('decodeRow inverts encodeRow and rejects malformed rows', () => {
  const values = decodeRow(NOTES, EXAMPLE);
  assert.equal(values.id, 'n-2');
  assert.equal(values.title, null);
  assert.equal(values.count, -7);
  assert.equal(hex(encodeRow(NOTES, values)), hex(EXAMPLE));
  assert.throws(() => decodeRow(NOTES, EXAMPLE.subarray(0, EXAMPLE.length - 1)));
  assert.throws(() => decodeRow(NOTES, Uint8Array.of(...EXAMPLE, 0)));
  const nullId = Uint8Array.from(EXAMPLE);
  nullId[0] |= 1;
  assert.throws(() => decodeRow(NOTES, nullId));
});

test('nine columns use a two-byte bitmap', () => {
  const cols = Array.from({ length: 9 }, (_, i) => col(`c${i}`, 'boolean', true));
  const bytes = encodeRow(cols, { c0: true, c8: null });
  assert.equal(hex(bytes.subarray(0, 2)), 'fe01');
  assert.equal(bytes.length, 3);
});

test('column versions are LEB128 pairs', () => {
  assert.equal(hex(encodeColumnVersions([[2, 3], [200, 1000]])), '0203c801e807');
});
