// The driver backend protocol (docs/driver-protocol.md in runlane-conformance), served for any
// driver with the TypeScript shape of the contract. One JSON object per line on stdin and
// stdout; requests are handled concurrently, because a transaction waits for the toolkit to run
// each attempt's callback while that attempt's calls, and other connections' transactions, keep
// arriving.

import { createInterface } from 'node:readline';
import { isoDate } from './codec.mjs';
import { CallbackFailedError, StorageError, isErrorKind, limitError } from './errors.mjs';

/** The protocol versions this package speaks. */
export const PROTOCOL_VERSIONS = Object.freeze([1]);

const snake = (name) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** A profile in the protocol's snake_case form, from either spelling (`clockAuthority` or `clock_authority`). */
export function profileToWire(profile) {
  if (profile === null || typeof profile !== 'object') throw new TypeError('a storage profile is an object');
  const wire = {};
  for (const [name, value] of Object.entries(profile)) {
    wire[snake(name)] = name === 'limits' ? profileToWire(value) : value;
  }
  return wire;
}

/** The wire form of whatever a driver threw: its contract kind, or `internal`. */
export function errorToWire(failure) {
  if (isErrorKind(failure?.kind)) {
    const wire = { kind: failure.kind, message: String(failure.message ?? failure.kind) };
    if (failure.kind !== 'limit') return wire;
    const { limit, maximum, actual } = failure;
    if (typeof limit === 'string' && Number.isInteger(maximum) && Number.isInteger(actual)) {
      return Object.assign(wire, { limit, maximum, actual });
    }
    return { kind: 'internal', message: `a limit error without its limit, maximum and actual: ${wire.message}` };
  }
  return { kind: 'internal', message: `${failure?.name ?? 'Error'}: ${failure?.message ?? String(failure)}` };
}

/** The error to throw from a driver's callback for the toolkit's `error` answer to an attempt. */
export function errorFromWire(wire) {
  if (wire.kind === 'limit') return limitError(wire.limit, wire.maximum, wire.actual);
  if (isErrorKind(wire.kind)) return new StorageError(wire.kind, wire.message);
  return new CallbackFailedError(wire.message);
}

const usage = (message) => new StorageError('usage', message);
const unsupported = (message) => new StorageError('unsupported', message);
const dateToWire = (value) => (value instanceof Date ? isoDate(value) : value);

/**
 * Serve `backend` over the protocol until `input` closes.
 *
 * `backend` names itself (`name`, `version`, `driver`), advertises `profile`, and makes stores
 * and drivers: `open()` returns a new, empty, isolated store (any value); `connect(store,
 * {clock})` returns a new driver instance on it. Optional: `addressOf(store)` (a JSON address
 * another backend process can `attach(address)` to), `attach(address)`, `close(store)`, and
 * `settle(store, {timeout})` (resolves `true` once a store's eventual indexes show every commit
 * finished before the call, `false` when `timeout` seconds passed first).
 *
 * Resolves once `input` has closed and every driver was closed. With the default streams the
 * process then exits, so an open database pool cannot keep a finished backend alive.
 */
export async function serve(backend, options = {}) {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  const standard = output === process.stdout;
  if (standard && options.redirectConsole !== false) {
    // A stray log line must never reach the protocol's stdout.
    console.log = console.error;
    console.info = console.error;
    console.debug = console.error;
  }
  const session = new Session(backend, (line) => output.write(line));
  const lines = createInterface({ input, crlfDelay: Infinity });
  // A 'line' listener, not `for await`: the async iterator costs a promise per line.
  await new Promise((resolve) => {
    lines.on('line', (line) => session.receive(line));
    lines.on('close', resolve);
  });
  await session.closeAll();
  if (standard && options.exitOnClose !== false) process.exit(0);
}

