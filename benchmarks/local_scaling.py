"""Does the reference driver's cost per transaction stay flat as the store grows?

For 1k, 10k, 100k and 1M stored lease records this prints the median wall
time of one *mixed transaction* -- two point reads, one index query of ten
candidates, one create and one replace that moves an index entry -- run
through the real ``driver.transaction(...)`` path of the local driver, and the
same work on SQLite ``:memory:`` with equivalent tables and indexes, all in
one run. Ratios: growth from the smallest store, and local vs SQLite.

Fairness notes:

* Write inputs (``NewStorageRecord`` values and their SQLite JSON text) are
  built before timing for both sides; building them runs JSON Schema checks
  that cost the same whatever the store size and would only blur the figure.
* Two SQLite figures. "sqlite raw" runs only the SQL (no JSON parsing, the
  version counter kept in Python): the engine's own cost, a lower bound no
  Python driver can reach. "sqlite drv" also produces what the contract makes
  any driver return -- ``StoredRecord`` values with parsed documents for the
  point reads, ``StorageIndexReference`` values and an encoded cursor for the
  full query page -- which is the fair comparison for the local driver.
* Stores are filled through bulk paths (``LocalStore.bulk_load`` and
  ``executemany``); only the measured transactions use the transaction path.
* ``gc.freeze()`` after loading keeps Python's cyclic collector from
  rescanning a million long-lived objects during the timed loop (it would
  do so for any in-process Python store, SQLite rows are not Python objects).

Run: ``python benchmarks/local_scaling.py [--transactions N] [--sizes 1000,10000,...]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import sqlite3
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from runlane_conformance.contract.catalog import StorageIndexName, StorageTableName
from runlane_conformance.contract.cursors import encode_storage_query_cursor
from runlane_conformance.contract.encodings import storage_record_key_codec
from runlane_conformance.contract.json_boundary import StorageDocument, parse_storage_document
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.tables import get_storage_table
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageIndexEntry,
    StorageIndexReference,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StorageRecordVersion,
    StoredRecord,
)
from runlane_conformance.local import create_local_storage_driver

INDEX = StorageIndexName.LEASES_BY_EXPIRY
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def iso(seconds: int) -> str:
    moment = BASE + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}Z"


def name(i: int) -> str:
    return f"n{i:08d}"


def trusted_lease(i: int, seconds: int) -> NewStorageRecord:
    """Bulk-load path: a lease built without re-running JSON Schema (shape checked on samples)."""
    expires = iso(seconds)
    document = StorageDocument({"environment": "env", "name": name(i), "holder": "w", "expiresAt": expires})
    record = object.__new__(NewStorageRecord)
    object.__setattr__(record, "key", StorageRecordKey(StorageTableName.LEASES, ("env", name(i))))
    object.__setattr__(record, "document", document)
    object.__setattr__(record, "indexes", (StorageIndexEntry.of(INDEX, "env", expires),))
    return record


def checked_lease(lease_name: str, seconds: int) -> NewStorageRecord:
    """A lease built through the ordinary validating path (used for transaction inputs)."""
    return build_storage_record(
        "leases", {"environment": "env", "name": lease_name, "holder": "w", "expiresAt": iso(seconds)}
    )


def build_population(size: int) -> list[NewStorageRecord]:
    rng = random.Random(7)
    records = [trusted_lease(i, rng.randrange(10 * size)) for i in range(size)]
    table = get_storage_table(StorageTableName.LEASES)
    for sample in records[:: max(1, size // 50)]:
        table.check_record(sample.key, sample.document, sample.indexes)
    return records


class Plan:
    """The inputs of one mixed transaction, prepared before timing."""

    def __init__(self, rng: random.Random, size: int, serial: int) -> None:
        first, second = rng.randrange(size), rng.randrange(size)
        self.keys = [
            StorageRecordKey(StorageTableName.LEASES, ("env", name(first))),
            StorageRecordKey(StorageTableName.LEASES, ("env", name(second))),
        ]
        self.encoded = [key.encoded for key in self.keys]
        start = iso(rng.randrange(10 * size))
        self.lower = StorageIndexEntry.of(INDEX, "env", start).sort
        self.query = QueryRecordsCommand(
            INDEX, "env", 10, StorageQueryRange(StorageRangeBound(self.lower, True))
        )
        self.create = checked_lease(f"x{serial:08d}", rng.randrange(10 * size))
        self.replacement = checked_lease(name(first), rng.randrange(10 * size))


def plans(size: int, count: int, seed: int) -> list[Plan]:
    rng = random.Random(seed)
    return [Plan(rng, size, serial) for serial in range(count)]


# -- local ----------------------------------------------------------------------------------------


def time_local(population: list[NewStorageRecord], work: list[Plan]) -> list[float]:
    driver = create_local_storage_driver()
    driver.store.bulk_load(population)
    gc.collect()
    gc.freeze()
    timings: list[float] = []
    for plan in work:

        def mixed(tx: StorageTransaction, plan: Plan = plan) -> int:
            first, _second = tx.get(plan.keys)
            page = tx.query_candidates(plan.query)
            tx.create(plan.create)
            assert first is not None
            tx.replace(first, plan.replacement)
            return len(page.items)

        started = time.perf_counter_ns()
        driver.transaction(mixed)
        timings.append((time.perf_counter_ns() - started) / 1000)
    gc.unfreeze()
    return timings


# -- sqlite ---------------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE records (key TEXT PRIMARY KEY, version INTEGER NOT NULL, document TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE index_entries (
    idx TEXT NOT NULL, part TEXT NOT NULL, sort TEXT NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (idx, part, sort, key)
) WITHOUT ROWID;
CREATE INDEX index_entries_by_key ON index_entries (key);
"""


