"""The JSON boundary at the driver: plain mappings handed to create/replace are parsed, never trusted.

Core may hand a driver a plain, mutable mapping instead of a built
``NewStorageRecord``. The driver must run it through the contract's parser:
numbers that are not finite, reference cycles, any envelope other than
``{"schemaVersion": 1, "value": {...}}``, and a key or index entries that do
not match the document are refused, and nothing of the attempt commits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue import Requirement
from runlane_conformance.catalogue.json_boundary import (
    CYCLES,
    MISMATCH,
    NON_FINITE,
    NUMBERS,
    SCHEMA_VERSION,
    VALID_MAPPING,
)
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.errors import StorageCorruptionError, StorageValidationError
from runlane_conformance.contract.json_boundary import parse_storage_document, thaw_json
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import NewStorageRecord, StorageIndexEntry
from runlane_conformance.fixtures.records import Leases, expiry, leases_for
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import missing, refused
from runlane_conformance.suites._mutations_support import create_all, read_one

REFUSED = (StorageValidationError, StorageCorruptionError)


def raw(record: NewStorageRecord) -> dict[str, Any]:
    """The plain, mutable mapping form of a record, as a caller might pass it."""
    return {
        "key": {"table": record.key.table.value, "id": list(record.key.id)},
        "document": record.document.to_json(),
        "indexes": [
            {"index": entry.index.value, "partition": entry.partition, "sort": entry.sort}
            for entry in record.indexes
        ],
    }


def message(environment: str, message_id: str, payload: object = None) -> NewStorageRecord:
    """A valid outbox message whose ``payload`` is free-form JSON (so any JSON value can sit there)."""
    return build_storage_record(
        StorageTableName.OUTBOX_MESSAGES,
        {
            "environment": environment,
            "runId": "run",
            "messageId": message_id,
            "topic": "topic",
            "payload": {"ok": True} if payload is None else payload,
            "attempts": "0",
            "createdAt": expiry(0),
            "availableAt": expiry(1),
            "deliveredAt": None,
        },
    )


def _expect_refused_create(
    driver: StorageDriver,
    leases: Leases,
    bad: dict[str, Any],
    absent_key: NewStorageRecord,
    *,
    what: str,
    rule: Requirement,
) -> None:
    """Creating ``bad`` (with a valid sibling write) is refused and neither write commits.

    ``what`` describes ``bad`` and ``rule`` is the requirement it breaks, for the message when the
    driver accepts it.
    """
    sibling = leases.unique("sibling")

    def create_both(tx: StorageTransaction) -> None:
        tx.create(sibling)
        tx.create(bad)  # type: ignore[arg-type]

    with refused(
        REFUSED, what=f"the check created {what} (beside a valid create in the same attempt)", rule=rule
    ):
        driver.transaction(create_both)
    assert read_one(driver, absent_key.key) is None, "the refused record was committed"
    assert read_one(driver, sibling.key) is None, "the attempt with a refused write committed another write"


def _expect_refused_replace(
    driver: StorageDriver,
    current_record: NewStorageRecord,
    bad: dict[str, Any],
    *,
    what: str,
    rule: Requirement,
) -> None:
    """Replacing the stored ``current_record`` with ``bad`` is refused and the record is unchanged.

    ``what`` describes ``bad`` and ``rule`` is the requirement it breaks, as for ``_expect_refused_create``.
    """
    create_all(driver, [current_record])
    before = read_one(driver, current_record.key)
    assert before is not None, missing("the current record", written="the check created it just before")

    def replace(tx: StorageTransaction) -> None:
        (current,) = tx.get([current_record.key])
        assert current is not None, missing(
            "the current record", written="the check created it before this attempt"
        )
        tx.replace(current, bad)  # type: ignore[arg-type]

    with refused(REFUSED, what=f"the check replaced a stored record with {what}", rule=rule):
        driver.transaction(replace)
    assert read_one(driver, current_record.key) == before, "a refused replacement changed the stored record"


# -- control: a good mapping goes through -----------------------------------------------------------


@VALID_MAPPING
def test_a_valid_mapping_create_commits(driver: StorageDriver, leases: Leases) -> None:
    built = message(leases.environment, "good", {"nested": [1, 2.5, {"deep": None}], "text": "é"})
    driver.transaction(lambda tx: tx.create(raw(built)))  # type: ignore[arg-type]
    stored = read_one(driver, built.key)
    assert stored is not None, "a well-formed mapping must be accepted"
    assert stored.document == built.document, (
        "a record created from a well-formed mapping must store the same document as the built record"
    )
    assert set(stored.indexes) == set(built.indexes), (
        "a record created from a well-formed mapping must store the same index entries as the built record"
    )


@VALID_MAPPING
def test_a_valid_mapping_replace_commits(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("lease", at=1)])
    replacement = leases.unique("lease", at=2)
    driver.transaction(
        lambda tx: tx.replace(tx.get([replacement.key])[0], raw(replacement))  # type: ignore[arg-type]
    )
    stored = read_one(driver, replacement.key)
    assert stored is not None and stored.document == replacement.document, (
        "a replacement given as a well-formed mapping must store the same document as the built replacement"
    )
    assert set(stored.indexes) == set(replacement.indexes), (
        "a replacement given as a well-formed mapping must store the same index entries as the built "
        "replacement"
    )


# -- non-finite numbers ------------------------------------------------------------------------------

NON_FINITE_VALUES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@NON_FINITE
@pytest.mark.parametrize("number", list(NON_FINITE_VALUES), ids=list(NON_FINITE_VALUES))
@pytest.mark.parametrize("where", ["top", "nested-object", "in-array"])
def test_non_finite_numbers_are_refused_on_create(
    driver: StorageDriver, leases: Leases, number: str, where: str
) -> None:
    built = message(leases.environment, "bad")
    bad = raw(built)
    value = NON_FINITE_VALUES[number]
    payload = (
        {"top": value} if where == "top" else {"a": {"b": value}} if where == "nested-object" else [1, value]
    )
    bad["document"]["value"]["payload"] = payload
    _expect_refused_create(
        driver,
        leases,
        bad,
        built,
        what=f"a mapping holding {number} ({where} of the payload)",
        rule=NON_FINITE,
    )


@NON_FINITE
@pytest.mark.parametrize("number", list(NON_FINITE_VALUES), ids=list(NON_FINITE_VALUES))
def test_non_finite_numbers_are_refused_on_replace(
    driver: StorageDriver, leases: Leases, number: str
) -> None:
    original = message(leases.environment, "target")
    bad = raw(original)
    bad["document"]["value"]["payload"] = {"n": NON_FINITE_VALUES[number]}
    _expect_refused_replace(driver, original, bad, what=f"a mapping holding {number}", rule=NON_FINITE)


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=5))


@NON_FINITE
@with_plain_hypothesis_errors("this property")
@given(
    payload=st.recursive(
        _json_leaf,
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
        ),
        max_leaves=10,
    ),
    number=st.sampled_from(sorted(NON_FINITE_VALUES)),
    depth=st.integers(min_value=0, max_value=4),
)
def test_a_non_finite_number_anywhere_is_refused(
    driver: StorageDriver, payload: object, number: str, depth: int
) -> None:
    leases = leases_for(driver, "env", 12)
    poisoned: object = NON_FINITE_VALUES[number]
    for level in range(depth):
        poisoned = [payload, poisoned] if level % 2 else {"ok": payload, "bad": poisoned}
    built = message(leases.environment, "bad")
    bad = raw(built)
    bad["document"]["value"]["payload"] = {"data": payload, "poisoned": poisoned}
    _expect_refused_create(
        driver,
        leases,
        bad,
        built,
        what=f"a mapping holding {number} nested {depth} level(s) deep",
        rule=NON_FINITE,
    )


# -- reference cycles ----------------------------------------------------------------------------------


def _cyclic(shape: str) -> object:
    if shape == "self-object":
        node: dict[str, Any] = {"name": "loop"}
        node["self"] = node
        return node
    if shape == "self-array":
        items: list[Any] = [1]
        items.append(items)
        return {"items": items}
    outer: dict[str, Any] = {"inner": {"list": []}}
    outer["inner"]["list"].append({"back": outer})
    return outer


@CYCLES
@pytest.mark.parametrize("shape", ["self-object", "self-array", "indirect"])
def test_reference_cycles_are_refused_on_create(driver: StorageDriver, leases: Leases, shape: str) -> None:
    built = message(leases.environment, "bad")
    bad = raw(built)
    bad["document"]["value"]["payload"] = _cyclic(shape)
    _expect_refused_create(
        driver, leases, bad, built, what=f"a mapping with a reference cycle ({shape})", rule=CYCLES
    )


@CYCLES
def test_reference_cycles_are_refused_on_replace(driver: StorageDriver, leases: Leases) -> None:
    original = message(leases.environment, "target")
    bad = raw(original)
    bad["document"]["value"]["payload"] = _cyclic("indirect")
    _expect_refused_replace(
        driver, original, bad, what="a mapping with an indirect reference cycle", rule=CYCLES
    )


@CYCLES
def test_shared_but_acyclic_values_are_not_cycles(driver: StorageDriver, leases: Leases) -> None:
    shared = {"same": [1, 2]}
    built = message(leases.environment, "diamond", {"left": shared, "right": shared})
    bad_looking = raw(built)
    bad_looking["document"]["value"]["payload"] = {"left": shared, "right": shared}
    try:
        driver.transaction(lambda tx: tx.create(bad_looking))  # type: ignore[arg-type]
    except StorageValidationError as error:
        raise AssertionError(
            f"a mapping holding one value at two places (no cycle) was refused: {error}. It is valid JSON "
            "and must be accepted; a driver that refuses every mapping breaks "
            "json_boundary.valid-mapping-accepted, which is then the cause"
        ) from None
    stored = read_one(driver, built.key)
    assert stored is not None and stored.document == built.document, (
        "a value reachable twice without a cycle is valid JSON and must be accepted"
    )


# -- schema version and envelope ----------------------------------------------------------------------

ENVELOPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "version-2": lambda doc: doc.__setitem__("schemaVersion", 2),
    "version-0": lambda doc: doc.__setitem__("schemaVersion", 0),
    "version-negative": lambda doc: doc.__setitem__("schemaVersion", -1),
    "version-string": lambda doc: doc.__setitem__("schemaVersion", "1"),
    "version-true": lambda doc: doc.__setitem__("schemaVersion", True),
    "version-null": lambda doc: doc.__setitem__("schemaVersion", None),
    "version-missing": lambda doc: doc.pop("schemaVersion"),
    "extra-member": lambda doc: doc.__setitem__("extra", 1),
    "value-missing": lambda doc: doc.pop("value"),
}


@SCHEMA_VERSION
@pytest.mark.parametrize("envelope", list(ENVELOPES))
def test_only_schema_version_one_is_accepted_on_create(
    driver: StorageDriver, leases: Leases, envelope: str
) -> None:
    built = leases.unique("versioned")
    bad = raw(built)
    ENVELOPES[envelope](bad["document"])
    _expect_refused_create(
        driver,
        leases,
        bad,
        built,
        what=f"a mapping whose document envelope is not version 1 ({envelope})",
        rule=SCHEMA_VERSION,
    )


@SCHEMA_VERSION
def test_schema_version_two_is_refused_on_replace(driver: StorageDriver, leases: Leases) -> None:
    original = leases.unique("versioned", at=1)
    bad = raw(leases.unique("versioned", at=2))
    bad["document"]["schemaVersion"] = 2
    _expect_refused_replace(
        driver, original, bad, what="a mapping whose document has schemaVersion 2", rule=SCHEMA_VERSION
    )


@SCHEMA_VERSION
def test_schema_version_two_is_refused_in_json_text(driver: StorageDriver, leases: Leases) -> None:
    built = leases.unique("text")
    bad = raw(built)
    bad["document"] = built.document.text.replace('"schemaVersion":1', '"schemaVersion":2')
    _expect_refused_create(
        driver,
        leases,
        bad,
        built,
        what="a mapping whose document is JSON text with schemaVersion 2",
        rule=SCHEMA_VERSION,
    )


# -- key / document / index agreement ----------------------------------------------------------------


def _mismatches(leases: Leases) -> dict[str, tuple[dict[str, Any], NewStorageRecord]]:
    """Each bad mapping with the (valid) record whose key must stay absent."""
    held = leases.unique("held", at=10)
    cases: dict[str, tuple[dict[str, Any], NewStorageRecord]] = {}

    wrong_key = raw(held)
    wrong_key["key"]["id"] = [leases.environment, "someone-else"]
    cases["key-names-another-record"] = (wrong_key, leases.record("someone-else"))

    wrong_table = raw(held)
    wrong_table["key"]["table"] = StorageTableName.RUNS.value
    cases["key-names-another-table"] = (wrong_table, held)

    missing_entry = raw(held)
    missing_entry["indexes"] = []
    cases["index-entry-missing"] = (missing_entry, held)

    wrong_sort = raw(held)
    wrong_sort["indexes"][0]["sort"] = leases.sort(11)
    cases["index-sort-differs"] = (wrong_sort, held)

    wrong_partition = raw(held)
    wrong_partition["indexes"][0]["partition"] = f"{leases.environment}-other"
    cases["index-partition-differs"] = (wrong_partition, held)

    released = leases.record("released", holder=None)
    extra_entry = raw(released)
    extra_entry["indexes"] = [
        {"index": entry.index.value, "partition": entry.partition, "sort": entry.sort}
        for entry in leases.unique("released").indexes
    ]
    cases["index-entry-not-derived"] = (extra_entry, released)

    foreign = raw(held)
    outbox_entry: StorageIndexEntry = message(leases.environment, "m").indexes[0]
    foreign["indexes"].append(
        {"index": outbox_entry.index.value, "partition": outbox_entry.partition, "sort": outbox_entry.sort}
    )
    cases["index-of-another-table"] = (foreign, held)

    bad_value = raw(held)
    bad_value["document"]["value"]["expiresAt"] = "tomorrow"
    cases["document-breaks-table-schema"] = (bad_value, held)
    return cases


MISMATCH_CASES = list(_mismatches(Leases()))


@MISMATCH
@pytest.mark.parametrize("case", MISMATCH_CASES)
def test_disagreeing_key_document_or_indexes_are_refused_on_create(
    driver: StorageDriver, leases: Leases, case: str
) -> None:
    bad, must_stay_absent = _mismatches(leases)[case]
    _expect_refused_create(
        driver,
        leases,
        bad,
        must_stay_absent,
        what=f"a mapping whose key, document and index entries disagree ({case})",
        rule=MISMATCH,
    )
    assert read_one(driver, leases.key("held")) is None, "the refused record was committed under its own key"


@MISMATCH
@pytest.mark.parametrize("case", ["index-entry-missing", "index-sort-differs", "index-of-another-table"])
def test_disagreeing_indexes_are_refused_on_replace(driver: StorageDriver, leases: Leases, case: str) -> None:
    bad, _ = _mismatches(leases)[case]
    _expect_refused_replace(
        driver,
        leases.unique("held", at=1),
        bad,
        what=f"a mapping whose index entries disagree with its document ({case})",
        rule=MISMATCH,
    )


# -- numbers, in every spelling the codecs accept --------------------------------------------------------


#: Numbers a lossy store changes: integers past 2**53 (doubles), past 2**63 (int64), integral floats
#: (written back as integers), -0.0 and the extremes of the double range.
NUMBER_VALUES: list[int | float] = [
    0,
    -1,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    2**64 + 7,
    10**30 + 1,
    0.1,
    -0.0,
    1.0,
    100.0,
    1e-7,
    5e-324,
    1.7976931348623157e308,
    123456.789,
]
#: JSON text spellings the parser accepts, each giving the value the codec makes of it.
NUMBER_SPELLINGS = ["1e2", "1E+2", "-0", "-0.0", "0.5E-3", "1.0", "12345678901234567890123", "-1e-400"]


def _same_json(left: object, right: object) -> bool:
    """Equal as JSON values with the same types, floats compared bit for bit (the sign of zero too)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float) and isinstance(right, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_json(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same_json(a, b) for a, b in zip(left, right, strict=True))
    return left == right


@NUMBERS
def test_numbers_read_back_exactly(driver: StorageDriver, leases: Leases) -> None:
    """Numbers given as values, and as JSON text in every spelling, come back as the codec parsed them."""
    by_value = message(leases.environment, "numbers", {"values": list(NUMBER_VALUES)})
    base = message(leases.environment, "spellings", {"n": 0})
    spelled = raw(base)
    spelled["document"] = base.document.text.replace(
        '"payload":{"n":0}', '"payload":{"n":[' + ",".join(NUMBER_SPELLINGS) + "]}"
    )
    assert spelled["document"] != base.document.text, "the check could not spell its numbers (a check fault)"
    create_all(driver, [by_value])

    def create_spelled(tx: StorageTransaction) -> None:
        tx.create(spelled)  # type: ignore[arg-type]

    driver.transaction(create_spelled)
    cases = [(by_value.key, by_value.document), (base.key, parse_storage_document(spelled["document"]))]
    for key, document in cases:
        stored = read_one(driver, key)
        assert stored is not None, missing(f"outbox message {key.id[-1]}")
        expected = thaw_json(document.value["payload"])
        got = thaw_json(stored.document.value["payload"])
        assert _same_json(got, expected) and stored.document.text == document.text, (
            f"outbox message {key.id[-1]} was written as {document.text} and read back as "
            f"{stored.document.text}: {NUMBERS.id}: {NUMBERS.summary}"
        )