class Session {
  constructor(backend, write) {
    for (const required of ['name', 'version', 'driver', 'profile', 'open', 'connect']) {
      if (backend?.[required] === undefined) throw new TypeError(`a backend needs ${required}`);
    }
    this.backend = backend;
    this.write = write;
    this.lastId = 0;
    this.waiting = new Map(); // id of our own request -> resolve
    this.stores = new Map(); // store id -> the backend's store value
    this.connections = new Map(); // connection id -> {store, driver, attempts: Set}
    this.attempts = new Map(); // attempt id -> the driver's attempt object
  }

  nextId() {
    this.lastId += 1;
    return this.lastId;
  }

  send(message) {
    this.write(`${JSON.stringify(message)}\n`);
  }

  /** Ask the toolkit something (an attempt's callback, a clock) and wait for its reply. */
  ask(message) {
    const id = this.nextId();
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.send({ id, ...message });
    });
  }

  receive(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      process.stderr.write(`runlane backend: the toolkit sent a line that is not JSON: ${line.slice(0, 80)}\n`);
      process.exit(1);
    }
    if ('re' in message) {
      const resolve = this.waiting.get(message.re);
      this.waiting.delete(message.re);
      resolve?.(message);
    } else {
      this.handle(message);
    }
  }

  async handle(message) {
    try {
      const handler = OPS[message.op];
      if (!handler) throw usage(`this backend has no operation ${JSON.stringify(message.op)}`);
      const result = await handler.call(this, message);
      this.send({ re: message.id, ok: result ?? null });
    } catch (failure) {
      const wire = errorToWire(failure);
      if (failure?.blamedAttempt) wire.attempt = failure.blamedAttempt;
      this.send({ re: message.id, error: wire });
    }
  }

  lookup(map, id, what) {
    const found = map.get(id);
    if (found === undefined) throw usage(`no open ${what} ${JSON.stringify(id)}`);
    return found;
  }

  attempt(id) {
    const found = this.attempts.get(id);
    if (found === undefined) throw usage(`no attempt ${JSON.stringify(id)} on an open connection`);
    return found;
  }

  driver(id) {
    return this.lookup(this.connections, id, 'connection').driver;
  }

  async disconnect(id) {
    const connection = this.connections.get(id);
    if (connection === undefined) return;
    this.connections.delete(id);
    for (const attempt of connection.attempts) this.attempts.delete(attempt);
    await connection.driver.close?.();
  }

  async closeAll() {
    for (const id of [...this.connections.keys()]) await this.disconnect(id);
    for (const [id, store] of this.stores) {
      this.stores.delete(id);
      await this.backend.close?.(store);
    }
  }

  async addStore(store) {
    const id = `s${this.nextId()}`;
    this.stores.set(id, store);
    const address = this.backend.addressOf ? await this.backend.addressOf(store) : null;
    const answer = { store: id, address: address ?? null };
    // Every optional hook the backend offers is announced, so the toolkit's store handle has it too.
    if (typeof this.backend.settle === 'function') answer.settle = true;
    return answer;
  }
}

function operatorReads(driver) {
  return ['getRun', 'listRuns', 'listRunEvents'].every((name) => typeof driver[name] === 'function');
}

