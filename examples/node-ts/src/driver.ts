// A small Runlane storage driver in TypeScript: a versioned in-memory map with optimistic
// transactions, certified at `core` (no exclusive candidates, no ordered append, no operator
// reads: the profile says so, and the suites gate those areas off).
//
// An attempt reads the committed state directly and remembers what it saw. Commit is one
// synchronous function, so in Node's single thread nothing interleaves with it: it checks that
// every key read still has the version seen and every scanned page would come out the same,
// then applies the staged writes. Otherwise the attempt is replayed, up to a fixed number of times.

import {
  StorageError,
  byteLength,
  decodeCursor,
  encodeCursor,
  isoDate,
  limitError,
  type ConnectOptions,
  type EncodedKey,
  type IsoDate,
  type NewStorageRecord,
  type QueryRecordsCommand,
  type QueryRecordsResult,
  type StorageCandidateMode,
  type StorageDriver,
  type StorageLimits,
  type StorageProfile,
  type StorageTransaction,
  type StoredRecord,
} from '@runlane/conformance-backend';

export const LIMITS: StorageLimits = {
  max_point_reads: 64,
  max_query_results: 100,
  max_transaction_records: 64,
  max_record_bytes: 256 * 1024,
  max_transaction_bytes: 1024 * 1024,
};

export const PROFILE: StorageProfile = {
  durability: 'process',
  clock_authority: 'client',
  index_consistency: 'strong',
  exclusive_candidates: false,
  append: false,
  limits: LIMITS,
};

const MAX_ATTEMPTS = 16;

type Item = { key: EncodedKey; sort: string };
type Position = { key: EncodedKey; sort: string } | null;

/** The committed state one or more driver instances share. */
export class VersionedMap {
  readonly records = new Map<EncodedKey, StoredRecord>();
  private lastVersion = 0n;

  nextVersion(): string {
    this.lastVersion += 1n;
    return this.lastVersion.toString();
  }

  /** One page of `command` in contract order (sort, then key), after `after` if given. */
  scan(command: QueryRecordsCommand, after: Position): Item[] {
    const { lower, upper } = command.range;
    const matches: Item[] = [];
    for (const record of this.records.values()) {
      for (const { index, partition, sort } of record.indexes) {
        if (index !== command.index || partition !== command.partition) continue;
        if (lower && (sort < lower.value || (sort === lower.value && !lower.inclusive))) continue;
        if (upper && (sort > upper.value || (sort === upper.value && !upper.inclusive))) continue;
        matches.push({ key: record.key, sort });
      }
    }
    const sign = command.direction === 'desc' ? -1 : 1;
    const order = (a: Item, b: Item): number =>
      sign * (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
    matches.sort(order);
    const start = after === null ? 0 : matches.findIndex((item) => order(item, after) > 0);
    return start < 0 ? [] : matches.slice(start, start + command.limit);
  }
}

function page(command: QueryRecordsCommand, items: Item[]): QueryRecordsResult {
  const last = items.at(-1);
  const full = last !== undefined && items.length === command.limit;
  return { items, cursor: full ? encodeCursor(command, last) : null };
}

function checkQuery(command: QueryRecordsCommand): Position {
  if (command.limit > LIMITS.max_query_results) {
    throw limitError('max_query_results', LIMITS.max_query_results, command.limit);
  }
  return decodeCursor(command);
}

const copy = (record: StoredRecord): StoredRecord => ({
  key: record.key,
  version: record.version,
  document: record.document,
  indexes: record.indexes.map((entry) => ({ ...entry })),
});

/** One attempt: the contract's attempt rules, metered against the advertised limits. */
class Attempt implements StorageTransaction {
  ended = false;
  private busy = false;
  private sealed = false;
  private time: IsoDate | null = null;
  private pointReads = 0;
  private bytes = 0;
  private readonly touched = new Set<EncodedKey>();
  private readonly seen = new Map<EncodedKey, string | null>(); // key -> version first read (null: absent)
  private readonly latest = new Map<EncodedKey, StoredRecord | null>();
  private readonly scans: { command: QueryRecordsCommand; after: Position; items: string }[] = [];
  private readonly writes = new Map<EncodedKey, NewStorageRecord | null>(); // null: a delete
  private readonly created = new Set<EncodedKey>();
  private limitFailure: StorageError | null = null;

