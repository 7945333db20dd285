// Type declarations for @runlane/conformance-backend: the TypeScript shape of the Runlane
// storage contract's driver, as the backend serves it, and the contract's codecs.

/** An encoded tuple: lowercase hex of each UTF-8 component, joined by '/'. String order is contract order. */
export type EncodedTuple = string;
/** A record key: the encoded tuple of the table name followed by the id components. */
export type EncodedKey = string;
/** A contract date, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, microseconds). */
export type IsoDate = string;
/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface IndexEntry {
  readonly index: string;
  readonly partition: string;
  readonly sort: EncodedTuple;
}

/** A record to write. `document` is canonical JSON text: store it and return it exactly as received. */
export interface NewStorageRecord {
  readonly key: EncodedKey;
  readonly document: string;
  readonly indexes: readonly IndexEntry[];
}

/** A committed record; `version` is a positive decimal string, never reused for its key. */
export interface StoredRecord extends NewStorageRecord {
  readonly version: string;
}

export interface QueryBound {
  readonly value: EncodedTuple;
  readonly inclusive: boolean;
}

export interface QueryRecordsCommand {
  readonly index: string;
  readonly partition: string;
  readonly limit: number;
  readonly range: { readonly lower: QueryBound | null; readonly upper: QueryBound | null };
  readonly direction: 'asc' | 'desc';
  readonly cursor: string | null;
}

export interface QueryRecordsResult {
  readonly items: readonly { readonly key: EncodedKey; readonly sort: EncodedTuple }[];
  readonly cursor: string | null;
}

export type StorageCandidateMode = 'advisory' | 'exclusive';

export interface AppendRecordsCommand {
  readonly stream: 'observations';
  readonly partition: string;
  readonly values: readonly { [key: string]: Json }[];
}

export interface StorageLimits {
  readonly max_point_reads: number;
  readonly max_query_results: number;
  readonly max_transaction_records: number;
  readonly max_record_bytes: number;
  readonly max_transaction_bytes: number;
}

/** The profile a driver advertises, in the protocol's spelling (camelCase keys are accepted too). */
export interface StorageProfile {
  readonly durability: 'process' | 'durable';
  readonly clock_authority: 'client' | 'server_sampled' | 'transaction_authoritative';
  readonly index_consistency: 'strong' | 'eventual';
  readonly exclusive_candidates: boolean;
  readonly append: boolean;
  readonly limits: StorageLimits;
}

/** One attempt of a transaction: what the callback gets. Every method may be async. */
export interface StorageTransaction {
  get(keys: readonly EncodedKey[]): Promise<(StoredRecord | null)[]> | (StoredRecord | null)[];
  queryCandidates(
    command: QueryRecordsCommand,
    mode: StorageCandidateMode,
  ): Promise<QueryRecordsResult> | QueryRecordsResult;
  now(): Promise<IsoDate | Date> | IsoDate | Date;
  create(record: NewStorageRecord): Promise<void> | void;
  replace(current: StoredRecord, record: NewStorageRecord): Promise<void> | void;
  delete(current: StoredRecord): Promise<void> | void;
  /** Optional: ordered append (profile `append: true`). */
  append?(command: AppendRecordsCommand): Promise<void> | void;
}

/** A page of an operator read. */
export interface OperatorPage {
  readonly items: readonly StoredRecord[];
  readonly cursor: string | null;
}

/** One driver instance. The three operator reads are optional, but offered all together or not at all. */
export interface StorageDriver {
  readonly profile: StorageProfile | Record<string, unknown>;
  /** Run the driver's transaction loop: call `callback` once per attempt; return what the committed attempt returned. */
  transaction<T>(callback: (tx: StorageTransaction) => Promise<T>): Promise<T>;
  /** An advisory query outside any transaction. */
  query?(command: QueryRecordsCommand): Promise<QueryRecordsResult> | QueryRecordsResult;
  getRun?(environment: string, runId: string): Promise<StoredRecord | null> | StoredRecord | null;
  listRuns?(environment: string, page: { limit: number; cursor: string | null }): Promise<OperatorPage> | OperatorPage;
  listRunEvents?(
    environment: string,
    runId: string,
    page: { limit: number; cursor: string | null },
  ): Promise<OperatorPage> | OperatorPage;
  close?(): Promise<void> | void;
}

/** Passed to `connect`: `clock` is set when the suite injected a clock (use it if your clock authority is `client`). */
export interface ConnectOptions {
  readonly clock?: () => Promise<IsoDate>;
}

