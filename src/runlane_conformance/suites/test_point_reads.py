"""Point reads: ``get`` answers every requested position, and what it returns is the caller's own.

A driver must return one result per requested key, in the same order,
duplicates included, with ``None`` for every absent key; and nothing a caller
does with a returned record, or with the input it wrote from, may change what
is stored.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue.point_reads import (
    ABSENT_IS_NONE,
    COPIES_IN,
    COPIES_OUT,
    INPUT_READ_AT_CALL,
    KEY_SHAPES,
    POSITIONS,
    RETURNED_CONTENT,
)
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.cursors import parse_query_records_result
from runlane_conformance.contract.errors import StorageError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageQueryRange,
    StorageRangeBound,
    StoredRecord,
)
from runlane_conformance.fixtures.limit_gates import positions, reads
from runlane_conformance.fixtures.records import Leases, expiry
from runlane_conformance.suites._cursors_support import catalog_records, write_records
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import missing


def _write(driver: StorageDriver, *records: object) -> None:
    def create(tx: StorageTransaction) -> None:
        for record in records:
            tx.create(record)  # type: ignore[arg-type]

    driver.transaction(create)


def _read(driver: StorageDriver, keys: list[object]) -> list[StoredRecord | None]:
    return driver.transaction(lambda tx: tx.get(keys))  # type: ignore[arg-type]


#: One get() of a request mixing order, a repeat and a miss: as long as the driver lets one call read, and
#: never shorter than three positions (against the stored order, then a repeat).
REQUEST = positions(5, least=3)
#: A drawn request: as many positions as one get() may read, as many distinct keys as one attempt holds.
EVERY_READ = positions(12)
DISTINCT_KEYS = reads(5)


@POSITIONS
@REQUEST.mark
def test_get_returns_one_result_per_position_in_order(driver: StorageDriver, leases: Leases) -> None:
    _write(driver, leases.unique("a"), leases.unique("b"))
    a, b, missing = leases.key("a"), leases.key("b"), leases.key("missing")
    length = REQUEST.of(driver)
    request: list[object] = [b, a, b, missing, a]
    results = _read(driver, request[:length])
    assert len(results) == length, "get() must return exactly one result per requested key"
    expected = [b, a, b, None, a][:length]
    for position, (result, key) in enumerate(zip(results, expected, strict=True)):
        if key is None:
            assert result is None, f"position {position} asked for an absent key and must be None"
        else:
            assert result is not None and result.key == key, (
                f"position {position} must hold the record for {key}, got {result!r}"
            )


@POSITIONS
@with_plain_hypothesis_errors("this property")
@given(
    order=st.lists(st.sampled_from(["a", "b", "c", "gone", "never"]), min_size=1, max_size=12),
)
def test_get_positions_hold_for_any_request_order(
    driver: StorageDriver, leases: Leases, order: list[str]
) -> None:
    # One get() may ask for no more keys than max_point_reads, and every distinct key it reads is one of
    # the attempt's max_transaction_records (more is a limit error, another rule).
    order = order[: EVERY_READ.of(driver)]
    distinct = DISTINCT_KEYS.of(driver)
    order = order[: next((i for i in range(len(order)) if len(set(order[: i + 1])) > distinct), len(order))]
    # The store is shared by all examples of this test: write once, then only read.
    if not driver.transaction(lambda tx: tx.get([leases.key("a")]))[0]:
        _write(driver, leases.unique("a"), leases.unique("b"), leases.unique("c"))
    results = _read(driver, [leases.key(name) for name in order])
    assert len(results) == len(order), (
        f"get() of {len(order)} keys must return {len(order)} results, "
        "one per position (point_reads.exact-positions)"
    )
    for name, result in zip(order, results, strict=True):
        if name in ("gone", "never"):
            assert result is None, f"{name!r} was never written and must read as None"
        else:
            assert result is not None and result.key == leases.key(name), (
                f"position of {name!r} must "
                "hold the record written under that key (results follow the requested order)"
            )


@ABSENT_IS_NONE
def test_never_written_and_deleted_keys_read_as_none(driver: StorageDriver, leases: Leases) -> None:
    _write(driver, leases.unique("doomed"))
    (current,) = _read(driver, [leases.key("doomed")])
    assert current is not None, missing("the record doomed", written="the check created it just before")
    driver.transaction(lambda tx: tx.delete(tx.get([leases.key("doomed")])[0]))  # type: ignore[arg-type]
    _write(driver, leases.unique("kept"))
    results = _read(driver, [leases.key("kept"), leases.key("doomed"), leases.key("never")])
    assert results[0] is not None and results[0].key == leases.key("kept"), (
        "the first position, kept, must hold the record written under that key, whatever else is absent"
    )
    assert results[1:] == [None, None], "deleted and never-written keys read as None beside a present key"


@ABSENT_IS_NONE
def test_empty_request_returns_empty_list(driver: StorageDriver) -> None:
    assert _read(driver, []) == [], "get() of no keys must return an empty list"


@RETURNED_CONTENT
def test_read_returns_exactly_what_was_committed(driver: StorageDriver, leases: Leases) -> None:
    written = leases.unique("exact", at=42)
    _write(driver, written)
    (stored,) = _read(driver, [written.key])
    assert stored is not None, missing(
        ("the record just written"), written="the check committed it just before this read"
    )
    assert stored.key == written.key, "the record read back must carry the key it was written under"
    assert stored.document == written.document, "the document must round-trip exactly"
    assert stored.document.to_json() == written.document.to_json(), (
        "the document's JSON text must round-trip exactly (the same members, values and types)"
    )
    assert set(stored.indexes) == set(written.indexes), "index entries must round-trip exactly"
    assert stored.version.value.isdigit() and int(stored.version.value) > 0, (
        f"a stored record's version must be a positive decimal number, got {stored.version.value!r}"
    )


#: Strings a lossy store changes: combining sequences (Unicode normalisation), the code points either side
#: of the surrogate block, the highest code point, astral characters (a 3-byte 'utf8' column).
EXACT_TEXTS = [
    "e\u0301",
    "\u00e9",
    "\u212b",
    "\ufb01",
    "\ud7ff",
    "\ue000",
    "\uffff",
    "\U00010000",
    "\U0001f600",
    "\U0010ffff",
    " padded ",
]
#: Instants to the microsecond, which a millisecond timestamp column or a JavaScript Date would round.
EXACT_INSTANTS = ["2031-03-04T05:06:07.123456Z", "2031-03-04T05:06:07.999999Z", "2031-03-04T05:06:08.000001Z"]


@RETURNED_CONTENT
def test_every_character_and_microsecond_reads_back_exactly(driver: StorageDriver) -> None:
    """Strings keep every code point as written (no normalisation, no replacement) and instants keep
    their microseconds, both in free JSON and in the document's own timestamp fields."""
    environment = f"exact-{uuid.uuid4().hex[:12]}"
    created, updated, extra = EXACT_INSTANTS
    value = {
        "environment": environment,
        "runId": "exact",
        "workflow": "exact-\U0010ffff-e\u0301",
        "status": "running",
        "input": {
            "texts": list(EXACT_TEXTS),
            "instants": list(EXACT_INSTANTS),
            "e\u0301": "key",
            "at": extra,
        },
        "output": None,
        "error": None,
        "parentRunId": None,
        "waitingForRunId": None,
        "createdAt": created,
        "updatedAt": updated,
        "completedAt": None,
        "tombstonedAt": None,
        "counts": {"events": "0", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"},
    }
    written = build_storage_record(StorageTableName.RUNS, value)
    _write(driver, written)
    (stored,) = _read(driver, [written.key])
    assert stored is not None, missing("the run just written", written="the check committed it just before")
    assert stored.document == written.document and stored.document.to_json() == written.document.to_json(), (
        f"the document was written as {written.document.text!a} and read back as {stored.document.text!a}: "
        "every code point (combining sequences unnormalised, U+D7FF, U+E000, U+FFFF, astral characters up "
        "to U+10FFFF) and every microsecond of an instant must come back exactly"
    )
    assert set(stored.indexes) == set(written.indexes), (
        "the index entries (sorted by instants to the microsecond) must round-trip exactly"
    )


_ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _moved_to(value: object, year: str) -> object:
    """``value`` with every timestamp string moved to ``year`` (same month, day and time)."""
    if isinstance(value, str) and _ISO_TIME.match(value):
        return year + value[4:]
    if isinstance(value, Mapping):
        return {key: _moved_to(inner, year) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_moved_to(inner, year) for inner in value]
    return value


def _records_dated(year: str) -> list[NewStorageRecord]:
    """A valid record of every table whose timestamps all lie in ``year``.

    Tables whose identities are derived from a time (a schedule occurrence, say) refuse a moved
    document; they keep their golden dates, which is fine: the point is the times, not the table.
    """
    records = []
    for record in catalog_records():
        try:
            moved = build_storage_record(
                record.key.table, _moved_to(record.document.to_json()["value"], year)
            )
        except StorageError:
            moved = record
        records.append(moved)
    return records


@RETURNED_CONTENT
@pytest.mark.parametrize("year", ["2001", "2999"], ids=["long-past", "far-future"])
def test_records_of_every_table_keep_whatever_times_they_carry(driver: StorageDriver, year: str) -> None:
    """A stored record is data, never a timer: a lease that expired, a tombstone past its prune time or a
    message long due stays exactly as written (and indexed) until core deletes it. A store that gives
    such records a time to live (for example at their expiry) loses them behind core's back."""
    records = _records_dated(year)
    write_records(driver, records, batch=max(1, min(20, driver.profile.limits.max_transaction_records)))
    limits = driver.profile.limits
    # Each key read is one of the attempt's records as well as one of its point reads.
    chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records, 50))
    for start in range(0, len(records), chunk):
        part = records[start : start + chunk]
        found = _read(driver, [record.key for record in part])
        for written, stored in zip(part, found, strict=True):
            assert stored is not None, missing(
                f"the {written.key.table} record {written.key}",
                written=f"the check created it with every time in {year}; a record must never expire",
            )
            assert stored.document == written.document and set(stored.indexes) == set(written.indexes), (
                f"the {written.key.table} record {written.key}, dated {year}, did not read back exactly as "
                "written"
            )
    page = max(1, min(driver.profile.limits.max_query_results, 50))
    for written in records:
        for entry in written.indexes:
            bound = StorageRangeBound(entry.sort, True)
            command = QueryRecordsCommand(entry.index, entry.partition, page, StorageQueryRange(bound, bound))
            keys = _keys_in(driver, command, pages=len(records))
            assert written.key in keys, (
                f"the {entry.index} entry of the {written.key.table} record {written.key}, dated {year}, is "
                "missing from the index: an index must keep an entry as long as its record exists"
            )


