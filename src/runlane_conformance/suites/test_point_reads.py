"""Point reads: ``get`` answers every requested position, and what it returns is the caller's own.

A driver must return one result per requested key, in the same order,
duplicates included, with ``None`` for every absent key; and nothing a caller
does with a returned record, or with the input it wrote from, may change what
is stored.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.requirements import RequirementLevel, requirement

CLAUSE = "Treat each transaction callback as a new attempt; Verification checklist"

POSITIONS = requirement(
    "point_reads.exact-positions",
    RequirementLevel.MUST,
    CLAUSE,
    "get() returns exactly one result per requested key, in request order, duplicates and misses included.",
)
ABSENT_IS_NONE = requirement(
    "point_reads.absent-keys-read-as-none",
    RequirementLevel.MUST,
    CLAUSE,
    "A key that was never written, or was deleted, reads as None, not as an error or a stale record.",
)
RETURNED_CONTENT = requirement(
    "point_reads.returns-committed-content",
    RequirementLevel.MUST,
    CLAUSE,
    "A read returns the committed key, document and index entries exactly as written, with a version.",
)
COPIES_OUT = requirement(
    "point_reads.defensive-copies-out",
    RequirementLevel.MUST,
    "Keep logical records in core (JSON boundaries); Verification checklist: defensive copies",
    "Changing anything reachable from a returned record never changes what is stored.",
)
COPIES_IN = requirement(
    "point_reads.defensive-copies-in",
    RequirementLevel.MUST,
    "Keep logical records in core (JSON boundaries); Verification checklist: defensive copies",
    "Changing the caller's input after a write never changes what is stored.",
)


def _write(driver: StorageDriver, *records: object) -> None:
    def create(tx: StorageTransaction) -> None:
        for record in records:
            tx.create(record)  # type: ignore[arg-type]

    driver.transaction(create)


def _read(driver: StorageDriver, keys: list[object]) -> list[StoredRecord | None]:
    return driver.transaction(lambda tx: tx.get(keys))  # type: ignore[arg-type]


@POSITIONS
def test_get_returns_one_result_per_position_in_order(driver: StorageDriver, leases: Leases) -> None:
    _write(driver, leases.unique("a"), leases.unique("b"))
    a, b, missing = leases.key("a"), leases.key("b"), leases.key("missing")
    results = _read(driver, [b, missing, a, b, a])
    assert len(results) == 5, "get() must return exactly one result per requested key"
    expected = [b, None, a, b, a]
    for position, (result, key) in enumerate(zip(results, expected, strict=True)):
        if key is None:
            assert result is None, f"position {position} asked for an absent key and must be None"
        else:
            assert result is not None and result.key == key, (
                f"position {position} must hold the record for {key}, got {result!r}"
            )


@POSITIONS
@given(
    order=st.lists(st.sampled_from(["a", "b", "c", "gone", "never"]), min_size=1, max_size=12),
)
def test_get_positions_hold_for_any_request_order(
    driver: StorageDriver, leases: Leases, order: list[str]
) -> None:
    # The store is shared by all examples of this test: write once, then only read.
    if not driver.transaction(lambda tx: tx.get([leases.key("a")]))[0]:
        _write(driver, leases.unique("a"), leases.unique("b"), leases.unique("c"))
    results = _read(driver, [leases.key(name) for name in order])
    assert len(results) == len(order)
    for name, result in zip(order, results, strict=True):
        if name in ("gone", "never"):
            assert result is None, f"{name!r} was never written and must read as None"
        else:
            assert result is not None and result.key == leases.key(name)


@ABSENT_IS_NONE
def test_never_written_and_deleted_keys_read_as_none(driver: StorageDriver, leases: Leases) -> None:
    _write(driver, leases.unique("doomed"))
    (current,) = _read(driver, [leases.key("doomed")])
    assert current is not None
    driver.transaction(lambda tx: tx.delete(tx.get([leases.key("doomed")])[0]))  # type: ignore[arg-type]
    _write(driver, leases.unique("kept"))
    results = _read(driver, [leases.key("kept"), leases.key("doomed"), leases.key("never")])
    assert results[0] is not None and results[0].key == leases.key("kept")
    assert results[1:] == [None, None], "deleted and never-written keys read as None beside a present key"


@ABSENT_IS_NONE
def test_empty_request_returns_empty_list(driver: StorageDriver) -> None:
    assert _read(driver, []) == []


@RETURNED_CONTENT
def test_read_returns_exactly_what_was_committed(driver: StorageDriver, leases: Leases) -> None:
    written = leases.unique("exact", at=42)
    _write(driver, written)
    (stored,) = _read(driver, [written.key])
    assert stored is not None
    assert stored.key == written.key
    assert stored.document == written.document, "the document must round-trip exactly"
    assert stored.document.to_json() == written.document.to_json()
    assert set(stored.indexes) == set(written.indexes), "index entries must round-trip exactly"
    assert stored.version.value.isdigit() and int(stored.version.value) > 0


def _mutable_parts(value: object) -> list[object]:
    """Every mutable container reachable from ``value`` (through attributes, mappings and sequences)."""
    found: list[object] = []
    seen: set[int] = set()

    def walk(item: object) -> None:
        if id(item) in seen or isinstance(item, (str, bytes, int, float, bool, type(None))):
            return
        seen.add(id(item))
        if isinstance(item, (dict, list, bytearray, set)):
            found.append(item)
        if isinstance(item, dict):
            for inner in item.values():
                walk(inner)
        elif isinstance(item, (list, tuple, set, frozenset)):
            for inner in item:
                walk(inner)
        elif hasattr(item, "__dict__") or hasattr(item, "__slots__"):
            names = list(getattr(item, "__dict__", {}))
            for cls in type(item).__mro__:
                names.extend(getattr(cls, "__slots__", ()))
            for name in names:
                if hasattr(item, name):
                    walk(getattr(item, name))
            if hasattr(item, "items") and callable(item.items):
                for _, inner in item.items():
                    walk(inner)

    walk(value)
    return found


def _vandalise(container: object) -> None:
    if isinstance(container, dict):
        container["vandalised"] = True
        for key in list(container):
            if key != "vandalised":
                container[key] = "vandalised"
    elif isinstance(container, list):
        container.append("vandalised")
        if container:
            container[0] = "vandalised"
    elif isinstance(container, bytearray):
        container.extend(b"!")
    elif isinstance(container, set):
        container.add("vandalised")


@COPIES_OUT
def test_mutating_a_returned_record_changes_nothing_stored(driver: StorageDriver, leases: Leases) -> None:
    written = leases.unique("guarded", at=7)
    _write(driver, written)
    (first,) = _read(driver, [written.key])
    assert first is not None
    for container in _mutable_parts(first):
        _vandalise(container)
    for container in _mutable_parts(first.document.to_json()):
        _vandalise(container)
    (again,) = _read(driver, [written.key])
    assert again is not None
    assert again.document == written.document, "a returned record shares mutable state with the store"
    assert again.document.to_json() == written.document.to_json()
    assert set(again.indexes) == set(written.indexes)


@COPIES_IN
def test_mutating_the_written_input_changes_nothing_stored(driver: StorageDriver, leases: Leases) -> None:
    written = leases.unique("input", at=3)
    raw = {
        "key": {"table": "leases", "id": list(written.key.id)},
        "document": written.document.to_json(),
        "indexes": [
            {"index": entry.index.value, "partition": entry.partition, "sort": entry.sort}
            for entry in written.indexes
        ],
    }
    driver.transaction(lambda tx: tx.create(raw))  # type: ignore[arg-type]
    raw["document"]["value"]["holder"] = "changed-after-write"  # type: ignore[index]
    raw["indexes"].clear()  # type: ignore[attr-defined]
    raw["key"]["id"][1] = "elsewhere"  # type: ignore[index]
    (stored,) = _read(driver, [written.key])
    assert stored is not None, "the record must be stored under the key given at write time"
    assert stored.document == written.document, "the driver kept a reference to the caller's input"
    assert set(stored.indexes) == set(written.indexes)