  constructor(
    private readonly map: VersionedMap,
    private readonly clock: () => Promise<IsoDate>,
  ) {}

  /** Every call: never after the attempt ended, never two at once; a limit error poisons the commit. */
  private async guard<T>(work: () => T | Promise<T>): Promise<T> {
    if (this.ended) throw new StorageError('attempt_ended', 'this transaction attempt has ended');
    if (this.busy) throw new StorageError('concurrent_use', 'this transaction attempt is already in use by another call');
    this.busy = true;
    try {
      return await work();
    } catch (failure) {
      if (failure instanceof StorageError && failure.kind === 'limit') this.limitFailure ??= failure;
      throw failure;
    } finally {
      this.busy = false;
    }
  }

  private readable(operation: string): void {
    if (this.sealed) throw new StorageError('sealed', `${operation}() after now() or a mutation: the read set is sealed`);
  }

  private touch(keys: readonly EncodedKey[]): void {
    for (const key of keys) this.touched.add(key);
    if (this.touched.size > LIMITS.max_transaction_records) {
      throw limitError('max_transaction_records', LIMITS.max_transaction_records, this.touched.size);
    }
  }

  get(keys: readonly EncodedKey[]): Promise<(StoredRecord | null)[]> {
    return this.guard(() => {
      this.readable('get');
      const total = this.pointReads + keys.length;
      if (total > LIMITS.max_point_reads) throw limitError('max_point_reads', LIMITS.max_point_reads, total);
      this.pointReads = total;
      this.touch(keys);
      return keys.map((key) => {
        const record = this.map.records.get(key) ?? null;
        if (!this.seen.has(key)) this.seen.set(key, record?.version ?? null);
        this.latest.set(key, record);
        return record && copy(record);
      });
    });
  }

  queryCandidates(command: QueryRecordsCommand, mode: StorageCandidateMode): Promise<QueryRecordsResult> {
    return this.guard(() => {
      this.readable('query_candidates');
      if (mode === 'exclusive') throw new StorageError('unsupported', 'this driver offers no exclusive candidates');
      const after = checkQuery(command);
      const items = this.map.scan(command, after);
      this.scans.push({ command, after, items: JSON.stringify(items) });
      return page(command, items);
    });
  }

  now(): Promise<IsoDate> {
    return this.guard(async () => {
      this.time ??= await this.clock();
      this.sealed = true;
      return this.time;
    });
  }

  private stage(key: EncodedKey, record: NewStorageRecord | null): void {
    if (this.writes.has(key)) throw new StorageError('duplicate_mutation', `${key} is already mutated in this attempt`);
    const size = record === null ? 0 : byteLength(record.document);
    if (size > LIMITS.max_record_bytes) throw limitError('max_record_bytes', LIMITS.max_record_bytes, size);
    this.touch([key]);
    if (this.bytes + size > LIMITS.max_transaction_bytes) {
      throw limitError('max_transaction_bytes', LIMITS.max_transaction_bytes, this.bytes + size);
    }
    this.bytes += size;
    this.writes.set(key, record);
    this.sealed = true;
  }

  private current(current: StoredRecord, operation: string): void {
    const read = this.latest.get(current.key);
    if (!read || read.version !== current.version) {
      throw new StorageError('key_change', `${operation}() of ${current.key}@${current.version}: this attempt did not read it`);
    }
  }