def _keys_in(driver: StorageDriver, command: QueryRecordsCommand, *, pages: int) -> list[object]:
    """The record keys of every page of ``command`` (outside a transaction), at most ``pages`` pages."""
    keys: list[object] = []
    current = command
    for _ in range(pages):
        result = parse_query_records_result(current, driver.query(current))
        keys.extend(item.key for item in result.items)
        if result.cursor is None:
            break
        current = command.with_cursor(result.cursor)
    return keys


def _public_names(item: object) -> list[str]:
    """The attribute names a caller can see on ``item``: its public fields, never an underscore name.

    A check may change only what a caller can change. An object's private slots are its own business:
    a frozen value whose state nothing public can reach may be shared between reads (a driver that
    caches parsed records and hands out the same immutable value twice is correct).
    """
    names = [name for name in getattr(item, "__dict__", {}) if not name.startswith("_")]
    for cls in type(item).__mro__:
        slots = getattr(cls, "__slots__", ())
        declared = (slots,) if isinstance(slots, str) else slots
        names.extend(name for name in declared if not name.startswith("_"))
    fields = getattr(type(item), "__dataclass_fields__", {})
    names.extend(name for name in fields if not name.startswith("_"))
    return list(dict.fromkeys(names))


def _mutable_parts(value: object) -> list[object]:
    """Every mutable container a caller can reach from ``value`` through its public surface.

    That is: public attributes and dataclass fields, the values of a mapping (``items()``), the members
    of a sequence or set, and what public no-argument accessors return (``to_json()``). Private
    attributes are never walked: a caller cannot change them, so neither may the check.
    """
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
            return
        if isinstance(item, (list, tuple, set, frozenset)):
            for inner in item:
                walk(inner)
            return
        for name in _public_names(item):
            inner = getattr(item, name, None)
            if not callable(inner):
                walk(inner)
        if isinstance(item, Mapping):
            for _, inner in item.items():
                walk(inner)
        to_json = getattr(item, "to_json", None)
        if callable(to_json):
            walk(to_json())

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
    assert first is not None, missing(
        ("the record just written"), written="the check committed it just before this read"
    )
    # Only what a caller can reach: the record's public fields, the JSON its document hands out, and
    # everything nested in those (a frozen value with nothing public to change may be shared).
    for container in _mutable_parts(first):
        _vandalise(container)
    (again,) = _read(driver, [written.key])
    assert again is not None, missing(
        ("the record just written"), written="the check committed it and only changed a copy it was handed"
    )
    assert again.document == written.document, "a returned record shares mutable state with the store"
    assert again.document.to_json() == written.document.to_json(), (
        "changing a returned record changed what the store returns next (its document JSON differs)"
    )
    assert set(again.indexes) == set(written.indexes), (
        "changing a returned record changed the index entries the store returns next"
    )


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
    assert set(stored.indexes) == set(written.indexes), (
        "the driver kept a reference to the caller's "
        "input: changing the caller's index entries after the commit changed the stored ones"
    )