def sqlite_rows(population: list[NewStorageRecord]) -> Iterator[tuple[str, int, str]]:
    for version, record in enumerate(population, 1):
        yield record.key.encoded, version, record.document.text


def sqlite_index_rows(population: list[NewStorageRecord]) -> Iterator[tuple[str, str, str, str]]:
    for record in population:
        for entry in record.indexes:
            yield entry.index.value, entry.partition, entry.sort, record.key.encoded


def _stored_row(key: StorageRecordKey, row: tuple[int, str]) -> StoredRecord:
    document = parse_storage_document(row[1])
    record = object.__new__(NewStorageRecord)
    object.__setattr__(record, "key", key)
    object.__setattr__(record, "document", document)
    object.__setattr__(record, "indexes", ())
    return StoredRecord.committed(record, StorageRecordVersion(str(row[0])))


def _references(command: QueryRecordsCommand, rows: list[tuple[str, str]]) -> QueryRecordsResult:
    items = []
    for sort, ekey in rows:
        table, ident = storage_record_key_codec.decode_parts(ekey)
        items.append(StorageIndexReference(StorageRecordKey(table, ident), sort))
    cursor = encode_storage_query_cursor(command, items[-1]) if len(items) == command.limit else None
    return QueryRecordsResult(tuple(items), cursor)


def time_sqlite(population: list[NewStorageRecord], work: list[Plan], *, as_driver: bool) -> list[float]:
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.executescript(SCHEMA)
    db.execute("BEGIN")
    db.executemany("INSERT INTO records VALUES (?, ?, ?)", sqlite_rows(population))
    db.executemany("INSERT INTO index_entries VALUES (?, ?, ?, ?)", sqlite_index_rows(population))
    db.execute("COMMIT")
    version = len(population)
    cur = db.cursor()
    timings: list[float] = []
    index = INDEX.value
    for plan in work:
        create, replacement = plan.create, plan.replacement
        create_key = create.key.encoded
        create_entries = [(e.index.value, e.partition, e.sort, create_key) for e in create.indexes]
        moved = [(e.index.value, e.partition, e.sort, plan.encoded[0]) for e in replacement.indexes]
        started = time.perf_counter_ns()
        cur.execute("BEGIN")
        first = cur.execute(
            "SELECT version, document FROM records WHERE key = ?", (plan.encoded[0],)
        ).fetchone()
        second = cur.execute(
            "SELECT version, document FROM records WHERE key = ?", (plan.encoded[1],)
        ).fetchone()
        rows = cur.execute(
            "SELECT sort, key FROM index_entries WHERE idx = ? AND part = ? AND sort >= ? "
            "ORDER BY sort, key LIMIT 10",
            (index, "env", plan.lower),
        ).fetchall()
        if as_driver:
            _stored_row(plan.keys[0], first)
            _stored_row(plan.keys[1], second)
            _references(plan.query, rows)
        version += 1
        cur.execute("INSERT INTO records VALUES (?, ?, ?)", (create_key, version, create.document.text))
        cur.executemany("INSERT INTO index_entries VALUES (?, ?, ?, ?)", create_entries)
        version += 1
        updated = cur.execute(
            "UPDATE records SET version = ?, document = ? WHERE key = ? AND version = ?",
            (version, replacement.document.text, plan.encoded[0], first[0]),
        ).rowcount
        assert updated == 1
        cur.execute("DELETE FROM index_entries WHERE key = ?", (plan.encoded[0],))
        cur.executemany("INSERT INTO index_entries VALUES (?, ?, ?, ?)", moved)
        cur.execute("COMMIT")
        timings.append((time.perf_counter_ns() - started) / 1000)
    db.close()
    return timings


# -- report ---------------------------------------------------------------------------------------


def measure(size: int, population: list[NewStorageRecord], transactions: int) -> tuple[float, float, float]:
    local = time_local(population[:size], plans(size, transactions, seed=size))
    raw = time_sqlite(population[:size], plans(size, transactions, seed=size), as_driver=False)
    driver = time_sqlite(population[:size], plans(size, transactions, seed=size), as_driver=True)
    return statistics.median(local), statistics.median(raw), statistics.median(driver)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=3000)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    args = parser.parse_args(argv)
    sizes = [int(part) for part in args.sizes.split(",")]
    started = time.perf_counter()
    population = build_population(max(sizes))
    print(f"built {max(sizes):,} records in {time.perf_counter() - started:.1f}s")
    rows: list[tuple[int, float, float, float]] = []
    for size in sizes:
        rows.append((size, *measure(size, population, args.transactions)))
    base = rows[0]
    header = (
        f"{'stored records':>15} | {'local µs':>9} | {'sqlite raw µs':>13} | {'sqlite drv µs':>13} | "
        f"{'local growth':>12} | {'raw growth':>10} | {'drv growth':>10} | "
        f"{'local/raw':>9} | {'local/drv':>9}"
    )
    print(f"median mixed transaction, {args.transactions} transactions per size and engine")
    print(header)
    print("-" * len(header))
    for size, local, raw, driver in rows:
        print(
            f"{size:>15,} | {local:>9.1f} | {raw:>13.1f} | {driver:>13.1f} | "
            f"{local / base[1]:>11.2f}x | {raw / base[2]:>9.2f}x | {driver / base[3]:>9.2f}x | "
            f"{local / raw:>8.2f}x | {local / driver:>8.2f}x"
        )


if __name__ == "__main__":
    main()
