"""Does the reference driver's cost per transaction stay flat as the store grows?

For 1k, 10k, 100k and 1M stored lease records this prints the median wall
time of one *mixed transaction* -- two point reads, one index query of ten
candidates, one create and one replace that moves an index entry -- run
through the real ``driver.transaction(...)`` path of the local driver, and the
same work on SQLite ``:memory:`` with equivalent tables and indexes, all in
one run. Ratios: growth from the smallest store, and local vs SQLite; the
last lines say whether the reference driver's targets (growth <= 1.3x from
the smallest to the largest store, at least SQLite's throughput) were met,
with the middle half of the same ratio taken round by round: when the limit
falls inside that spread the verdict is marked as within the run's noise.

Fairness notes:

* Write inputs (``NewStorageRecord`` values with their keys already encoded,
  and SQLite's parameter rows) are built before timing for both sides;
  building them runs JSON Schema checks that cost the same whatever the
  store size and would only blur the figure. Neither side touches a plan
  before its timer starts, so both begin a transaction with cold inputs.
* Two SQLite figures. "sqlite raw" runs only the SQL (no JSON parsing, the
  version counter kept in Python): the engine's own cost, a lower bound no
  Python driver can reach. "sqlite drv" also produces what the contract makes
  any driver return -- ``StoredRecord`` values with parsed documents for the
  point reads, ``StorageIndexReference`` values and an encoded cursor for the
  full query page -- which is the fair comparison for the local driver.
* All stores of all sizes stay loaded for the whole run and are measured in
  interleaved rounds (``--batch`` transactions per engine and size, in a
  rotating order), so a slow spell of a shared machine is spread over every
  figure instead of landing on one size; without this, runs on the same
  machine disagreed by up to 2x.
* Stores are filled through bulk paths (``LocalStore.bulk_load`` and
  ``executemany``); only the measured transactions use the transaction path.
* ``gc.freeze()`` after loading keeps Python's cyclic collector from
  rescanning a million long-lived objects during the timed loop (it would
  do so for any in-process Python store, SQLite rows are not Python objects).

Memory pages: on a virtual machine a large heap spread over 4 KiB pages makes almost every
access of a big store miss the TLB as well as the cache, and a TLB miss under nested paging
costs several memory reads. ``--huge-pages`` re-runs the benchmark with the heap on
transparent huge pages (CPython's allocator switched to glibc malloc, which glibc >= 2.35
asks the kernel to back with 2 MiB pages); both engines share the process, so both get them.
The output says which kind of pages the run asked for and how much of the heap got huge ones.

Run: ``python benchmarks/local_scaling.py [--transactions N] [--batch N] [--sizes 1000,10000,...]
[--huge-pages]`` (the full run peaks at about 4.2 GB of memory and takes about 4 minutes, a
third of it building the million records).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

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
        # Prepared for both sides alike: the written keys' encodings (cached on the key, so no
        # engine pays for them inside its timed region) and SQLite's parameter rows.
        create_key = self.create.key.encoded
        assert self.replacement.key.encoded == self.encoded[0]
        self.sql_create = (create_key, self.create.document.text)
        self.sql_create_entries = [
            (entry.index.value, entry.partition, entry.sort, create_key) for entry in self.create.indexes
        ]
        self.sql_moved = [
            (entry.index.value, entry.partition, entry.sort, self.encoded[0])
            for entry in self.replacement.indexes
        ]
        self.sql_replacement = self.replacement.document.text


def plans(size: int, count: int, seed: int) -> list[Plan]:
    rng = random.Random(seed)
    return [Plan(rng, size, serial) for serial in range(count)]


# -- engines -------------------------------------------------------------------------------------
#
# Each engine holds one loaded store and runs one planned transaction at a time, returning its
# wall time in nanoseconds, so the report can interleave engines and sizes round by round.


class LocalEngine:
    name = "local"

    def __init__(self, population: list[NewStorageRecord]) -> None:
        self.driver = create_local_storage_driver()
        self.driver.store.bulk_load(population)

    def run(self, plan: Plan) -> int:
        def mixed(tx: StorageTransaction) -> int:
            first, _second = tx.get(plan.keys)
            page = tx.query_candidates(plan.query)
            tx.create(plan.create)
            assert first is not None
            tx.replace(first, plan.replacement)
            return len(page.items)

        started = time.perf_counter_ns()
        self.driver.transaction(mixed)
        return time.perf_counter_ns() - started


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


class SqliteEngine:
    """The mix as SQL; ``as_driver`` also builds the values a contract driver must return."""

    def __init__(self, population: list[NewStorageRecord], *, as_driver: bool) -> None:
        self.name = "sqlite drv" if as_driver else "sqlite raw"
        self.as_driver = as_driver
        self.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.db.executescript(SCHEMA)
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO records VALUES (?, ?, ?)", sqlite_rows(population))
        self.db.executemany("INSERT INTO index_entries VALUES (?, ?, ?, ?)", sqlite_index_rows(population))
        self.db.execute("COMMIT")
        self.version = len(population)
        self.cur = self.db.cursor()

    def run(self, plan: Plan) -> int:
        cur = self.cur
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
            (INDEX.value, "env", plan.lower),
        ).fetchall()
        if self.as_driver:
            _stored_row(plan.keys[0], first)
            _stored_row(plan.keys[1], second)
            _references(plan.query, rows)
        self.version += 1
        create_key, create_text = plan.sql_create
        cur.execute("INSERT INTO records VALUES (?, ?, ?)", (create_key, self.version, create_text))
        cur.executemany("INSERT INTO index_entries VALUES (?, ?, ?, ?)", plan.sql_create_entries)
        self.version += 1
        updated = cur.execute(
            "UPDATE records SET version = ?, document = ? WHERE key = ? AND version = ?",
            (self.version, plan.sql_replacement, plan.encoded[0], first[0]),
        ).rowcount
        assert updated == 1
        cur.execute("DELETE FROM index_entries WHERE key = ?", (plan.encoded[0],))
        cur.executemany("INSERT INTO index_entries VALUES (?, ?, ?, ?)", plan.sql_moved)
        cur.execute("COMMIT")
        return time.perf_counter_ns() - started


# -- report ---------------------------------------------------------------------------------------


Engine = LocalEngine | SqliteEngine
ENGINES = ("local", "sqlite raw", "sqlite drv")


def load(size: int, population: list[NewStorageRecord]) -> list[Engine]:
    part = population[:size]
    return [LocalEngine(part), SqliteEngine(part, as_driver=False), SqliteEngine(part, as_driver=True)]


class Measurement(NamedTuple):
    """Median µs per (size, engine) over the whole run, and per round (for the spread of ratios)."""

    medians: dict[tuple[int, str], float]
    rounds: dict[tuple[int, str], list[float]]

    def spread(self, top: tuple[int, str], bottom: tuple[int, str]) -> tuple[float, float]:
        """The middle half (first to third quartile) of the per-round ratios ``top / bottom``.

        Each round times every engine and size within a few seconds, so a
        ratio taken inside one round is spared most of the machine's slow
        spells; how far these ratios scatter says how much a verdict on the
        whole-run ratio can be trusted.
        """
        ratios = [a / b for a, b in zip(self.rounds[top], self.rounds[bottom], strict=True)]
        if len(ratios) < 2:
            return ratios[0], ratios[0]
        first, _median, third = statistics.quantiles(ratios, n=4)
        return first, third


def measure(
    sizes: list[int], population: list[NewStorageRecord], transactions: int, batch: int
) -> Measurement:
    """Median µs per (size, engine), measured in interleaved rounds.

    Every round runs ``batch`` transactions on every engine of every size, in
    an order that rotates from round to round; a slow spell of the machine
    therefore lands on all of them alike instead of on whichever size
    happened to run during it. All stores stay loaded for the whole run.
    """
    engines = {size: load(size, population) for size in sizes}
    work = {size: plans(size, transactions, seed=size) for size in sizes}
    slots = [(size, engine) for size in sizes for engine in engines[size]]
    timings: dict[tuple[int, str], list[int]] = {(size, engine.name): [] for size, engine in slots}
    rounds: dict[tuple[int, str], list[float]] = {slot: [] for slot in timings}
    gc.collect()
    gc.freeze()
    try:
        for start in range(0, transactions, batch):
            shift = (start // batch) % len(slots)
            for size, engine in slots[shift:] + slots[:shift]:
                recorded = [engine.run(plan) for plan in work[size][start : start + batch]]
                timings[(size, engine.name)].extend(recorded)
                rounds[(size, engine.name)].append(statistics.median(recorded) / 1000)
    finally:
        gc.unfreeze()
    return Measurement({slot: statistics.median(values) / 1000 for slot, values in timings.items()}, rounds)


# -- memory pages ---------------------------------------------------------------------------------

#: The environment that puts the whole heap (CPython's objects and SQLite's pages) on huge pages.
HUGE_PAGE_ENVIRONMENT = {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"


def huge_pages_unavailable() -> str | None:
    """Why this machine cannot run the benchmark on transparent huge pages, or None if it can."""
    try:
        with open(THP_SETTING) as setting:
            chosen = setting.read().split("[", 1)[1].split("]", 1)[0]
    except (OSError, IndexError):
        return f"transparent huge pages are not offered here ({THP_SETTING} is missing)"
    if chosen == "never":
        return f"transparent huge pages are switched off ({THP_SETTING} says never)"
    library, version = platform.libc_ver()
    parts = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if library != "glibc" or parts < (2, 35):
        found = f"{library or 'unknown'} {version}".strip()
        return f"the C library ({found}) has no glibc.malloc.hugetlb tunable (needs glibc >= 2.35)"
    return None


def on_huge_pages() -> bool:
    """Whether this process was started with the huge-page environment."""
    return all(os.environ.get(name) == value for name, value in HUGE_PAGE_ENVIRONMENT.items())


def run_on_huge_pages(argv: list[str]) -> None:
    """Replace this process with the same benchmark run on huge pages (unless it already is)."""
    if on_huge_pages():
        return
    reason = huge_pages_unavailable()
    if reason is not None:
        raise SystemExit(f"--huge-pages: {reason}")
    sys.stdout.flush()
    os.execve(
        sys.executable,
        [sys.executable, os.path.abspath(__file__), *argv],
        {**os.environ, **HUGE_PAGE_ENVIRONMENT},
    )


def describe_pages() -> str:
    """Which pages were asked for, and how much of the heap really sits on huge pages now."""
    asked = "huge pages requested" if on_huge_pages() else "default pages"
    try:
        with open("/proc/self/smaps_rollup") as rollup:
            fields = dict(line.split(":", 1) for line in rollup if ":" in line)
        resident = int(fields["Rss"].split()[0]) // 1024
        huge = int(fields["AnonHugePages"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        return f"memory pages: {asked}; how many are huge is unknown (cannot read /proc/self/smaps_rollup)"
    return f"memory pages: {asked}; {huge:,} MiB of {resident:,} MiB resident on huge pages"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=3000, help="per size and engine")
    parser.add_argument("--batch", type=int, default=100, help="transactions per engine per round")
    parser.add_argument("--sizes", default="1000,10000,100000,1000000", help="comma-separated store sizes")
    parser.add_argument(
        "--huge-pages",
        action="store_true",
        help="run with the heap on transparent huge pages (Linux, glibc >= 2.35)",
    )
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(arguments)
    if args.huge_pages:
        run_on_huge_pages(arguments)
    sizes = [int(part) for part in args.sizes.split(",")]
    started = time.perf_counter()
    population = build_population(max(sizes))
    print(f"built {max(sizes):,} records in {time.perf_counter() - started:.1f}s")
    measured = measure(sizes, population, args.transactions, args.batch)
    medians = measured.medians
    print(describe_pages())
    first = sizes[0]
    header = (
        f"{'stored records':>15} | {'local µs':>9} | {'sqlite raw µs':>13} | {'sqlite drv µs':>13} | "
        f"{'local growth':>12} | {'raw growth':>10} | {'drv growth':>10} | "
        f"{'local/raw':>9} | {'local/drv':>9}"
    )
    print(
        f"median mixed transaction, {args.transactions} transactions per size and engine, "
        f"interleaved in rounds of {args.batch}"
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        local, raw, drv = (medians[(size, engine)] for engine in ENGINES)
        base_local, base_raw, base_drv = (medians[(first, engine)] for engine in ENGINES)
        print(
            f"{size:>15,} | {local:>9.1f} | {raw:>13.1f} | {drv:>13.1f} | "
            f"{local / base_local:>11.2f}x | {raw / base_raw:>9.2f}x | {drv / base_drv:>9.2f}x | "
            f"{local / raw:>8.2f}x | {local / drv:>8.2f}x"
        )
    print()
    for line in verdicts(measured, sizes):
        print(line)


GROWTH_LIMIT = 1.3


def verdicts(measured: Measurement, sizes: list[int]) -> list[str]:
    """One line per target: the whole-run verdict, and whether the per-round spread agrees with it.

    A verdict whose limit falls inside the middle half of the per-round
    ratios is marked as within noise: another run may well say the opposite.
    """
    medians = measured.medians
    first, last = sizes[0], sizes[-1]
    growth = medians[(last, "local")] / medians[(first, "local")]
    low, high = measured.spread((last, "local"), (first, "local"))
    noise = _noise(low, high, GROWTH_LIMIT)
    lines = [
        f"target: local growth {first:,} -> {last:,} <= {GROWTH_LIMIT:.2f}x: {growth:.2f}x, "
        f"{_verdict(growth <= GROWTH_LIMIT)} (per round {low:.2f}-{high:.2f}x{noise})"
    ]
    for engine in ENGINES[1:]:
        slower = [size for size in sizes if medians[(size, "local")] > medians[(size, engine)]]
        where = "at every size" if not slower else "not at " + ", ".join(f"{size:,}" for size in slower)
        # The size where local comes closest to the limit decides how firm the verdict is.
        closest = min(sizes, key=lambda size: abs(medians[(size, "local")] / medians[(size, engine)] - 1))
        low, high = measured.spread((closest, "local"), (closest, engine))
        lines.append(
            f"target: local at least as fast as {engine}: {_verdict(not slower)} ({where}; closest at "
            f"{closest:,}: local/{engine.split()[1]} per round {low:.2f}-{high:.2f}x{_noise(low, high, 1.0)})"
        )
    return lines


def _noise(low: float, high: float, limit: float) -> str:
    return ", within this run's noise" if low <= limit <= high else ""


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