def _as_mapping(record: NewStorageRecord) -> dict[str, Any]:
    """The plain, mutable mapping form of a record, as a caller might build and then reuse it."""
    return {
        "key": {"table": record.key.table.value, "id": list(record.key.id)},
        "document": record.document.to_json(),
        "indexes": [
            {"index": entry.index.value, "partition": entry.partition, "sort": entry.sort}
            for entry in record.indexes
        ],
    }


def _refill(mapping: dict[str, Any], record: NewStorageRecord) -> None:
    """Turn ``mapping`` into ``record`` in place, reusing every nested container it already has."""
    fresh = _as_mapping(record)
    mapping["key"]["id"][:] = fresh["key"]["id"]
    mapping["key"]["table"] = fresh["key"]["table"]
    mapping["document"]["value"].clear()
    mapping["document"]["value"].update(fresh["document"]["value"])
    mapping["indexes"][:] = fresh["indexes"]


def _nested_message(environment: str, message_id: str, marker: str) -> NewStorageRecord:
    """An outbox message whose free-form payload nests objects and arrays (so nested input can change)."""
    return build_storage_record(
        StorageTableName.OUTBOX_MESSAGES,
        {
            "environment": environment,
            "runId": "run",
            "messageId": message_id,
            "topic": "topic",
            "payload": {"marker": marker, "deep": {"list": [1, {"x": marker}], "text": "é"}},
            "attempts": "0",
            "createdAt": expiry(0),
            "availableAt": expiry(1),
            "deliveredAt": None,
        },
    )