  create(record: NewStorageRecord): Promise<void> {
    return this.guard(() => {
      if (this.writes.has(record.key)) throw new StorageError('duplicate_mutation', `${record.key} is already mutated`);
      if (this.latest.get(record.key)) {
        throw new StorageError('duplicate_mutation', `${record.key} was read as present, so it cannot be created`);
      }
      this.stage(record.key, record);
      this.created.add(record.key);
    });
  }

  replace(current: StoredRecord, record: NewStorageRecord): Promise<void> {
    return this.guard(() => {
      if (current.key !== record.key) throw new StorageError('key_change', `a replacement cannot change the key ${current.key}`);
      this.current(current, 'replace');
      this.stage(record.key, record);
    });
  }

  delete(current: StoredRecord): Promise<void> {
    return this.guard(() => {
      this.current(current, 'delete');
      this.stage(current.key, null);
    });
  }

  /** Validate and apply at once, or throw: a conflict (to replay) or the attempt's own failure. */
  /**
   * Why this attempt's reads no longer hold, or null while all of them are current. Reads see the
   * latest commit rather than a snapshot, so this is what keeps an attempt's view consistent: commit
   * runs it, and so does a callback that threw (its error may come from a view mixing two commits).
   */
  staleness(): string | null {
    const { records } = this.map;
    for (const [key, version] of this.seen) {
      if ((records.get(key)?.version ?? null) !== version) return `${key} changed since it was read`;
    }
    for (const { command, after, items } of this.scans) {
      if (JSON.stringify(this.map.scan(command, after)) !== items) return `index ${command.index} changed since it was scanned`;
    }
    return null;
  }

  commit(): void {
    const busy = this.busy;
    this.ended = true;
    if (busy) throw new StorageError('concurrent_use', 'the callback returned while its attempt was still in use');
    if (this.limitFailure) throw this.limitFailure;
    const stale = this.staleness();
    if (stale !== null) throw new StorageError('conflict', stale);
    const { records } = this.map;
    for (const key of this.created) {
      if (records.has(key)) throw new StorageError('conflict', `${key} was created by another transaction`);
    }
    for (const [key, record] of this.writes) {
      if (record === null) records.delete(key);
      else records.set(key, { ...record, indexes: record.indexes.map((entry) => ({ ...entry })), version: this.map.nextVersion() });
    }
  }
}

const wallClock = async (): Promise<IsoDate> => isoDate(new Date());

/** One driver instance on a shared map. */
export class VersionedMapDriver implements StorageDriver {
  readonly profile = PROFILE;
  private closed = false;
  private readonly clock: () => Promise<IsoDate>;

  constructor(
    private readonly map: VersionedMap,
    options: ConnectOptions = {},
  ) {
    this.clock = options.clock ?? wallClock;
  }

  private open(): void {
    if (this.closed) throw new StorageError('usage', 'this driver instance was closed');
  }

  /** Run `callback` until an attempt commits; a conflict (or a failure on stale reads) replays it, any other failure rolls back. */
  async transaction<T>(callback: (tx: StorageTransaction) => Promise<T>): Promise<T> {
    this.open();
    let reason = 'no attempt was made';
    for (let attempts = 0; attempts < MAX_ATTEMPTS; attempts += 1) {
      const attempt = new Attempt(this.map, this.clock);
      let value: T;
      try {
        value = await callback(attempt);
      } catch (failure) {
        attempt.ended = true; // rolled back: nothing was staged anywhere but in the attempt
        const stale = attempt.staleness();
        if (stale !== null) {
          // An error raised on a view that no longer holds must not escape: replay on a current view.
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
    throw new StorageError('conflict', `gave up after ${MAX_ATTEMPTS} conflicting attempts; last: ${reason}`);
  }

  async query(command: QueryRecordsCommand): Promise<QueryRecordsResult> {
    this.open();
    return page(command, this.map.scan(command, checkQuery(command)));
  }

  close(): void {
    this.closed = true;
  }
}
