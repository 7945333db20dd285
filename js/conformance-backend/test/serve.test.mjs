// The backend speaks the protocol for any driver of the contract's shape: the attempt round
// trip, error kinds, blame for a failed callback, the injected clock, and store lifetimes.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { StorageError, limitError, serve } from '../src/index.mjs';

/** A driver of one attempt per transaction, enough to watch the protocol around it. */
class ToyDriver {
  constructor(log, clock) {
    this.log = log;
    this.clock = clock;
    this.profile = {
      durability: 'process',
      clockAuthority: 'client',
      indexConsistency: 'strong',
      exclusiveCandidates: false,
      append: false,
      limits: { maxPointReads: 1, maxQueryResults: 10, maxTransactionRecords: 10, maxRecordBytes: 100, maxTransactionBytes: 1000 },
    };
  }

  async transaction(callback) {
    const attempt = {
      get: async (keys) => {
        if (keys.length > 1) throw limitError('max_point_reads', 1, keys.length);
        return keys.map(() => null);
      },
      now: async () => (this.clock ? this.clock() : new Date(Date.UTC(2030, 0, 1))),
      queryCandidates: async () => {
        throw new TypeError('scan exploded');
      },
      create: async () => undefined,
      replace: async () => undefined,
      delete: async () => undefined,
    };
    return callback(attempt);
  }

  close() {
    this.log.push('closed');
  }
}

/** One backend session on in-memory streams; `next()` is the next message it sends. */
function session() {
  const input = new PassThrough();
  const output = new PassThrough();
  const log = [];
  const done = serve(
    {
      name: 'toy',
      version: '1.0.0',
      driver: 'toy',
      profile: new ToyDriver(log).profile,
      open: () => ({}),
      connect: (store, { clock }) => new ToyDriver(log, clock),
      close: () => log.push('store closed'),
    },
    { input, output },
  );
  const queue = [];
  const waiters = [];
  let buffered = '';
  output.on('data', (chunk) => {
    buffered += chunk;
    let newline;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const message = JSON.parse(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(message);
      else queue.push(message);
    }
  });
  let lastId = 0;
  return {
    log,
    done,
    send: (message) => input.write(`${JSON.stringify(message)}\n`),
    next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve) => waiters.push(resolve))),
    async ask(op, members = {}) {
      lastId += 1;
      this.send({ id: lastId, op, ...members });
      return [lastId, await this.next()];
    },
    end: () => input.end(),
  };
}

async function connected(options = {}) {
  const s = session();
  const [, opened] = await s.ask('open');
  const [, connection] = await s.ask('connect', { store: opened.ok.store, clock: options.clock ?? false });
  return { s, store: opened.ok.store, connection: connection.ok.connection, connectAnswer: connection.ok };
}

test('hello names the backend and advertises the profile in the protocol spelling', async () => {
  const s = session();
  const [id, reply] = await s.ask('hello', { protocol: [1] });
  assert.equal(reply.re, id);
  assert.equal(reply.ok.protocol, 1);
  assert.equal(reply.ok.name, 'toy');
  assert.equal(reply.ok.profile.clock_authority, 'client');
  assert.equal(reply.ok.profile.limits.max_point_reads, 1);
  s.end();
  await s.done;
});

test('hello refuses a toolkit that speaks no version this backend speaks', async () => {
  const s = session();
  const [, reply] = await s.ask('hello', { protocol: [99] });
  assert.equal(reply.error.kind, 'usage');
  s.end();
});

test('a connection without the three operator reads says so', async () => {
  const { s, connectAnswer } = await connected();
  assert.equal(connectAnswer.operator_reads, false);
  assert.equal(connectAnswer.profile.exclusive_candidates, false);
  s.end();
});

test('a transaction asks for its attempt, serves the attempt calls, and commits the attempt whose callback returned', async () => {
  const { s, connection } = await connected();
  s.send({ id: 50, op: 'transaction', connection });
  const attempt = await s.next();
  assert.equal(attempt.op, 'attempt');
  assert.equal(attempt.transaction, 50);
  s.send({ id: 51, op: 'get', attempt: attempt.attempt, keys: ['61'] });
  assert.deepEqual(await s.next(), { re: 51, ok: [null] });
  s.send({ id: 52, op: 'now', attempt: attempt.attempt });
  assert.deepEqual(await s.next(), { re: 52, ok: '2030-01-01T00:00:00.000000Z' });
  s.send({ re: attempt.id, ok: null });
  assert.deepEqual(await s.next(), { re: 50, ok: { attempt: attempt.attempt } });
  s.end();
});

test('a failed callback is thrown as its contract kind and the transaction error blames its attempt', async () => {
  const { s, connection } = await connected();
  s.send({ id: 60, op: 'transaction', connection });
  const attempt = await s.next();
  s.send({ re: attempt.id, error: { kind: 'callback_failed', message: 'ValueError: boom' } });
  const reply = await s.next();
  assert.equal(reply.re, 60);
  assert.equal(reply.error.attempt, attempt.attempt);
  assert.equal(reply.error.kind, 'internal');
  s.end();
});