def _expect_stored(driver: StorageDriver, *records: NewStorageRecord) -> None:
    stored = _read(driver, [record.key for record in records])
    for record, found in zip(records, stored, strict=True):
        assert found is not None, (
            f"{record.key} was not stored: the input was read after the call, when it named another key"
        )
        assert found.document == record.document, (
            f"{record.key} holds {found.document.text}, not what the input said when create()/replace() "
            f"was called ({record.document.text}): the driver read the caller's mapping late"
        )
        assert set(found.indexes) == set(record.indexes), (
            f"{record.key} has the index entries of a later input"
        )


def _commit(driver: StorageDriver, callback: Callable[[StorageTransaction], None]) -> None:
    """Run ``callback``; a storage error here means the driver judged the input as it was later on."""
    try:
        driver.transaction(callback)
    except StorageError as error:
        raise AssertionError(
            f"a valid write was refused with {type(error).__name__}: {error}; each input was valid when "
            "create()/replace() was called, so the driver read it after the call, once it had changed"
        ) from error


@INPUT_READ_AT_CALL
def test_one_mapping_reused_for_two_creates_stores_two_records(driver: StorageDriver, leases: Leases) -> None:
    first, second = leases.unique("first", at=1), leases.unique("second", at=2)

    def create_twice(tx: StorageTransaction) -> None:
        mapping = _as_mapping(first)
        tx.create(mapping)  # type: ignore[arg-type]
        _refill(mapping, second)
        tx.create(mapping)  # type: ignore[arg-type]

    _commit(driver, create_twice)
    _expect_stored(driver, first, second)