const OPS = {
  hello({ protocol }) {
    const version = PROTOCOL_VERSIONS.find((offered) => Array.isArray(protocol) && protocol.includes(offered));
    if (version === undefined) throw usage(`this backend speaks protocol ${PROTOCOL_VERSIONS.join(', ')}`);
    const { name, version: own, driver, profile } = this.backend;
    return { protocol: version, name, version: own, driver, profile: profileToWire(profile) };
  },
  async open() {
    return this.addStore(await this.backend.open());
  },
  async attach({ address }) {
    if (!this.backend.attach) throw unsupported('this backend cannot attach to a store of another process');
    return this.addStore(await this.backend.attach(address));
  },
  async settle({ store, timeout }) {
    const value = this.lookup(this.stores, store, 'store');
    if (typeof this.backend.settle !== 'function') throw unsupported('this backend offers no settle hook');
    const converged = await this.backend.settle(value, { timeout });
    if (typeof converged !== 'boolean') throw new TypeError(`settle() must resolve to a boolean, got ${String(converged)}`);
    return converged;
  },
  async close_store({ store }) {
    const value = this.lookup(this.stores, store, 'store');
    this.stores.delete(store);
    for (const [id, connection] of [...this.connections]) if (connection.store === store) await this.disconnect(id);
    await this.backend.close?.(value);
    return null;
  },
  async connect({ store, clock }) {
    const value = this.lookup(this.stores, store, 'store');
    const id = `c${this.nextId()}`;
    const options = {};
    if (clock) {
      options.clock = async () => {
        const reply = await this.ask({ op: 'clock', connection: id });
        if ('error' in reply) throw errorFromWire(reply.error);
        return reply.ok;
      };
    }
    const driver = await this.backend.connect(value, options);
    this.connections.set(id, { store, driver, attempts: new Set() });
    return { connection: id, profile: profileToWire(driver.profile), operator_reads: operatorReads(driver) };
  },
  async disconnect({ connection }) {
    this.lookup(this.connections, connection, 'connection');
    await this.disconnect(connection);
    return null;
  },
  async transaction({ id, connection: connectionId }) {
    const connection = this.lookup(this.connections, connectionId, 'connection');
    const blamed = new Map(); // the error thrown for a failed callback -> its attempt id
    try {
      const committed = await connection.driver.transaction(async (attempt) => {
        const attemptId = `a${this.nextId()}`;
        this.attempts.set(attemptId, attempt);
        connection.attempts.add(attemptId);
        const reply = await this.ask({ op: 'attempt', transaction: id, attempt: attemptId });
        if ('ok' in reply) return attemptId;
        const failure = errorFromWire(reply.error);
        blamed.set(failure, attemptId);
        throw failure;
      });
      return { attempt: committed };
    } catch (failure) {
      if (failure !== null && typeof failure === 'object' && blamed.has(failure)) {
        failure.blamedAttempt = blamed.get(failure);
      }
      throw failure;
    }
  },
  async get({ attempt, keys }) {
    return this.attempt(attempt).get(keys);
  },
  async query_candidates({ attempt, command, mode }) {
    return this.attempt(attempt).queryCandidates(command, mode);
  },
  async now({ attempt }) {
    return dateToWire(await this.attempt(attempt).now());
  },
  async create({ attempt, record }) {
    await this.attempt(attempt).create(record);
    return null;
  },
  async replace({ attempt, current, record }) {
    await this.attempt(attempt).replace(current, record);
    return null;
  },
  async delete({ attempt, current }) {
    await this.attempt(attempt).delete(current);
    return null;
  },
  async append({ attempt, command }) {
    const target = this.attempt(attempt);
    if (typeof target.append !== 'function') throw unsupported('this driver does not offer ordered append');
    await target.append(command);
    return null;
  },
  async query({ connection, command }) {
    const driver = this.driver(connection);
    if (typeof driver.query !== 'function') throw unsupported('this driver has no query()');
    return driver.query(command);
  },
  async get_run({ connection, environment, run_id: runId }) {
    return operator(this.driver(connection), 'getRun')(environment, runId);
  },
  async list_runs({ connection, environment, limit, cursor }) {
    return operator(this.driver(connection), 'listRuns')(environment, { limit, cursor: cursor ?? null });
  },
  async list_run_events({ connection, environment, run_id: runId, limit, cursor }) {
    return operator(this.driver(connection), 'listRunEvents')(environment, runId, { limit, cursor: cursor ?? null });
  },
  shutdown: () => null,
};

function operator(driver, name) {
  if (typeof driver[name] !== 'function') throw unsupported(`this driver has no operator read ${name}()`);
  return driver[name].bind(driver);
}
