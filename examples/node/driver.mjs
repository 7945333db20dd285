// A Runlane storage driver in plain JavaScript: an in-memory store with optimistic transactions.
//
// Each attempt reads the latest committed state and remembers what it saw: the version (or
// absence) of every key it read, and every index page it scanned. Commit runs without awaiting
// anything, so in Node's single thread it is atomic: it re-checks every read and re-runs every
// scan, and applies the staged writes only if nothing changed; otherwise the attempt is replayed.
// Read-only attempts are validated too, so an attempt never returns a mix of two states.
//
// Values are the toolkit's wire forms: keys are encoded strings, documents are canonical JSON
// text, versions are decimal strings, times are ISO strings. The driver never re-serialises a
// document it was given.

import {
  StorageError,
  U64_MAX,
  byteLength,
  canonicalJson,
  decodeCursor,
  encodeCursor,
  encodeTuple,
  isoDate,
  limitError,
  orderedPosition,
  prefixUpperBound,
} from '../../js/conformance-backend/src/index.mjs';

export { StorageError, limitError };

// -- errors: the package's StorageError, one helper per contract error kind --------------------

const error = (kind) => (message, details) => new StorageError(kind, message, details);
export const conflict = error('conflict');
export const usage = error('usage');
const sealed = error('sealed');
const duplicateMutation = error('duplicate_mutation');
const keyChange = error('key_change');
const attemptEnded = error('attempt_ended');
const concurrentUse = error('concurrent_use');
const cursorError = error('cursor');
const corruption = error('corruption');
const streamExhausted = error('stream_exhausted');
const validation = error('validation');

// -- profile ----------------------------------------------------------------------------------

export const DEFAULT_LIMITS = Object.freeze({
  max_point_reads: 100,
  max_query_results: 100,
  max_transaction_records: 100,
  max_record_bytes: 400 * 1024,
  max_transaction_bytes: 4 * 1024 * 1024,
});

export function memoryProfile(limits = DEFAULT_LIMITS) {
  return {
    durability: 'process',
    clock_authority: 'client',
    index_consistency: 'strong',
    exclusive_candidates: true,
    append: true,
    limits: { ...limits },
  };
}

// -- the store ---------------------------------------------------------------------------------

const OBSERVATIONS = {
  recordTable: 'observations',
  headTable: 'stream_heads',
  index: 'ObservationsByPosition',
  positionField: 'position',
  partitionField: 'environment',
};

/** The shared state of every driver instance on one store. */
export class MemoryStore {
  constructor() {
    this.records = new Map(); // encoded key -> {key, version, document, indexes}
    this.lastVersion = 0n;
    this.held = new Map(); // encoded key -> the attempt holding it exclusively
  }

  nextVersion() {
    this.lastVersion += 1n;
    return this.lastVersion.toString();
  }

  /** One page of {key, sort} in contract order, after `after` ({sort, key}) if given. */
  scan(command, after, skip = () => false) {
    const { lower, upper } = command.range;
    const matches = [];
    for (const [key, record] of this.records) {
      for (const entry of record.indexes) {
        if (entry.index !== command.index || entry.partition !== command.partition) continue;
        const { sort } = entry;
        if (lower && (sort < lower.value || (sort === lower.value && !lower.inclusive))) continue;
        if (upper && (sort > upper.value || (sort === upper.value && !upper.inclusive))) continue;
        matches.push({ key, sort });
      }
    }
    const descending = command.direction === 'desc';
    const order = (a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
    matches.sort(descending ? (a, b) => order(b, a) : order);
    const page = [];
    for (const item of matches) {
      if (after) {
        const cmp = order(item, after);
        if (descending ? cmp >= 0 : cmp <= 0) continue;
      }
      if (skip(item.key)) continue;
      page.push(item);
      if (page.length === command.limit) break;
    }
    return page;
  }
}

function pageResult(command, items) {
  const cursor = items.length && items.length === command.limit ? encodeCursor(command, items.at(-1)) : null;
  return { items, cursor };
}

function copyRecord(record) {
  return { key: record.key, version: record.version, document: record.document, indexes: record.indexes.map((e) => ({ ...e })) };
}

// -- one attempt -------------------------------------------------------------------------------

/** The attempt's running totals against the advertised limits (the toolkit's metering rules). */
class Meter {
  constructor(limits) {
    this.limits = limits;
    this.pointReads = 0;
    this.keys = new Set();
    this.bytes = 0;
  }