test('a limit error keeps its details, and a non-contract error is internal', async () => {
  const { s, connection } = await connected();
  s.send({ id: 70, op: 'transaction', connection });
  const attempt = await s.next();
  s.send({ id: 71, op: 'get', attempt: attempt.attempt, keys: ['61', '62'] });
  assert.deepEqual((await s.next()).error, {
    kind: 'limit',
    message: 'max_point_reads exceeded: 2 > 1',
    limit: 'max_point_reads',
    maximum: 1,
    actual: 2,
  });
  s.send({ id: 72, op: 'query_candidates', attempt: attempt.attempt, command: {}, mode: 'advisory' });
  assert.deepEqual((await s.next()).error, { kind: 'internal', message: 'TypeError: scan exploded' });
  s.send({ re: attempt.id, ok: null });
  await s.next();
  s.end();
});

test('an unknown operation and an unknown attempt are usage errors', async () => {
  const { s } = await connected();
  assert.equal((await s.ask('teleport'))[1].error.kind, 'usage');
  assert.equal((await s.ask('now', { attempt: 'a-nope' }))[1].error.kind, 'usage');
  s.end();
});

test('a driver without append or query is told unsupported, not crashed', async () => {
  const { s, connection } = await connected();
  const [, reply] = await s.ask('query', { connection, command: {} });
  assert.equal(reply.error.kind, 'unsupported');
  s.end();
});

test('an injected clock is read from the toolkit through a clock request', async () => {
  const { s, connection } = await connected({ clock: true });
  s.send({ id: 80, op: 'transaction', connection });
  const attempt = await s.next();
  s.send({ id: 81, op: 'now', attempt: attempt.attempt });
  const clock = await s.next();
  assert.deepEqual({ op: clock.op, connection: clock.connection }, { op: 'clock', connection });
  s.send({ re: clock.id, ok: '2040-02-02T00:00:00.000001Z' });
  assert.deepEqual(await s.next(), { re: 81, ok: '2040-02-02T00:00:00.000001Z' });
  s.send({ re: attempt.id, ok: null });
  await s.next();
  s.end();
});

test('closing a store closes its drivers and the store, and forgets its attempts', async () => {
  const { s, store, connection } = await connected();
  s.send({ id: 90, op: 'transaction', connection });
  const attempt = await s.next();
  s.send({ re: attempt.id, ok: null });
  await s.next();
  assert.deepEqual((await s.ask('close_store', { store }))[1].ok, null);
  assert.deepEqual(s.log, ['closed', 'store closed']);
  assert.equal((await s.ask('now', { attempt: attempt.attempt }))[1].error.kind, 'usage');
  assert.equal((await s.ask('connect', { store, clock: false }))[1].error.kind, 'usage');
  s.end();
  await s.done;
});

test('a backend without settle does not announce it, and a settle request is told unsupported', async () => {
  const s = session();
  const [, opened] = await s.ask('open');
  assert.equal(opened.ok.settle, undefined);
  const [, reply] = await s.ask('settle', { store: opened.ok.store, timeout: 1 });
  assert.equal(reply.error.kind, 'unsupported');
  assert.match(reply.error.message, /no settle hook/);
  s.end();
});

test('a backend with settle announces it on open and answers with what the hook resolved', async () => {
  const input = new PassThrough();
  const output = new PassThrough();
  const calls = [];
  const done = serve(
    {
      name: 'toy',
      version: '1.0.0',
      driver: 'toy',
      profile: new ToyDriver([]).profile,
      open: () => ({ name: 'store' }),
      connect: (store, { clock }) => new ToyDriver([], clock),
      settle: (store, { timeout }) => {
        calls.push([store.name, timeout]);
        return timeout > 0;
      },
    },
    { input, output },
  );
  const lines = [];
  let buffered = '';
  output.on('data', (chunk) => {
    buffered += chunk;
    const complete = buffered.split('\n');
    buffered = complete.pop();
    lines.push(...complete.map((line) => JSON.parse(line)));
  });
  const reply = async (message) => {
    input.write(`${JSON.stringify(message)}\n`);
    while (!lines.some((line) => line.re === message.id)) await new Promise((resolve) => setImmediate(resolve));
    return lines.find((line) => line.re === message.id);
  };
  const opened = await reply({ id: 1, op: 'open' });
  assert.equal(opened.ok.settle, true);
  assert.deepEqual(await reply({ id: 2, op: 'settle', store: opened.ok.store, timeout: 2.5 }), { re: 2, ok: true });
  assert.deepEqual(await reply({ id: 3, op: 'settle', store: opened.ok.store, timeout: 0 }), { re: 3, ok: false });
  assert.deepEqual(calls, [['store', 2.5], ['store', 0]]);
  input.end();
  await done;
});

test('StorageError refuses a kind the contract does not have', () => {
  assert.throws(() => new StorageError('oops', 'x'), TypeError);
});
