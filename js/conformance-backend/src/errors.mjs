// The contract's errors as one JavaScript class with a `kind`, the same names the backend
// protocol uses. A driver may throw these, or any error of its own that carries one of these
// kinds in a string `kind` property: the backend sends the kind, so the toolkit raises the
// matching contract error. Anything else reaches the toolkit as `internal` (a crash).

/** Every contract error kind a driver may report, in the protocol's spelling. */
export const ERROR_KINDS = Object.freeze([
  'conflict',
  'limit',
  'validation',
  'corruption',
  'cursor',
  'profile',
  'stream_exhausted',
  'unsupported',
  'usage',
  'sealed',
  'duplicate_mutation',
  'key_change',
  'attempt_ended',
  'concurrent_use',
  'unavailable',
  'commit_unknown',
]);

const KINDS = new Set(ERROR_KINDS);

/** True when `kind` names a contract error. */
export function isErrorKind(kind) {
  return typeof kind === 'string' && KINDS.has(kind);
}

/** A contract error. `details` are copied onto it (a `limit` error needs `limit`, `maximum`, `actual`). */
export class StorageError extends Error {
  constructor(kind, message, details = {}) {
    super(message);
    if (!KINDS.has(kind)) throw new TypeError(`${JSON.stringify(kind)} is not a storage error kind`);
    this.name = 'StorageError';
    this.kind = kind;
    Object.assign(this, details);
  }
}

/** Work over an advertised limit: which limit, its maximum, and how much was asked. */
export function limitError(limit, maximum, actual) {
  return new StorageError('limit', `${limit} exceeded: ${actual} > ${maximum}`, { limit, maximum, actual });
}

/**
 * Raised inside a driver's transaction callback when the toolkit's callback failed with an
 * error that is not a contract error. A driver must not retry it; the backend hands the
 * toolkit's own exception back to the suites.
 */
export class CallbackFailedError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CallbackFailedError';
  }
}
