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


def unfindable_g_single(ring: int, noise: int) -> tuple[Attempt, ...]:
    """Our translation of Elle's ``unfindable-g-single`` history (list_append_test.clj), sized by the caller.

    ``ring`` attempts append to one list in order (a chain of ``ww`` edges); the first also creates
    ``anti`` and the last reads ``anti`` absent: one cycle with a single anti-dependency, ``ring``
    attempts long. Off every ring attempt but the ends hangs a chain of ``noise - 1`` attempts on a key
    of its own, whose last two close a cycle through two adjacent anti-dependencies back to the ring's
    first attempt (write skew, not read skew). Elle's search times out on the G-single at
    ``ring=1000, noise=30``; each list version is translated as a version of its key (the list read
    gives the order; an append supersedes the list before it).
    """

    def element(key: str, items: list[int]) -> Write:
        value = f"{key}:{items[-1]}"
        if len(items) == 1:
            return create(key, value)
        before = items[:-1]
        return replace(key, ",".join(map(str, before)), f"{key}:{before[-1]}", value)

    attempts: list[Attempt] = []
    for i in range(ring):
        ops: list[Operation] = [element("ring", list(range(i + 1)))]
        if i == 0:
            ops.append(create("anti", "anti:first"))
        elif i == ring - 1:
            ops.append(read("anti"))
        else:
            ops.append(element(f"k{i}", [0]))
        attempts.append(txn(f"ring{i}", *ops))
    attempts.append(txn("order", read("ring", ",".join(map(str, range(ring))), f"ring:{ring - 1}")))
    for i in range(1, ring - 1):
        for j in range(1, noise):
            name = f"noise{i}.{j}"
            if j == noise - 2:
                seen = list(range(noise - 2))
                ops = [read(f"k{i}", ",".join(map(str, seen)), f"k{i}:{seen[-1]}"), read(f"anti{i}")]
            elif j == noise - 1:
                ops = [create(f"anti{i}", f"anti{i}:0"), read("ring")]
            else:
                ops = [element(f"k{i}", list(range(j + 1)))]
            attempts.append(txn(name, *ops))
    return tuple(attempts)
