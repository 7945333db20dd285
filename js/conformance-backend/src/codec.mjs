// The contract's canonical encodings: tuples and record keys, ordered positions, unsigned
// counters, canonical JSON, ISO dates and query cursors. Each produces byte for byte what the
// Python toolkit produces (test/codec.test.mjs checks them against the toolkit's golden
// vectors), because the toolkit decodes cursors, compares sizes and orders encoded values.

import { createHash } from 'node:crypto';
import { StorageError } from './errors.mjs';

/** The largest unsigned 64-bit integer, the ceiling of every contract counter. */
export const U64_MAX = 18446744073709551615n;

const HEX_COMPONENT = /^(?:[0-9a-f]{2})*$/;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Hex of the UTF-8 bytes of each component, joined by '/': plain string order is the contract order. */
export function encodeTuple(components) {
  return components.map((part) => Buffer.from(part, 'utf8').toString('hex')).join('/');
}

/** The components of an encoded tuple; a validation error for anything the toolkit would not emit. */
export function decodeTuple(encoded) {
  if (typeof encoded !== 'string') throw new StorageError('validation', 'an encoded tuple is a string');
  return encoded.split('/').map((part) => {
    if (!HEX_COMPONENT.test(part)) {
      throw new StorageError('validation', `${JSON.stringify(encoded)} is not lowercase hex of whole bytes`);
    }
    try {
      return strictUtf8.decode(Buffer.from(part, 'hex'));
    } catch {
      throw new StorageError('validation', `${JSON.stringify(encoded)} is not hex of UTF-8 text`);
    }
  });
}

/** A record key on the wire: the table name, then each id component, as one encoded tuple. */
export function encodeKey(table, id) {
  return encodeTuple([table, ...id]);
}

/** `{table, id}` of a wire key. */
export function decodeKey(encoded) {
  const [table, ...id] = decodeTuple(encoded);
  return { table, id };
}

/** The inclusive lower bound of every tuple that starts with `components` (the prefix itself). */
export function prefixLowerBound(components) {
  return encodeTuple(components);
}

/** The exclusive upper bound of every tuple that starts with `components`: only whole components match. */
export function prefixUpperBound(components) {
  return `${encodeTuple(components)}0`;
}

const UNSIGNED = /^(?:0|[1-9][0-9]{0,19})$/;

/** A contract counter from its decimal text, as a BigInt; a validation error outside 0..2^64-1. */
export function parseUnsigned(text) {
  if (typeof text !== 'string' || !UNSIGNED.test(text) || BigInt(text) > U64_MAX) {
    throw new StorageError('validation', `${JSON.stringify(text)} is not an unsigned 64-bit decimal`);
  }
  return BigInt(text);
}

/** The canonical decimal text of a counter (a BigInt or a safe integer). */
export function encodeUnsigned(value) {
  const big = BigInt(value);
  if (big < 0n || big > U64_MAX) throw new StorageError('validation', `${value} is not an unsigned 64-bit integer`);
  return big.toString();
}

/** A 20-digit, zero-padded position: text order is numeric order. */
export function orderedPosition(position) {
  return encodeUnsigned(position).padStart(20, '0');
}

function compareCodePoints(left, right) {
  return Buffer.compare(Buffer.from(left, 'utf8'), Buffer.from(right, 'utf8'));
}

/**
 * Canonical JSON as the toolkit writes it: object keys sorted by code point, no whitespace,
 * non-ASCII text kept as UTF-8. Numbers are printed by JavaScript, which agrees with the toolkit
 * on integers but not on every float: documents are stored as the text received, never re-printed.
 */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort(compareCodePoints);
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new StorageError('validation', `${value} is not a JSON number`);
  }
  if (value === undefined || typeof value === 'function' || typeof value === 'bigint' || typeof value === 'symbol') {
    throw new StorageError('validation', `a ${typeof value} is not a JSON value`);
  }
  return JSON.stringify(value);
}

/** The UTF-8 byte length of a text: what the contract's byte limits count. */
export function byteLength(text) {
  return Buffer.byteLength(text, 'utf8');
}

/** UTC with microseconds, YYYY-MM-DDTHH:MM:SS.ffffffZ, of a Date (whose precision is milliseconds). */
export function isoDate(date) {
  const text = date.toISOString();
  if (!/^\d{4}-/.test(text)) throw new StorageError('validation', `${text} is outside years 0001-9999`);
  return text.replace(/\.(\d{3})Z$/, '.$1000Z');
}

const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;

/** True when `text` is a canonical contract date naming a real instant. */
export function isIsoDate(text) {
  const match = typeof text === 'string' ? ISO.exec(text) : null;
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  if (year < 1 || hour > 23 || minute > 59 || second > 59) return false;
  const probe = new Date(0);
  probe.setUTCFullYear(year, month - 1, day);
  return probe.getUTCFullYear() === year && probe.getUTCMonth() === month - 1 && probe.getUTCDate() === day;
}

// -- cursors ---------------------------------------------------------------------------------

const ascii = (text) => text.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
const quote = (text) => ascii(JSON.stringify(text));
const bound = (b) => (b === null ? 'null' : `[${quote(b.value)},${b.inclusive ? 'true' : 'false'}]`);
const digest = (body) => createHash('sha256').update(body).digest('hex').slice(0, 16);
const cursorError = (message) => new StorageError('cursor', message);

/** A continuation after `last` ({key, sort}, both encoded), bound to the whole scope of `command`. */
export function encodeCursor(command, last) {
  const text =
    `{"d":${quote(command.direction)},"i":${quote(command.index)},"k":${quote(last.key)},` +
    `"p":${quote(command.partition)},"r":[${bound(command.range.lower)},${bound(command.range.upper)}],` +
    `"s":${quote(last.sort)},"v":1}`;
  const body = Buffer.from(text, 'ascii');
  return `rlc1.${body.toString('base64url')}.${digest(body)}`;
}

/**
 * The {sort, key} to continue after, or null for a first page. A garbled cursor, or one issued
 * for another index, partition, range or direction, throws a `cursor` error (or what `makeError`
 * makes of the message).
 */
export function decodeCursor(command, makeError = cursorError) {
  const { cursor } = command;
  if (cursor === null || cursor === undefined) return null;
  if (typeof cursor !== 'string' || !cursor.startsWith('rlc1.')) throw makeError('not a storage query cursor');
  const [token, sum, ...rest] = cursor.slice(5).split('.');
  if (sum === undefined || rest.length || !/^[A-Za-z0-9_-]*$/.test(token)) throw makeError('garbled cursor');
  const body = Buffer.from(token, 'base64url');
  if (digest(body) !== sum) throw makeError('cursor checksum mismatch: it was altered or truncated');
  let payload;
  try {
    payload = JSON.parse(body.toString('utf8'));
  } catch {
    throw makeError('garbled cursor');
  }
  const expected = {
    v: 1,
    i: command.index,
    p: command.partition,
    r: [command.range.lower, command.range.upper].map((b) => (b === null ? null : [b.value, b.inclusive])),
    d: command.direction,
  };
  for (const [part, name] of [['v', 'schema version'], ['i', 'index'], ['p', 'partition'], ['r', 'range'], ['d', 'direction']]) {
    if (JSON.stringify(payload?.[part]) !== JSON.stringify(expected[part])) {
      throw makeError(`cursor was issued for another ${name}`);
    }
  }
  if (typeof payload.s !== 'string' || typeof payload.k !== 'string') throw makeError('garbled cursor');
  return { sort: payload.s, key: payload.k };
}
