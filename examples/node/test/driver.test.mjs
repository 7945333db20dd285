// The driver's own rules, checked directly (the conformance suites check them through the backend).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryDriver, MemoryStore } from '../driver.mjs';
import { encodeTuple } from '../../../js/conformance-backend/src/index.mjs';

const key = (name) => encodeTuple(['leases', 'env', name]);
const record = (name, holder) => ({
  key: key(name),
  document: JSON.stringify({ schemaVersion: 1, value: { name, holder } }),
  indexes: [{ index: 'LeasesByExpiry', partition: 'env', sort: encodeTuple([holder, name]) }],
});
const rejects = (promise, kind) => assert.rejects(promise, (error) => error.kind === kind);

test('a committed create is read back with a version, and versions are never reused', async () => {
  const driver = new MemoryDriver(new MemoryStore());
  await driver.transaction((tx) => tx.create(record('k', 'a')));
  const [first] = await driver.transaction((tx) => tx.get([key('k')]));
  await driver.transaction(async (tx) => tx.delete((await tx.get([key('k')]))[0]));
  await driver.transaction((tx) => tx.create(record('k', 'b')));
  const [second] = await driver.transaction((tx) => tx.get([key('k')]));
  assert.equal(first.document, record('k', 'a').document);
  assert.notEqual(second.version, first.version);
});

test('a lost update is replayed, not overwritten', async () => {
  const store = new MemoryStore();
  const [one, two] = [new MemoryDriver(store), new MemoryDriver(store)];
  await one.transaction((tx) => tx.create(record('k', 'a')));
  let attempts = 0;
  await one.transaction(async (tx) => {
    attempts += 1;
    const [current] = await tx.get([key('k')]);
    if (attempts === 1) {
      await two.transaction(async (other) => other.replace((await other.get([key('k')]))[0], record('k', 'other')));
    }
    await tx.replace(current, record('k', `mine-${attempts}`));
  });
  const [final] = await two.transaction((tx) => tx.get([key('k')]));
  assert.equal(attempts, 2);
  assert.equal(JSON.parse(final.document).value.holder, 'mine-2');
});

test('reads are refused after now(), and every call after the attempt ended', async () => {
  const driver = new MemoryDriver(new MemoryStore(), { clock: async () => '2031-03-04T05:06:07.123456Z' });
  let kept;
  await driver.transaction(async (tx) => {
    kept = tx;
    assert.equal(await tx.now(), '2031-03-04T05:06:07.123456Z');
    await rejects(tx.get([key('k')]), 'sealed');
  });
  await rejects(kept.get([key('k')]), 'attempt_ended');
});

test('limits are refused one unit past the advertised maximum', async () => {
  const driver = new MemoryDriver(new MemoryStore());
  const keys = Array.from({ length: 101 }, (_, i) => key(`k${i}`));
  await rejects(driver.transaction((tx) => tx.get(keys)), 'limit');
  await driver.transaction((tx) => tx.get(keys.slice(0, 100)));
});

test('an exclusive page skips rows another open attempt holds', async () => {
  const store = new MemoryStore();
  const [one, two] = [new MemoryDriver(store), new MemoryDriver(store)];
  await one.transaction(async (tx) => {
    for (const name of ['a', 'b']) await tx.create(record(name, 'h'));
  });
  const command = { index: 'LeasesByExpiry', partition: 'env', limit: 1, range: { lower: null, upper: null }, direction: 'asc', cursor: null };
  await one.transaction(async (tx) => {
    const mine = await tx.queryCandidates(command, 'exclusive');
    const theirs = await two.transaction((other) => other.queryCandidates(command, 'exclusive'));
    assert.notEqual(mine.items[0].key, theirs.items[0].key);
  });
});

test('an append allocates contiguous positions and moves the head', async () => {
  const driver = new MemoryDriver(new MemoryStore());
  const command = { stream: 'observations', partition: 'env', values: [{ a: 1 }, { a: 2 }] };
  await driver.transaction((tx) => tx.append(command));
  await driver.transaction((tx) => tx.append(command));
  const head = await driver.transaction((tx) => tx.get([encodeTuple(['stream_heads', 'observations', 'env'])]));
  assert.equal(JSON.parse(head[0].document).value.next, '5');
});
