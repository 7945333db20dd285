"""A small vocabulary for writing histories by hand in tests (and the benchmark)."""

from __future__ import annotations

from runlane_conformance.history import (
    Attempt,
    Bound,
    IndexEntry,
    Operation,
    Outcome,
    Read,
    Scan,
    ScanItem,
    Seen,
    Write,
    WriteKind,
)

INDEX = "LeasesByExpiry"
PARTITION = "east"


def txn(name: str, *ops: Operation, outcome: Outcome = Outcome.COMMITTED, client: int = 0) -> Attempt:
    return Attempt(name, name.split(".")[0], 0, client, client, tuple(ops), outcome)


def read(key: str, version: str | None = None, value: str | None = None) -> Read:
    return Read(key, None if version is None or value is None else Seen(version, value))


def entry(sort: str | None) -> IndexEntry | None:
    return None if sort is None else IndexEntry(INDEX, PARTITION, sort)


def create(key: str, value: str, sort: str | None = None) -> Write:
    return Write(key, WriteKind.CREATE, None, value, entry(sort))


def replace(key: str, version: str, old: str, value: str, sort: str | None = None) -> Write:
    return Write(key, WriteKind.REPLACE, Seen(version, old), value, entry(sort))


def delete(key: str, version: str, old: str) -> Write:
    return Write(key, WriteKind.DELETE, Seen(version, old), None)


def scan(
    *items: tuple[str, str, str],
    lower: str | None = None,
    upper: str | None = None,
    limit: int = 10,
    exact: bool = True,
    exclusive: bool = False,
    more: bool = False,
) -> Scan:
    """``items`` are (sort, key, value); bounds are inclusive lower, exclusive upper."""
    return Scan(
        INDEX,
        PARTITION,
        None if lower is None else Bound(lower, True),
        None if upper is None else Bound(upper, False),
        False,
        limit,
        exclusive,
        exact,
        tuple(ScanItem(sort, key, value) for sort, key, value in items),
        more,
    )