@INPUT_READ_AT_CALL
@pytest.mark.parametrize("part", ["document", "nested-value", "indexes", "key"])
def test_changing_a_created_mapping_before_commit_changes_nothing(
    driver: StorageDriver, leases: Leases, part: str
) -> None:
    written = _nested_message(leases.environment, "m1", "original")

    def create_then_change(tx: StorageTransaction) -> None:
        mapping = _as_mapping(written)
        tx.create(mapping)  # type: ignore[arg-type]
        value = mapping["document"]["value"]
        if part == "document":
            value["topic"] = "changed-before-commit"
        elif part == "nested-value":
            value["payload"]["deep"]["list"][1]["x"] = "changed-before-commit"
            value["payload"]["deep"]["list"].append("extra")
        elif part == "indexes":
            mapping["indexes"].clear()
        else:
            mapping["key"]["id"][-1] = "elsewhere"

    _commit(driver, create_then_change)
    _expect_stored(driver, written)


@INPUT_READ_AT_CALL
@pytest.mark.parametrize("part", ["document", "nested-value", "indexes"])
def test_changing_a_replacement_mapping_before_commit_changes_nothing(
    driver: StorageDriver, leases: Leases, part: str
) -> None:
    original = _nested_message(leases.environment, "m2", "v1")
    replacement = _nested_message(leases.environment, "m2", "v2")
    _write(driver, original)

    def replace_then_change(tx: StorageTransaction) -> None:
        (current,) = tx.get([original.key])
        assert current is not None, missing(
            ("the original record"), written="the check created it before this attempt"
        )
        mapping = _as_mapping(replacement)
        tx.replace(current, mapping)  # type: ignore[arg-type]
        value = mapping["document"]["value"]
        if part == "document":
            value["topic"] = "changed-before-commit"
        elif part == "nested-value":
            value["payload"]["deep"]["list"][1]["x"] = "changed-before-commit"
        else:
            mapping["indexes"].clear()

    _commit(driver, replace_then_change)
    _expect_stored(driver, replacement)


@INPUT_READ_AT_CALL
def test_one_mapping_reused_for_a_replace_and_a_create_stores_both(
    driver: StorageDriver, leases: Leases
) -> None:
    _write(driver, leases.unique("kept", at=1))
    replacement, created = leases.unique("kept", at=5), leases.unique("new", at=6)

    def replace_then_create(tx: StorageTransaction) -> None:
        (current,) = tx.get([replacement.key])
        assert current is not None, missing(
            ("the replacement's key"), written="the check created it before this attempt"
        )
        mapping = _as_mapping(replacement)
        tx.replace(current, mapping)  # type: ignore[arg-type]
        _refill(mapping, created)
        tx.create(mapping)  # type: ignore[arg-type]

    _commit(driver, replace_then_create)
    _expect_stored(driver, replacement, created)


# -- keys of every shape ---------------------------------------------------------------------------------


#: (environment or None for the check's own, lease name). Neighbours collide under a cheap key encoding:
#: raw components joined by '/', a case- or accent-insensitive or space-padding collation, Unicode
#: normalisation, C strings (NUL), or a 3-byte 'utf8' column that cannot hold astral characters.
KEY_SHAPE_CASES: list[tuple[str | None, str]] = [
    (None, "a/b"),
    ("{env}/a", "b"),
    (None, "Name"),
    (None, "name"),
    (None, "\u00e9"),
    (None, "e\u0301"),
    (None, "e"),
    (None, "pad"),
    (None, "pad "),
    (None, "nul"),
    (None, "nul\x00"),
    (None, "x"),
    (None, "x\U0001f600"),
    (None, "\U0010ffff"),
    (None, "\U0010ffff\U0010ffff"),
    (None, "\ue000"),
    (None, "\uffff"),
    ("{env}\U0010ffff", "astral-environment"),
    ("{env}\U0010ffff/", "astral-environment"),
]