  touch(keys) {
    for (const key of keys) this.keys.add(key);
    if (this.keys.size > this.limits.max_transaction_records) {
      throw limitError('max_transaction_records', this.limits.max_transaction_records, this.keys.size);
    }
  }

  addBytes(size) {
    this.bytes += size;
    if (this.bytes > this.limits.max_transaction_bytes) {
      throw limitError('max_transaction_bytes', this.limits.max_transaction_bytes, this.bytes);
    }
  }

  recordSize(size) {
    if (size > this.limits.max_record_bytes) throw limitError('max_record_bytes', this.limits.max_record_bytes, size);
  }
}

const ENDED = 'this transaction attempt has ended; it cannot be used again';

export class Attempt {
  constructor(store, limits, clock) {
    this.store = store;
    this.clock = clock;
    this.meter = new Meter(limits);
    this.ended = false;
    this.busy = false;
    this.sealed = false;
    this.time = null;
    this.reads = new Map(); // encoded key -> version first seen (null: absent)
    this.latest = new Map(); // encoded key -> record last handed out (null: absent)
    this.scans = []; // {command, after, skipped, keys}
    this.creates = new Map(); // encoded key -> new record
    this.replaces = new Map();
    this.deletes = new Set();
    this.appended = null;
    this.streamKeys = null; // {head, prefix} once appended
    this.limitFailure = null;
    this.holds = new Set();
  }

  /** Run one call under the attempt's rules: not after the end, never two at once. */
  async guard(fn) {
    if (this.ended) throw attemptEnded(ENDED);
    if (this.busy) throw concurrentUse('this transaction attempt is already in use by another call');
    this.busy = true;
    try {
      return await fn();
    } catch (failure) {
      if (failure instanceof StorageError && failure.kind === 'limit') this.limitFailure ??= failure;
      throw failure;
    } finally {
      this.busy = false;
    }
  }

  checkReadable(operation) {
    if (this.sealed) throw sealed(`${operation}() after now() or a mutation: the read set of this attempt is sealed`);
  }

  get(keys) {
    return this.guard(() => {
      this.checkReadable('get');
      const total = this.meter.pointReads + keys.length;
      if (total > this.meter.limits.max_point_reads) {
        throw limitError('max_point_reads', this.meter.limits.max_point_reads, total);
      }
      this.meter.pointReads = total;
      this.meter.touch(keys);
      return keys.map((key) => {
        const record = this.store.records.get(key) ?? null;
        if (!this.reads.has(key)) this.reads.set(key, record && record.version);
        this.latest.set(key, record);
        return record && copyRecord(record);
      });
    });
  }

  queryCandidates(command, mode) {
    return this.guard(() => {
      this.checkReadable('query_candidates');
      checkQueryLimit(command, this.meter.limits);
      const after = decodeCursor(command, cursorError);
      const exclusive = mode === 'exclusive';
      const skipped = new Set();
      const skip = (key) => {
        const holder = this.store.held.get(key);
        if (exclusive && holder && holder !== this) {
          skipped.add(key);
          return true;
        }
        return skipped.has(key);
      };
      const items = this.store.scan(command, after, skip);
      if (exclusive) {
        for (const { key } of items) {
          this.store.held.set(key, this);
          this.holds.add(key);
        }
      }
      this.scans.push({ command, after, skipped, items: JSON.stringify(items) });
      return pageResult(command, items);
    });
  }

