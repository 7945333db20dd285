"""Query cursors: a continuation is valid only for the exact scope that issued it."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runlane_conformance import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageCorruptionError,
    StorageCursorError,
    StorageCursorPosition,
    StorageIndexName,
    StorageIndexReference,
    StorageQueryDirection,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StorageTableName,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    parse_query_records_result,
    storage_tuple_codec,
)
from runlane_conformance.contract import cursors as cursors_module

from .vectors import load_vectors

CURSORS = load_vectors("cursors")
ASC = StorageQueryDirection.ASCENDING
DESC = StorageQueryDirection.DESCENDING


def sort(*components: str) -> str:
    return storage_tuple_codec.encode(components)


def lease(name: str, environment: str = "env-a") -> StorageRecordKey:
    return StorageRecordKey(StorageTableName.LEASES, (environment, name))


def ref(name: str, *components: str) -> StorageIndexReference:
    return StorageIndexReference(lease(name), sort(*components))


BASE = QueryRecordsCommand(
    index=StorageIndexName.LEASES_BY_EXPIRY,
    partition="env-a",
    limit=3,
    range=StorageQueryRange(StorageRangeBound(sort("b"), True), StorageRangeBound(sort("y"), False)),
    direction=ASC,
)
LAST = ref("lease-1", "m")


def command_from_vector(source: dict[str, Any]) -> QueryRecordsCommand:
    def bound(raw: dict[str, Any] | None) -> StorageRangeBound | None:
        return None if raw is None else StorageRangeBound(raw["value"], raw["inclusive"])

    return QueryRecordsCommand(
        index=StorageIndexName(source["index"]),
        partition=source["partition"],
        limit=source["limit"],
        range=StorageQueryRange(bound(source["range"]["lower"]), bound(source["range"]["upper"])),
        direction=StorageQueryDirection(source["direction"]),
    )


def forge(payload: object) -> str:
    """A cursor with a *correct* checksum over an arbitrary body, as a careful forger would build it."""
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    token = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
    return f"rlc1.{token}.{cursors_module._digest(body)}"


def cursor_body(cursor: str) -> dict[str, Any]:
    token = cursor[len("rlc1.") :].rsplit(".", 1)[0]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return decoded


# --- round trip and scope --------------------------------------------------------------------------------


def test_cursor_round_trips_to_the_last_sort_and_encoded_key() -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    assert decode_storage_query_cursor(BASE.with_cursor(cursor)) == StorageCursorPosition(
        LAST.sort, LAST.key.encoded
    )


def test_command_without_cursor_decodes_to_no_position() -> None:
    assert decode_storage_query_cursor(BASE) is None


def test_page_size_is_not_part_of_the_cursor_scope() -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    assert decode_storage_query_cursor(replace(BASE, limit=50, cursor=cursor)) is not None


SCOPE_CHANGES = {
    "index": replace(BASE, index=StorageIndexName.RUNS_BY_STATUS),
    "partition": replace(BASE, partition="env-b"),
    "lower-bound-value": replace(BASE, range=replace(BASE.range, lower=StorageRangeBound(sort("c"), True))),
    "lower-bound-inclusivity": replace(
        BASE, range=replace(BASE.range, lower=StorageRangeBound(sort("b"), False))
    ),
    "lower-bound-removed": replace(BASE, range=replace(BASE.range, lower=None)),
    "upper-bound-value": replace(BASE, range=replace(BASE.range, upper=StorageRangeBound(sort("z"), False))),
    "upper-bound-inclusivity": replace(
        BASE, range=replace(BASE.range, upper=StorageRangeBound(sort("y"), True))
    ),
    "upper-bound-removed": replace(BASE, range=replace(BASE.range, upper=None)),
    "direction": replace(BASE, direction=DESC),
}


@pytest.mark.parametrize("changed", SCOPE_CHANGES.values(), ids=SCOPE_CHANGES.keys())
def test_cursor_is_rejected_when_a_scope_component_differs(changed: QueryRecordsCommand) -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(changed.with_cursor(cursor))
    # ... and the reverse direction: issued under the changed scope, used under the original one.
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(BASE.with_cursor(encode_storage_query_cursor(changed, LAST)))


def test_cursor_is_rejected_under_another_schema_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cursors_module, "SCHEMA_VERSION", 2)
    issued_by_version_2 = encode_storage_query_cursor(BASE, LAST)
    monkeypatch.undo()
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(BASE.with_cursor(issued_by_version_2))


# --- garbled and tampered cursors --------------------------------------------------------------------------


def test_every_truncation_of_a_cursor_is_rejected() -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    for length in range(len(cursor)):
        with pytest.raises(StorageCursorError):
            decode_storage_query_cursor(BASE.with_cursor(cursor[:length]))


def test_a_bit_flipped_body_with_the_original_checksum_is_rejected() -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    token, digest = cursor[len("rlc1.") :].rsplit(".", 1)
    body = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    for position in range(len(body)):
        flipped = bytearray(body)
        flipped[position] ^= 0x01
        forged = "rlc1." + base64.urlsafe_b64encode(bytes(flipped)).decode().rstrip("=") + "." + digest
        with pytest.raises(StorageCursorError):
            decode_storage_query_cursor(BASE.with_cursor(forged))


def test_a_cursor_re_encoded_with_a_moved_position_but_the_old_checksum_is_rejected() -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    payload = cursor_body(cursor)
    payload["s"] = sort("x")
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    forged = "rlc1." + base64.urlsafe_b64encode(body).decode().rstrip("=") + "." + cursor.rsplit(".", 1)[1]
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(BASE.with_cursor(forged))


@settings(max_examples=300, deadline=None, print_blob=True)
@given(st.data())
def test_changing_any_character_never_silently_moves_the_scan(data: st.DataObject) -> None:
    cursor = encode_storage_query_cursor(BASE, LAST)
    position = data.draw(st.integers(0, len(cursor) - 1))
    replacement = data.draw(st.characters(codec="ascii").filter(lambda c: c != cursor[position]))
    tampered = cursor[:position] + replacement + cursor[position + 1 :]
    try:
        decoded = decode_storage_query_cursor(BASE.with_cursor(tampered))
    except StorageCursorError:
        return
    # Only a change base64 ignores (unused low bits of the last character) may decode,
    # and then to the very same place.
    assert decoded == StorageCursorPosition(LAST.sort, LAST.key.encoded)


@pytest.mark.parametrize(
    "payload",
    [
        [1, 2],
        "cursor",
        {"v": 1, "i": "LeasesByExpiry", "p": "env-a", "d": "asc"},
        {**{"v": 1, "i": "LeasesByExpiry", "p": "env-a", "d": "asc"}, "s": 5, "k": "6c"},
    ],
    ids=["array", "string", "scope-only", "non-string-position"],
)
def test_a_correctly_checksummed_cursor_without_a_valid_body_is_rejected(payload: object) -> None:
    if isinstance(payload, dict):
        payload = {**payload, "r": cursor_body(encode_storage_query_cursor(BASE, LAST))["r"]}
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(BASE.with_cursor(forge(payload)))


@pytest.mark.parametrize(
    ("field", "value"),
    [("s", "6G"), ("s", "zz"), ("k", "6c65617365"), ("k", "not-hex")],
    ids=["uppercase-sort", "garbage-sort", "key-without-id", "garbage-key"],
)
def test_a_correctly_checksummed_cursor_with_a_non_canonical_position_is_rejected(
    field: str, value: str
) -> None:
    payload = cursor_body(encode_storage_query_cursor(BASE, LAST))
    payload[field] = value
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(BASE.with_cursor(forge(payload)))


def test_forged_cursor_helper_builds_cursors_the_decoder_accepts() -> None:
    # Guards the two tests above: their cursors fail for the reason they name, not for a bad checksum.
    payload = cursor_body(encode_storage_query_cursor(BASE, LAST))
    assert decode_storage_query_cursor(BASE.with_cursor(forge(payload))) is not None


@settings(max_examples=300)
@given(
    partition=st.text(),
    lower=st.none() | st.tuples(st.text(), st.booleans()),
    upper=st.none() | st.tuples(st.text(), st.booleans()),
    last_sort=st.text(),
    name=st.text(min_size=1),
    direction=st.sampled_from(list(StorageQueryDirection)),
)
def test_cursor_body_is_exactly_the_key_sorted_compact_json_of_its_scope_and_position(
    partition: str,
    lower: tuple[str, bool] | None,
    upper: tuple[str, bool] | None,
    last_sort: str,
    name: str,
    direction: StorageQueryDirection,
) -> None:
    # The encoder writes its JSON by hand for speed; the pinned format is json.dumps' output.
    command = QueryRecordsCommand(
        index=StorageIndexName.LEASES_BY_EXPIRY,
        partition=partition,
        limit=1,
        range=StorageQueryRange(
            None if lower is None else StorageRangeBound(*lower),
            None if upper is None else StorageRangeBound(*upper),
        ),
        direction=direction,
    )
    last = StorageIndexReference(lease(name), last_sort)
    expected = {
        "d": direction.value,
        "i": command.index.value,
        "k": last.key.encoded,
        "p": partition,
        "r": [None if lower is None else list(lower), None if upper is None else list(upper)],
        "s": last_sort,
        "v": 1,
    }
    assert encode_storage_query_cursor(command, last) == forge(expected)


# --- golden vectors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CURSORS["cases"], ids=lambda case: case["name"])
def test_cursor_matches_golden_vector(case: dict[str, Any]) -> None:
    command = command_from_vector(case["command"])
    last = StorageIndexReference(
        StorageRecordKey(StorageTableName(case["last"]["key"]["table"]), tuple(case["last"]["key"]["id"])),
        case["last"]["sort"],
    )
    assert encode_storage_query_cursor(command, last) == case["cursor"]
    decoded = decode_storage_query_cursor(command.with_cursor(case["cursor"]))
    assert decoded == StorageCursorPosition(case["position"]["sort"], case["position"]["key"])


@pytest.mark.parametrize("vector", CURSORS["invalidCursors"], ids=lambda vector: vector["reason"])
def test_golden_invalid_cursor_is_rejected(vector: dict[str, str]) -> None:
    command = command_from_vector(CURSORS["cases"][0]["command"])
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(command.with_cursor(vector["cursor"]))


# --- parse_query_records_result -------------------------------------------------------------------------


def page(*items: StorageIndexReference, cursor: str | None = None) -> QueryRecordsResult:
    return QueryRecordsResult(items, cursor)


def test_a_well_formed_ascending_page_with_a_continuation_is_accepted() -> None:
    items = (ref("b", "c"), ref("a", "d"), ref("c", "d"))  # tie on "d" broken by encoded key
    result = page(*items, cursor=encode_storage_query_cursor(BASE, items[-1]))
    assert parse_query_records_result(BASE, result) is result


def test_a_well_formed_descending_page_after_a_cursor_is_accepted() -> None:
    command = replace(BASE, direction=DESC)
    command = command.with_cursor(encode_storage_query_cursor(command, ref("z", "x")))
    result = page(ref("a", "x"), ref("b", "w"))
    assert parse_query_records_result(command, result) is result


def test_a_short_final_page_needs_no_cursor() -> None:
    assert parse_query_records_result(BASE, page(ref("a", "c"))).cursor is None
    assert parse_query_records_result(BASE, page()).items == ()


CORRUPT_PAGES = {
    "too-many-items": page(ref("a", "c"), ref("b", "d"), ref("c", "e"), ref("d", "f")),
    "sort-below-the-lower-bound": page(ref("a", "a")),
    "sort-at-the-exclusive-upper-bound": page(ref("a", "y")),
    "sort-that-is-not-a-canonical-encoding": page(StorageIndexReference(lease("a"), "6G")),
    "sorts-out-of-order": page(ref("a", "d"), ref("b", "c")),
    "tie-not-broken-by-encoded-key": page(ref("b", "c"), ref("a", "c")),
    "duplicate-item": page(ref("a", "c"), ref("a", "c")),
    "same-record-twice-with-two-sorts": page(ref("a", "c"), ref("a", "d")),
    "cursor-on-an-empty-page": page(cursor=encode_storage_query_cursor(BASE, ref("a", "c"))),
    "cursor-not-at-the-last-item": page(
        ref("a", "c"), ref("b", "d"), cursor=encode_storage_query_cursor(BASE, ref("a", "c"))
    ),
    "cursor-from-another-scope": page(
        ref("a", "c"), cursor=encode_storage_query_cursor(replace(BASE, partition="env-b"), ref("a", "c"))
    ),
    "garbled-cursor": page(ref("a", "c"), cursor="rlc1.garbage"),
    "not-an-index-reference": QueryRecordsResult((("a", "c"),)),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("result", CORRUPT_PAGES.values(), ids=CORRUPT_PAGES.keys())
def test_a_malformed_page_is_reported_as_corruption(result: QueryRecordsResult) -> None:
    with pytest.raises(StorageCorruptionError):
        parse_query_records_result(BASE, result)


@pytest.mark.parametrize(
    "after",
    [ref("lease-1", "m"), ref("lease-0", "m"), ref("a", "c")],
    ids=["at", "equal-sort-lower-key", "before"],
)
def test_an_item_that_does_not_follow_the_cursor_is_corruption(after: StorageIndexReference) -> None:
    command = BASE.with_cursor(encode_storage_query_cursor(BASE, LAST))
    with pytest.raises(StorageCorruptionError):
        parse_query_records_result(command, page(after))


def test_an_item_after_the_cursor_is_accepted() -> None:
    command = BASE.with_cursor(encode_storage_query_cursor(BASE, LAST))
    assert parse_query_records_result(command, page(ref("lease-2", "m"), ref("a", "n"))).items


def test_a_result_of_the_wrong_type_is_corruption() -> None:
    with pytest.raises(StorageCorruptionError):
        parse_query_records_result(BASE, {"items": [], "cursor": None})


@pytest.mark.parametrize(
    ("field", "value"),
    [("v", True), ("v", 1.0), ("r", [[sort("b"), 1], [sort("y"), 0]])],
    ids=["schema-version-true", "schema-version-float", "inclusivity-as-numbers"],
)
def test_scope_values_that_only_look_equal_in_python_are_a_different_scope(field: str, value: object) -> None:
    payload = cursor_body(encode_storage_query_cursor(BASE, LAST))
    payload[field] = value
    with pytest.raises(StorageCursorError):
        decode_storage_query_cursor(BASE.with_cursor(forge(payload)))