def _shaped_lease(environment: str, name: str, holder: str) -> NewStorageRecord:
    """A lease under exactly ``environment`` and ``name``."""
    return build_storage_record(
        StorageTableName.LEASES,
        {"environment": environment, "name": name, "holder": holder, "expiresAt": expiry(0)},
    )


@KEY_SHAPES
def test_keys_that_cheap_encodings_confuse_stay_distinct(driver: StorageDriver, leases: Leases) -> None:
    records = [
        _shaped_lease(
            leases.environment if environment is None else environment.format(env=leases.environment),
            name,
            f"shape-{number}",
        )
        for number, (environment, name) in enumerate(KEY_SHAPE_CASES)
    ]
    for record in records:
        try:
            _write(driver, record)
        except StorageError as error:
            raise AssertionError(
                f"creating lease {record.key.id!r} failed with {error!r}, although no record has that key "
                f"(the keys written before it differ from it): {KEY_SHAPES.id}: {KEY_SHAPES.summary}"
            ) from error
    limits = driver.profile.limits
    budget = max(1, min(limits.max_point_reads, limits.max_transaction_records))
    got: list[StoredRecord | None] = []
    for start in range(0, len(records), budget):
        got.extend(_read(driver, [record.key for record in records[start : start + budget]]))
    for record, stored in zip(records, got, strict=True):
        assert stored is not None, missing(f"lease {record.key.id!r}")
        assert stored.key == record.key and stored.document == record.document, (
            f"reading key {record.key.id!r} returned the record {stored.key.id!r} with document "
            f"{stored.document.text}; each of these keys is its own record ({KEY_SHAPES.id}). Encode keys "
            "with storage_record_key_codec (hex UTF-8 per component) rather than comparing raw strings "
            "under a collation"
        )


#: (written, asked): the asked key's record was never written, only its neighbour under a cheap encoding.
NEIGHBOUR_MISSES: list[tuple[tuple[str | None, str], tuple[str | None, str]]] = [
    ((None, "a/b"), ("{env}/a", "b")),
    (("{env}/a", "b"), (None, "a/b")),
    ((None, "Name"), (None, "name")),
    ((None, "\u00e9"), (None, "e\u0301")),
    ((None, "pad"), (None, "pad ")),
    ((None, "x"), (None, "x\U0001f600")),
]


def _neighbour_lease(environment: str, shape: tuple[str | None, str], holder: str) -> NewStorageRecord:
    env, name = shape
    return _shaped_lease(environment if env is None else env.format(env=environment), name, holder)


@KEY_SHAPES
def test_a_key_whose_neighbour_alone_exists_reads_as_absent(driver: StorageDriver, leases: Leases) -> None:
    """A miss is a miss: a driver that falls back to another split, case or normalisation of the key finds
    a record that is not the one asked for."""
    for number, (written_shape, asked_shape) in enumerate(NEIGHBOUR_MISSES):
        environment = f"{leases.environment}-n{number}"

        written = _neighbour_lease(environment, written_shape, "written")
        asked = _neighbour_lease(environment, asked_shape, "asked")
        _write(driver, written)
        found = _read(driver, [asked.key, written.key])
        assert found[1] is not None, missing(f"lease {written.key.id!r}")
        assert found[0] is None, (
            f"reading key {asked.key.id!r}, which was never written, returned the record "
            f"{found[0].key.id!r}; "
            f"only {written.key.id!r} exists ({KEY_SHAPES.id}: {KEY_SHAPES.summary})"
        )


#: (one, other): two spellings of a key component that a collation (case, PAD SPACE), a normalising layer
#: (NFC), a 3-byte 'utf8' column or a raw '/' join would take for one key, while the contract's encoding
#: keeps them apart.
TABLE_KEY_NEIGHBOURS: list[tuple[str, str]] = [
    ("Name", "name"),
    ("pad", "pad "),
    ("\u00e9", "e\u0301"),
    ("x", "x\U0001f600"),
    ("a", "a/b"),
]