  now() {
    return this.guard(async () => {
      if (this.time === null) {
        const sampled = await this.clock();
        if (typeof sampled !== 'string') throw validation('the clock must return an ISO date string');
        this.time = sampled;
      }
      this.sealed = true;
      return this.time;
    });
  }

  checkMutable(key) {
    if (this.creates.has(key) || this.replaces.has(key) || this.deletes.has(key)) {
      throw duplicateMutation(`${key} is already mutated in this attempt`);
    }
    if (this.streamKeys && (key === this.streamKeys.head || key.startsWith(this.streamKeys.prefix))) {
      throw duplicateMutation(`${key} belongs to the stream partition this attempt appends to`);
    }
  }

  checkCurrent(current, operation) {
    const seen = this.latest.get(current.key);
    if (!seen || seen.version !== current.version) {
      throw keyChange(`${operation}() of ${current.key} at version ${current.version}: this attempt did not read it`);
    }
    this.checkMutable(current.key);
  }

  chargeWrite(key, record) {
    const size = record ? byteLength(record.document) : 0;
    if (record) this.meter.recordSize(size);
    this.meter.touch([key]);
    this.meter.addBytes(size);
  }

  create(record) {
    return this.guard(() => {
      this.checkMutable(record.key);
      if (this.latest.get(record.key)) throw duplicateMutation(`${record.key} was read as present, so it cannot be created`);
      this.chargeWrite(record.key, record);
      this.creates.set(record.key, record);
      this.sealed = true;
    });
  }

  replace(current, record) {
    return this.guard(() => {
      if (current.key !== record.key) throw keyChange(`a replacement cannot change the key ${current.key} to ${record.key}`);
      this.checkCurrent(current, 'replace');
      this.chargeWrite(record.key, record);
      this.replaces.set(record.key, record);
      this.sealed = true;
    });
  }

  delete(current) {
    return this.guard(() => {
      this.checkCurrent(current, 'delete');
      this.chargeWrite(current.key, null);
      this.deletes.add(current.key);
      this.sealed = true;
    });
  }

  append(command) {
    return this.guard(() => {
      if (this.appended) throw duplicateMutation('an attempt may stage only one append batch');
      const head = encodeTuple([OBSERVATIONS.headTable, command.stream, command.partition]);
      const prefix = `${encodeTuple([OBSERVATIONS.recordTable, command.partition])}/`;
      const inStream = (key) => key === head || key.startsWith(prefix);
      const mutated = [...this.creates.keys(), ...this.replaces.keys(), ...this.deletes];
      if (mutated.some(inStream)) throw duplicateMutation(`this attempt already mutated ${command.stream}/${command.partition}`);
      if ([...this.reads.keys()].some(inStream)) {
        throw usage(`this attempt point-read ${command.stream}/${command.partition}; it cannot also append to it`);
      }
      // Sized before positions exist: every position (and the head's next) at its widest, 20 digits.
      const widest = U64_MAX.toString();
      const sizes = command.values.map((value) => byteLength(envelope(placed(value, command.partition, widest))));
      const headSize = byteLength(envelope(headValue(command.stream, command.partition, widest)));
      for (const size of [...sizes, headSize]) this.meter.recordSize(size);
      const count = sizes.length + 1;
      if (count > this.meter.limits.max_transaction_records) {
        throw limitError('max_transaction_records', this.meter.limits.max_transaction_records, count);
      }
      const bytes = sizes.reduce((a, b) => a + b, 0) + headSize;
      if (bytes > this.meter.limits.max_transaction_bytes) {
        throw limitError('max_transaction_bytes', this.meter.limits.max_transaction_bytes, bytes);
      }
      this.meter.touch([...sizes.map((_, i) => `${prefix}#${i}`), head]);
      this.meter.addBytes(bytes);
      this.appended = { command, head };
      this.streamKeys = { head, prefix };
      this.sealed = true;
    });
  }

  // -- ending ----------------------------------------------------------------------------------

  end() {
    this.ended = true;
    for (const key of this.holds) if (this.store.held.get(key) === this) this.store.held.delete(key);
  }

