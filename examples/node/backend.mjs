#!/usr/bin/env node
// The backend for the JavaScript driver: serves driver.mjs over the Runlane driver backend
// protocol (one JSON object per line on stdin/stdout; see docs/driver-protocol.md).
//
//   runlane-certify run --driver process --option command="node examples/node/backend.mjs"
//
// Requests are handled concurrently: a transaction waits for the toolkit to run each attempt's
// callback while that attempt's calls, and other connections' transactions, keep arriving.
// stdout carries protocol messages only; console output is sent to stderr.

import { createInterface } from 'node:readline';
import { MemoryDriver, MemoryStore, StorageError, limitError } from './driver.mjs';

const PROTOCOL = 1;
const KINDS = new Set([
  'conflict', 'limit', 'validation', 'corruption', 'cursor', 'profile', 'stream_exhausted', 'unsupported',
  'usage', 'sealed', 'duplicate_mutation', 'key_change', 'attempt_ended', 'concurrent_use', 'unavailable', 'commit_unknown',
]);

console.log = console.error; // a stray log line must never reach the protocol's stdout
console.info = console.error;

class CallbackFailed extends Error {}

let lastId = 0;
const nextId = () => {
  lastId += 1;
  return lastId;
};
const waiting = new Map(); // id of our request -> resolve
const stores = new Map(); // store id -> MemoryStore
const connections = new Map(); // connection id -> {store, driver, attempts}

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** Ask the toolkit something (an attempt's callback, a clock) and wait for its reply. */
function ask(message) {
  const id = nextId();
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    send({ id, ...message });
  });
}

function errorFromWire(wire) {
  if (wire.kind === 'limit') return limitError(wire.limit, wire.maximum, wire.actual);
  if (KINDS.has(wire.kind)) return new StorageError(wire.kind, wire.message);
  return new CallbackFailed(wire.message);
}

function errorToWire(failure) {
  if (failure instanceof StorageError && KINDS.has(failure.kind)) {
    const wire = { kind: failure.kind, message: failure.message };
    if (failure.kind === 'limit') Object.assign(wire, { limit: failure.limit, maximum: failure.maximum, actual: failure.actual });
    return wire;
  }
  return { kind: 'internal', message: `${failure?.name ?? 'Error'}: ${failure?.message ?? String(failure)}` };
}

function lookup(map, id, what) {
  const found = map.get(id);
  if (!found) throw new StorageError('usage', `no open ${what} ${JSON.stringify(id)}`);
  return found;
}

function attemptOf(id) {
  for (const connection of connections.values()) {
    const attempt = connection.attempts.get(id);
    if (attempt) return attempt;
  }
  throw new StorageError('usage', `no attempt ${JSON.stringify(id)} on an open connection`);
}

const ops = {
  hello(message) {
    if (!message.protocol.includes(PROTOCOL)) throw new StorageError('usage', `this backend speaks protocol ${PROTOCOL}`);
    const probe = new MemoryDriver(new MemoryStore());
    return { protocol: PROTOCOL, name: 'runlane-node-backend', version: '0.1.0', driver: 'memory', profile: probe.profile };
  },
  open() {
    const id = `s${nextId()}`;
    stores.set(id, new MemoryStore());
    return { store: id, address: null }; // the store lives in this process only
  },
  attach() {
    throw new StorageError('unsupported', 'memory stores are process-local and cannot be attached');
  },
  close_store({ store }) {
    lookup(stores, store, 'store');
    stores.delete(store);
    for (const [id, connection] of connections) if (connection.store === store) connections.delete(id);
    return null;
  },
  connect({ store, clock }) {
    const id = `c${nextId()}`;
    const options = {};
    if (clock) {
      options.clock = async () => {
        const reply = await ask({ op: 'clock', connection: id });
        if ('error' in reply) throw errorFromWire(reply.error);
        return reply.ok;
      };
    }
    const driver = new MemoryDriver(lookup(stores, store, 'store'), options);
    connections.set(id, { store, driver, attempts: new Map() });
    return { connection: id, profile: driver.profile, operator_reads: true };
  },
  disconnect({ connection }) {
    lookup(connections, connection, 'connection').driver.close();
    connections.delete(connection);
    return null;
  },
  async transaction({ id, connection: connectionId }) {
    const connection = lookup(connections, connectionId, 'connection');
    const blamed = new Map(); // the error thrown for a failed callback -> its attempt id
    try {
      const committed = await connection.driver.transaction(async (attempt) => {
        const attemptId = `a${nextId()}`;
        connection.attempts.set(attemptId, attempt);
        const reply = await ask({ op: 'attempt', transaction: id, attempt: attemptId });
        if ('ok' in reply) return attemptId;
        const failure = errorFromWire(reply.error);
        blamed.set(failure, attemptId);
        throw failure;
      });
      return { attempt: committed };
    } catch (failure) {
      if (blamed.has(failure)) failure.blamedAttempt = blamed.get(failure);
      throw failure;
    }
  },
  get: ({ attempt, keys }) => attemptOf(attempt).get(keys),
  query_candidates: ({ attempt, command, mode }) => attemptOf(attempt).queryCandidates(command, mode),
  now: ({ attempt }) => attemptOf(attempt).now(),
  create: async ({ attempt, record }) => (await attemptOf(attempt).create(record)) ?? null,
  replace: async ({ attempt, current, record }) => (await attemptOf(attempt).replace(current, record)) ?? null,
  delete: async ({ attempt, current }) => (await attemptOf(attempt).delete(current)) ?? null,
  append: async ({ attempt, command }) => (await attemptOf(attempt).append(command)) ?? null,
  query: ({ connection, command }) => lookup(connections, connection, 'connection').driver.query(command),
  get_run: ({ connection, environment, run_id: runId }) =>
    lookup(connections, connection, 'connection').driver.getRun(environment, runId),
  list_runs: ({ connection, environment, limit, cursor }) =>
    lookup(connections, connection, 'connection').driver.listRuns(environment, { limit, cursor }),
  list_run_events: ({ connection, environment, run_id: runId, limit, cursor }) =>
    lookup(connections, connection, 'connection').driver.listRunEvents(environment, runId, { limit, cursor }),
  shutdown: () => null,
};

async function handle(message) {
  try {
    const handler = ops[message.op];
    if (!handler) throw new StorageError('usage', `this backend has no operation ${JSON.stringify(message.op)}`);
    send({ re: message.id, ok: (await handler(message)) ?? null });
  } catch (failure) {
    const wire = errorToWire(failure);
    if (failure?.blamedAttempt) wire.attempt = failure.blamedAttempt;
    send({ re: message.id, error: wire });
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  const message = JSON.parse(line);
  if ('re' in message) {
    const resolve = waiting.get(message.re);
    waiting.delete(message.re);
    resolve(message);
  } else {
    handle(message);
  }
});
lines.on('close', () => process.exit(0));
