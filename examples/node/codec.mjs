// The contract's canonical encodings, in JavaScript: tuples and keys, ordered positions,
// canonical JSON, ISO dates and query cursors. They produce byte-for-byte what the Python
// toolkit produces, because the toolkit decodes cursors and compares sizes.

import { createHash } from 'node:crypto';

export const U64_MAX = 18446744073709551615n;

/** Hex of the UTF-8 bytes of each component, joined by '/': string order is the contract order. */
export function encodeTuple(components) {
  return components.map((part) => Buffer.from(part, 'utf8').toString('hex')).join('/');
}

export function decodeTuple(encoded) {
  return encoded.split('/').map((part) => Buffer.from(part, 'hex').toString('utf8'));
}

/** The exclusive upper bound of every tuple that starts with `components`. */
export function prefixUpperBound(components) {
  return `${encodeTuple(components)}0`;
}

/** A 20-digit, zero-padded position: text order is numeric order. */
export function orderedPosition(position) {
  return position.toString().padStart(20, '0');
}

function compareCodePoints(left, right) {
  return Buffer.compare(Buffer.from(left, 'utf8'), Buffer.from(right, 'utf8'));
}

/** Canonical JSON as the toolkit writes it: keys sorted by code point, no whitespace, UTF-8 kept. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort(compareCodePoints);
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function byteLength(text) {
  return Buffer.byteLength(text, 'utf8');
}

/** UTC with microseconds: YYYY-MM-DDTHH:MM:SS.ffffffZ. */
export function isoDate(date) {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

// -- cursors ---------------------------------------------------------------------------------

const ascii = (text) => text.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
const quote = (text) => ascii(JSON.stringify(text));
const bound = (b) => (b === null ? 'null' : `[${quote(b.value)},${b.inclusive ? 'true' : 'false'}]`);
const digest = (body) => createHash('sha256').update(body).digest('hex').slice(0, 16);

/** A continuation after `last` ({key, sort}, both encoded), bound to the whole scope of `command`. */
export function encodeCursor(command, last) {
  const text =
    `{"d":${quote(command.direction)},"i":${quote(command.index)},"k":${quote(last.key)},` +
    `"p":${quote(command.partition)},"r":[${bound(command.range.lower)},${bound(command.range.upper)}],` +
    `"s":${quote(last.sort)},"v":1}`;
  const body = Buffer.from(text, 'ascii');
  return `rlc1.${body.toString('base64url')}.${digest(body)}`;
}

/** The {sort, key} to continue after, or null; throws a cursor error for a bad or foreign cursor. */
export function decodeCursor(command, makeError) {
  const { cursor } = command;
  if (cursor === null || cursor === undefined) return null;
  if (typeof cursor !== 'string' || !cursor.startsWith('rlc1.')) throw makeError('not a storage query cursor');
  const [token, sum, ...rest] = cursor.slice(5).split('.');
  if (sum === undefined || rest.length) throw makeError('garbled cursor');
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