  /**
   * Why this attempt's reads no longer hold (a record read has changed, a scanned range moved), or
   * null when everything it read is still current. Reads see the latest commit, not a snapshot, so
   * only this check makes an attempt's view consistent: commit runs it, and so does a callback that
   * raised, since an error raised on a view that mixes two commits must not reach the caller.
   */
  staleness() {
    const { records } = this.store;
    for (const [key, version] of this.reads) {
      if ((records.get(key)?.version ?? null) !== version) return `${key} changed since this attempt read it`;
    }
    for (const scan of this.scans) {
      const again = this.store.scan(scan.command, scan.after, (key) => scan.skipped.has(key));
      if (JSON.stringify(again) !== scan.items) return `index ${scan.command.index} changed since it was scanned`;
    }
    return null;
  }

  /** Validate and apply, synchronously. Throws a conflict (replay) or a terminal error; always ends. */
  commit() {
    const wasBusy = this.busy;
    this.end();
    if (wasBusy) throw concurrentUse('the callback returned while its attempt was still in use');
    if (this.limitFailure) throw this.limitFailure;
    const stale = this.staleness();
    if (stale) throw conflict(stale);
    const { records } = this.store;
    for (const key of this.creates.keys()) {
      if (records.has(key)) throw conflict(`${key} already exists`);
    }
    const writes = [];
    if (this.appended) writes.push(...this.materialize(this.appended));
    for (const record of [...this.creates.values(), ...this.replaces.values()]) writes.push(record);
    for (const { key, document, indexes } of writes) {
      records.set(key, { key, version: this.store.nextVersion(), document, indexes: indexes.map((e) => ({ ...e })) });
    }
    for (const key of this.deletes) records.delete(key);
  }

  materialize({ command, head }) {
    const start = streamPosition(command, this.store.records.get(head));
    const last = start + BigInt(command.values.length) - 1n;
    if (last + 1n > U64_MAX) {
      throw streamExhausted(`${command.stream}/${command.partition}: a batch of ${command.values.length} at ${start} would pass 2**64-1`);
    }
    const out = command.values.map((value, i) => {
      const position = start + BigInt(i);
      const ordered = orderedPosition(position);
      const key = encodeTuple([OBSERVATIONS.recordTable, command.partition, ordered]);
      // A record already at a position the head says is free means the head is corrupt: refuse the
      // batch rather than overwrite it (core's own fallback, a conditional create, could not either).
      if (this.store.records.has(key)) {
        throw corruption(`${command.stream}/${command.partition}: position ${position} is already taken, beyond the head's next position ${start}`);
      }
      return {
        key,
        document: envelope(placed(value, command.partition, position.toString())),
        indexes: [{ index: OBSERVATIONS.index, partition: command.partition, sort: encodeTuple([ordered]) }],
      };
    });
    out.push({ key: head, document: envelope(headValue(command.stream, command.partition, (last + 1n).toString())), indexes: [] });
    return out;
  }
}

function envelope(value) {
  return canonicalJson({ schemaVersion: 1, value });
}

function placed(value, partition, position) {
  return { ...value, [OBSERVATIONS.partitionField]: partition, [OBSERVATIONS.positionField]: position };
}

function headValue(stream, partition, next) {
  return { stream, partition, next };
}

/** The first position of the next batch: 1 without a head; a corrupt head or an exhausted one fails. */
function streamPosition(command, head) {
  if (!head) return 1n;
  const { value } = JSON.parse(head.document);
  const fields = Object.keys(value).sort().join(',');
  if (fields !== 'next,partition,stream') throw corruption(`stream head ${head.key} has fields ${fields}`);
  if (value.stream !== command.stream || value.partition !== command.partition) {
    throw corruption(`stream head ${head.key} names another stream or partition`);
  }
  if (typeof value.next !== 'string' || !/^[1-9][0-9]*$/.test(value.next)) {
    throw corruption(`stream head ${head.key} has non-canonical next ${JSON.stringify(value.next)}`);
  }
  const next = BigInt(value.next);
  if (next > U64_MAX) throw streamExhausted(`stream head ${head.key} is past the unsigned 64-bit range`);
  return next;
}

function checkQueryLimit(command, limits) {
  if (command.limit > limits.max_query_results) {
    throw limitError('max_query_results', limits.max_query_results, command.limit);
  }
}

// -- the driver ----------------------------------------------------------------------------------

const wallClock = () => isoDate(new Date());

export class MemoryDriver {
  constructor(store, { clock = wallClock, limits = DEFAULT_LIMITS, maxTransactionAttempts = 16 } = {}) {
    this.store = store;
    this.clock = clock;
    this.profile = memoryProfile(limits);
    this.maxAttempts = maxTransactionAttempts;
    this.closed = false;
  }