def _swapped(value: Any, swaps: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return swaps.get(value, value)
    if isinstance(value, dict):
        return {key: _swapped(child, swaps) for key, child in value.items()}
    if isinstance(value, list):
        return [_swapped(child, swaps) for child in value]
    return value


def _identities_again(table: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with the identities the contract derives from other fields computed again."""
    from runlane_conformance.contract.table_definitions import schedule_occurrence_id, step_token

    if table == StorageTableName.STEPS.value:
        value["token"] = step_token(
            value["environment"], value["runId"], value["stepName"], int(value["sequence"])
        )
    elif table == StorageTableName.SCHEDULES.value:
        for at, identity in (
            ("nextOccurrenceAt", "nextOccurrenceId"),
            ("lastOccurrenceAt", "lastOccurrenceId"),
        ):
            if isinstance(value.get(at), str):
                value[identity] = schedule_occurrence_id(value["environment"], value["scheduleId"], value[at])
    return value


def _own_name(record: NewStorageRecord) -> str | None:
    """The most specific key component the record's document spells out (a name of its own, else its run)."""
    value = record.document.value
    fields = {child for child in value.values() if isinstance(child, str)}
    for component in reversed(record.key.id[1:]):
        if component in fields and component != value.get("environment"):
            return component
    return None


def _respelled(record: NewStorageRecord, environment: str, name: str) -> NewStorageRecord | None:
    """``record`` moved to ``environment`` with its own name spelled ``name``; None when that is no valid
    record of its table (a derived identity the check cannot respell)."""
    from runlane_conformance.contract.json_boundary import thaw_json

    own = _own_name(record)
    old_environment = record.document.value.get("environment")
    if own is None or not isinstance(old_environment, str):
        return None
    value = _swapped(thaw_json(record.document.value), {old_environment: environment, own: name})
    try:
        return build_storage_record(record.key.table, _identities_again(record.key.table.value, value))
    except (StorageError, ValueError, KeyError, TypeError):
        return None


@KEY_SHAPES
def test_key_components_a_collation_would_merge_stay_apart_in_every_table(
    driver: StorageDriver, leases: Leases
) -> None:
    """The lease checks above, crossed with every table of the catalogue: a driver keeps one column type or
    collation per table, so a table other than leases may be the one whose keys fold together."""
    from runlane_conformance.suites._cursors_support import catalog_records

    bases: dict[str, NewStorageRecord] = {}
    for record in catalog_records():
        if _own_name(record) is not None:
            bases.setdefault(record.key.table.value, record)
    crossed = 0
    for table, base in sorted(bases.items()):
        for number, (one, other) in enumerate(TABLE_KEY_NEIGHBOURS):
            environment = f"{leases.environment}-{table[:6]}{number}"
            first, second = _respelled(base, environment, one), _respelled(base, environment, other)
            if first is None or second is None or first.key == second.key:
                continue
            crossed += 1
            _write(driver, first)
            found = _read(driver, [second.key, first.key])
            assert found[1] is not None, missing(f"{table} record {first.key.id!r}")
            assert found[0] is None, (
                f"reading {table} key {second.key.id!r}, which was never written, returned the record "
                f"{found[0].key.id!r}; only {first.key.id!r} exists ({KEY_SHAPES.id}: {KEY_SHAPES.summary})"
            )
            try:
                _write(driver, second)
            except StorageError as error:
                raise AssertionError(
                    f"creating {table} record {second.key.id!r} failed with {error!r}, although only "
                    f"{first.key.id!r} exists: {KEY_SHAPES.id}: {KEY_SHAPES.summary}"
                ) from error
            both = _read(driver, [first.key, second.key])
            for written, stored in zip((first, second), both, strict=True):
                assert stored is not None, missing(f"{table} record {written.key.id!r}")
                assert stored.key == written.key and stored.document == written.document, (
                    f"reading {table} key {written.key.id!r} returned the record {stored.key.id!r}; "
                    f"{first.key.id!r} and {second.key.id!r} are two records ({KEY_SHAPES.id}). Encode "
                    "keys with storage_record_key_codec in every table"
                )
    assert crossed >= len(TABLE_KEY_NEIGHBOURS), (
        "the check respelled too few tables' keys (a fault in the check)"
    )
