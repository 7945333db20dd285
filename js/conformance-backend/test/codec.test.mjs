// The codecs agree byte for byte with the toolkit's golden vectors
// (src/runlane_conformance/fixtures/vectors in this repository).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  canonicalJson,
  decodeCursor,
  decodeKey,
  decodeTuple,
  encodeCursor,
  encodeKey,
  encodeTuple,
  encodeUnsigned,
  isIsoDate,
  isoDate,
  orderedPosition,
  parseUnsigned,
  prefixLowerBound,
  prefixUpperBound,
} from '../src/index.mjs';

const vectors = (name) =>
  JSON.parse(readFileSync(new URL(`../../../src/runlane_conformance/fixtures/vectors/${name}.json`, import.meta.url), 'utf8'));
const ENCODINGS = vectors('encodings');
const CURSORS = vectors('cursors');
const PREFIXES = vectors('prefix_bounds');
const CANONICAL = vectors('canonical_json');
const isKind = (kind) => (error) => error.kind === kind;

test('every tuple vector encodes to its exact text and decodes back to its components', () => {
  for (const { components, encoded } of [...ENCODINGS.tuples, ...ENCODINGS.validTupleEncodings]) {
    assert.equal(encodeTuple(components), encoded, JSON.stringify(components));
    assert.deepEqual(decodeTuple(encoded), components, encoded);
  }
});

test('tuples listed in contract order encode in plain string order', () => {
  const encoded = ENCODINGS.orderedTuples.map(({ components }) => encodeTuple(components));
  assert.deepEqual(encoded, ENCODINGS.orderedTuples.map(({ encoded: text }) => text));
  for (let i = 1; i < encoded.length; i += 1) assert.ok(encoded[i - 1] < encoded[i], `${encoded[i - 1]} < ${encoded[i]}`);
});

test('an invalid tuple encoding is refused as a validation error', () => {
  for (const { encoded, reason } of ENCODINGS.invalidTupleEncodings) {
    assert.throws(() => decodeTuple(encoded), isKind('validation'), reason);
  }
});

test('a record key is the tuple of its table and id, and decodes back', () => {
  assert.equal(encodeKey('leases', ['env', 'k']), '6c6561736573/656e76/6b');
  assert.deepEqual(decodeKey('6c6561736573/656e76/6b'), { table: 'leases', id: ['env', 'k'] });
});

test('a prefix range holds exactly the tuples that start with the whole prefix components', () => {
  for (const { prefix, lowerInclusive, upperExclusive, inside, outside } of PREFIXES.bounds) {
    assert.equal(prefixLowerBound(prefix), lowerInclusive);
    assert.equal(prefixUpperBound(prefix), upperExclusive);
    for (const tuple of inside) {
      const text = encodeTuple(tuple);
      assert.ok(lowerInclusive <= text && text < upperExclusive, `${JSON.stringify(tuple)} inside ${prefix}`);
    }
    for (const tuple of outside) {
      const text = encodeTuple(tuple);
      assert.ok(!(lowerInclusive <= text && text < upperExclusive), `${JSON.stringify(tuple)} outside ${prefix}`);
    }
  }
});

test('unsigned counters keep their decimal text and order as 20-digit positions', () => {
  for (const { value, encoded, ordered } of ENCODINGS.unsignedIntegers) {
    assert.equal(encodeUnsigned(parseUnsigned(value)), encoded);
    assert.equal(orderedPosition(parseUnsigned(value)), ordered);
  }
  for (const text of ENCODINGS.invalidUnsignedIntegers) {
    assert.throws(() => parseUnsigned(text), isKind('validation'), JSON.stringify(text));
  }
});

test('dates are UTC with six fractional digits, and only real canonical dates are accepted', () => {
  for (const { encoded } of ENCODINGS.isoDates) assert.ok(isIsoDate(encoded), encoded);
  for (const text of ENCODINGS.invalidIsoDates) assert.equal(isIsoDate(text), false, JSON.stringify(text));
  assert.equal(isoDate(new Date(Date.UTC(2031, 2, 4, 5, 6, 7, 123))), '2031-03-04T05:06:07.123000Z');
  const millisecondVectors = ENCODINGS.isoDates.filter(({ encoded }) => encoded.endsWith('000Z') && !encoded.startsWith('0'));
  for (const { instant, encoded } of millisecondVectors) assert.equal(isoDate(new Date(instant)), encoded, instant);
});

test('canonical JSON is byte for byte what the toolkit prints', () => {
  for (const { name, value, canonical } of CANONICAL.cases) assert.equal(canonicalJson(value), canonical, name);
  assert.throws(() => canonicalJson({ n: Number.NaN }), isKind('validation'));
});

test('every cursor vector is issued byte for byte and decodes to its position', () => {
  for (const vector of CURSORS.cases) {
    const command = { ...vector.command, cursor: null };
    const cursor = encodeCursor(command, { key: encodeKey(vector.last.key.table, vector.last.key.id), sort: vector.last.sort });
    assert.equal(cursor, vector.cursor, vector.name);
    assert.deepEqual(decodeCursor({ ...command, cursor }), vector.position, vector.name);
  }
});

test('a cursor is refused under another scope, and when garbled', () => {
  const [first] = CURSORS.cases;
  const command = { ...first.command, cursor: first.cursor };
  assert.equal(decodeCursor({ ...command, cursor: null }), null);
  assert.throws(() => decodeCursor({ ...command, partition: 'elsewhere' }), /another partition/);
  assert.throws(() => decodeCursor({ ...command, direction: 'desc' }), /another direction/);
  assert.throws(() => decodeCursor({ ...command, index: 'Other' }), isKind('cursor'));
  for (const { cursor, reason } of CURSORS.invalidCursors) {
    assert.throws(() => decodeCursor({ ...command, cursor }), isKind('cursor'), reason);
  }
});