  checkOpen() {
    if (this.closed) throw usage('this driver instance was closed');
  }

  /**
   * Run `callback(attempt)` until an attempt commits; return that attempt's value. A conflict
   * replays the callback; anything the callback throws rolls back and is rethrown as it is, unless
   * the attempt's reads had gone stale, in which case the attempt is replayed like a conflict.
   */
  async transaction(callback) {
    this.checkOpen();
    let reason = 'no attempt was made';
    for (let i = 0; i < this.maxAttempts; i += 1) {
      const attempt = new Attempt(this.store, this.profile.limits, this.clock);
      let value;
      try {
        value = await callback(attempt);
      } catch (failure) {
        const stale = attempt.staleness();
        attempt.end();
        if (stale) {
          // The callback saw a view that no longer holds: its error may be an artifact of that
          // view, and the attempt could never commit anyway. Replay it on a current view.
          reason = `the callback failed after its reads went stale (${stale})`;
          continue;
        }
        throw failure;
      }
      try {
        attempt.commit();
      } catch (failure) {
        if (failure instanceof StorageError && failure.kind === 'conflict') {
          reason = failure.message;
          continue;
        }
        throw failure;
      }
      return value;
    }
    throw conflict(`transaction gave up after ${this.maxAttempts} conflicting attempts; last: ${reason}`);
  }

  /** An advisory page from the latest committed state, outside any transaction. */
  async query(command) {
    this.checkOpen();
    checkQueryLimit(command, this.profile.limits);
    return pageResult(command, this.store.scan(command, decodeCursor(command, cursorError)));
  }

  // -- operator reads: answered from the canonical run and event records ----------------------

  visibleRun(environment, runId) {
    const record = this.store.records.get(encodeTuple(['runs', environment, runId]));
    if (!record || JSON.parse(record.document).value.tombstonedAt !== null) return null;
    return record;
  }

  async getRun(environment, runId) {
    this.checkOpen();
    const record = this.visibleRun(environment, runId);
    return record && copyRecord(record);
  }

  operatorPage(command) {
    checkQueryLimit(command, this.profile.limits);
    const items = this.store.scan(command, decodeCursor(command, cursorError));
    const page = pageResult(command, items);
    return { items: items.map(({ key }) => copyRecord(this.store.records.get(key))), cursor: page.cursor };
  }

  async listRuns(environment, { limit, cursor = null }) {
    this.checkOpen();
    const range = { lower: null, upper: null };
    return this.operatorPage({ index: 'RunsByCreatedAt', partition: environment, limit, range, direction: 'desc', cursor });
  }

  async listRunEvents(environment, runId, { limit, cursor = null }) {
    this.checkOpen();
    const range = {
      lower: { value: encodeTuple([runId]), inclusive: true },
      upper: { value: prefixUpperBound([runId]), inclusive: false },
    };
    const command = { index: 'EventsByRun', partition: environment, limit, range, direction: 'asc', cursor };
    if (!this.visibleRun(environment, runId)) {
      decodeCursor(command, cursorError); // a bad cursor is refused even for a missing run
      return { items: [], cursor: null };
    }
    return this.operatorPage(command);
  }

  close() {
    this.closed = true;
  }
}
