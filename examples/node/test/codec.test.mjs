// The JavaScript encodings agree with the toolkit's pinned vectors and orders.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { canonicalJson, decodeCursor, decodeTuple, encodeCursor, encodeTuple, isoDate, prefixUpperBound } from '../codec.mjs';

const vectors = JSON.parse(
  readFileSync(new URL('../../../src/runlane_conformance/fixtures/vectors/cursors.json', import.meta.url), 'utf8'),
);
const keyOf = ({ table, id }) => encodeTuple([table, ...id]);
const asWire = (command) => ({ ...command, cursor: null });
const makeError = (message) => Object.assign(new Error(message), { kind: 'cursor' });

test('a tuple is the hex of each UTF-8 component joined by slashes, and decodes back', () => {
  assert.equal(encodeTuple(['leases', 'env', 'k']), '6c6561736573/656e76/6b');
  assert.deepEqual(decodeTuple(encodeTuple(['é', '', '😀'])), ['é', '', '😀']);
});

test('encoded order is component-wise byte order, and the prefix bound closes a prefix range', () => {
  assert.ok(encodeTuple(['a']) < encodeTuple(['a', '']));
  assert.ok(encodeTuple(['a', 'zzz']) < prefixUpperBound(['a']));
  assert.ok(encodeTuple(['a\u{10FFFF}']) > prefixUpperBound(['a']));
});

test('every cursor vector is issued byte for byte and decodes to its position', () => {
  for (const vector of vectors.cases) {
    const command = asWire(vector.command);
    const cursor = encodeCursor(command, { key: keyOf(vector.last.key), sort: vector.last.sort });
    assert.equal(cursor, vector.cursor, vector.name);
    const position = decodeCursor({ ...command, cursor }, makeError);
    assert.deepEqual(position, { sort: vector.last.sort, key: keyOf(vector.last.key) }, vector.name);
  }
});

test('a cursor is refused under another scope, and when garbled', () => {
  const [first] = vectors.cases;
  const command = { ...asWire(first.command), cursor: first.cursor };
  assert.throws(() => decodeCursor({ ...command, partition: 'elsewhere' }, makeError), /another partition/);
  assert.throws(() => decodeCursor({ ...command, direction: 'desc' }, makeError), /another direction/);
  for (const bad of vectors.invalidCursors) {
    assert.throws(() => decodeCursor({ ...command, cursor: bad }, makeError), { kind: 'cursor' }, String(bad));
  }
});

test('canonical JSON sorts keys by code point and keeps non-ASCII text', () => {
  assert.equal(canonicalJson({ b: 1, a: ['é', null, true], '😀': {}, 'ｚ': 2 }), '{"a":["é",null,true],"b":1,"ｚ":2,"😀":{}}');
});

test('dates have six fractional digits and a Z', () => {
  assert.equal(isoDate(new Date(Date.UTC(2031, 2, 4, 5, 6, 7, 123))), '2031-03-04T05:06:07.123000Z');
});