/** What `serve` needs: who you are, your profile, and how to make stores and drivers. */
export interface Backend<Store = unknown> {
  readonly name: string;
  readonly version: string;
  readonly driver: string;
  readonly profile: StorageProfile | Record<string, unknown>;
  /** A new, empty, isolated store. */
  open(): Promise<Store> | Store;
  /** A new, independent driver instance on `store`. */
  connect(store: Store, options: ConnectOptions): Promise<StorageDriver> | StorageDriver;
  /** A JSON address another backend process can `attach` to; omit for process-local stores. */
  addressOf?(store: Store): Promise<Json | null> | Json | null;
  attach?(address: Json): Promise<Store> | Store;
  close?(store: Store): Promise<void> | void;
  /**
   * For eventual indexes: resolve `true` once every index of `store` shows every commit finished
   * before the call, `false` if `timeout` seconds pass first. Offered, the toolkit's checks wait on
   * it instead of polling, as they do for a Python store handle's `settle`.
   */
  settle?(store: Store, options: { timeout: number }): Promise<boolean> | boolean;
}

/** The stream the protocol is read from (any Node readable stream; stdin by default). */
export interface ReadableLike {
  on(event: string, listener: (...args: any[]) => void): unknown;
}

/** The stream the protocol is written to (stdout by default). */
export interface WritableLike {
  write(chunk: string): unknown;
}

export interface ServeOptions {
  readonly input?: ReadableLike;
  readonly output?: WritableLike;
  /** Default true with the standard streams: console.log/info/debug go to stderr. */
  readonly redirectConsole?: boolean;
  /** Default true with the standard streams: exit once stdin closes. */
  readonly exitOnClose?: boolean;
}

export const PROTOCOL_VERSIONS: readonly number[];
export function serve<Store>(backend: Backend<Store>, options?: ServeOptions): Promise<void>;
export function profileToWire(profile: StorageProfile | Record<string, unknown>): StorageProfile;
export function errorToWire(failure: unknown): { kind: string; message: string; [detail: string]: unknown };
export function errorFromWire(wire: { kind: string; message: string; [detail: string]: unknown }): Error;

// -- errors ---------------------------------------------------------------------------------

export type StorageErrorKind =
  | 'conflict'
  | 'limit'
  | 'validation'
  | 'corruption'
  | 'cursor'
  | 'profile'
  | 'stream_exhausted'
  | 'unsupported'
  | 'usage'
  | 'sealed'
  | 'duplicate_mutation'
  | 'key_change'
  | 'attempt_ended'
  | 'concurrent_use'
  | 'unavailable'
  | 'commit_unknown';

export const ERROR_KINDS: readonly StorageErrorKind[];
export function isErrorKind(kind: unknown): kind is StorageErrorKind;

/** A contract error; any error with a `kind` from ERROR_KINDS is reported as that contract error. */
export class StorageError extends Error {
  constructor(kind: StorageErrorKind, message: string, details?: Record<string, unknown>);
  readonly kind: StorageErrorKind;
  readonly limit?: keyof StorageLimits;
  readonly maximum?: number;
  readonly actual?: number;
}

export function limitError(limit: keyof StorageLimits, maximum: number, actual: number): StorageError;

/** Thrown from the callback when the toolkit's callback failed with a non-contract error: never retry it. */
export class CallbackFailedError extends Error {
  constructor(message: string);
}

// -- codecs ---------------------------------------------------------------------------------

export const U64_MAX: bigint;
export function encodeTuple(components: readonly string[]): EncodedTuple;
export function decodeTuple(encoded: EncodedTuple): string[];
export function encodeKey(table: string, id: readonly string[]): EncodedKey;
export function decodeKey(encoded: EncodedKey): { table: string; id: string[] };
export function prefixLowerBound(components: readonly string[]): EncodedTuple;
export function prefixUpperBound(components: readonly string[]): EncodedTuple;
export function parseUnsigned(text: string): bigint;
export function encodeUnsigned(value: bigint | number): string;
export function orderedPosition(position: bigint | number): string;
export function canonicalJson(value: Json): string;
export function byteLength(text: string): number;
export function isoDate(date: Date): IsoDate;
export function isIsoDate(text: unknown): text is IsoDate;
export function encodeCursor(
  command: Omit<QueryRecordsCommand, 'limit' | 'cursor'>,
  last: { key: EncodedKey; sort: EncodedTuple },
): string;
export function decodeCursor(
  command: Omit<QueryRecordsCommand, 'limit'>,
  makeError?: (message: string) => Error,
): { sort: EncodedTuple; key: EncodedKey } | null;
