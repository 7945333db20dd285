"""Canonical encodings: storage order must be contract order, and every value must round-trip exactly."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runlane_conformance import (
    U64_MAX,
    StorageQueryRange,
    StorageRecordKey,
    StorageTableName,
    StorageValidationError,
    compare_storage_encoded_values,
    encode_storage_tuple_prefix_upper_bound,
    iso_date_codec,
    storage_record_key_codec,
    storage_tuple_codec,
    storage_unsigned_integer_codec,
)

from .vectors import load_vectors

ENCODINGS = load_vectors("encodings")
PREFIX_BOUNDS = load_vectors("prefix_bounds")

PROPERTY = settings(
    max_examples=300, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)

# Characters chosen to sit on the edges that break naive encodings: the separator itself, the first hex
# digit, control characters, the last BMP code point, the first and last non-BMP code points, and the
# UTF-8 length boundaries (1, 2, 3 and 4 bytes).
EDGE_CHARACTERS = [
    "\x00",
    "\x01",
    "/",
    "0",
    "a",
    "\x7f",
    "\x80",
    "\u07ff",
    "\u0800",
    "\uffff",
    "\U00010000",
    "😀",
    "\U0010ffff",
]
components = st.one_of(
    st.text(max_size=6),
    st.text(alphabet=st.sampled_from(EDGE_CHARACTERS), max_size=4),
    st.text(alphabet=st.characters(min_codepoint=0x10000), max_size=3),
)
tuples = st.lists(components, min_size=1, max_size=4).map(tuple)
CANONICAL_TUPLE = re.compile(r"[0-9a-f]*(?:/[0-9a-f]*)*")


def utf8_order(components: tuple[str, ...]) -> tuple[bytes, ...]:
    """The contract's order: component by component, comparing UTF-8 bytes."""
    return tuple(component.encode("utf-8") for component in components)


def sign(value: int) -> int:
    return (value > 0) - (value < 0)


def cmp(left: object, right: object) -> int:
    return (left > right) - (left < right)  # type: ignore[operator]


# --- tuples -------------------------------------------------------------------------------------------


@PROPERTY
@given(tuples, tuples)
def test_string_order_of_tuple_encodings_equals_component_wise_utf8_byte_order(
    left: tuple[str, ...], right: tuple[str, ...]
) -> None:
    encoded_left, encoded_right = storage_tuple_codec.encode(left), storage_tuple_codec.encode(right)
    expected = cmp(utf8_order(left), utf8_order(right))
    assert cmp(encoded_left, encoded_right) == expected
    assert sign(compare_storage_encoded_values(encoded_left, encoded_right)) == expected


@PROPERTY
@given(tuples)
def test_tuple_encoding_round_trips_and_uses_lowercase_hex_only(components: tuple[str, ...]) -> None:
    encoded = storage_tuple_codec.encode(components)
    assert CANONICAL_TUPLE.fullmatch(encoded), encoded
    assert storage_tuple_codec.decode(encoded) == components


@pytest.mark.parametrize("vector", ENCODINGS["tuples"], ids=lambda v: v["encoded"] or "empty")
def test_tuple_encoding_matches_golden_vector(vector: dict[str, object]) -> None:
    components = tuple(vector["components"])  # type: ignore[arg-type]
    assert storage_tuple_codec.encode(components) == vector["encoded"]
    assert storage_tuple_codec.decode(vector["encoded"]) == components  # type: ignore[arg-type]


def test_golden_ordered_tuples_sort_identically_as_strings_and_as_utf8() -> None:
    ordered = ENCODINGS["orderedTuples"]
    encoded = [storage_tuple_codec.encode(tuple(vector["components"])) for vector in ordered]
    assert encoded == [vector["encoded"] for vector in ordered]
    assert encoded == sorted(encoded)
    assert len(set(encoded)) == len(encoded)


@pytest.mark.parametrize("vector", ENCODINGS["invalidTupleEncodings"], ids=lambda v: v["reason"])
def test_non_canonical_tuple_encoding_is_refused(vector: dict[str, str]) -> None:
    with pytest.raises(StorageValidationError):
        storage_tuple_codec.decode(vector["encoded"])
    assert not storage_tuple_codec.is_valid(vector["encoded"])


def test_empty_components_are_valid_tuple_members() -> None:
    for vector in ENCODINGS["validTupleEncodings"]:
        assert storage_tuple_codec.decode(vector["encoded"]) == tuple(vector["components"])
    assert storage_tuple_codec.encode(("",)) == ""
    assert storage_tuple_codec.encode(("", "")) == "/"


@pytest.mark.parametrize(
    "components",
    [(), [], "ab", ("a", 1), ("a", None), ("a", b"b"), ("\ud800",)],
    ids=["empty-tuple", "empty-list", "bare-string", "int-component", "none-component", "bytes", "surrogate"],
)
def test_tuple_encoding_refuses_anything_but_a_non_empty_sequence_of_valid_text(components: object) -> None:
    with pytest.raises(StorageValidationError):
        storage_tuple_codec.encode(components)  # type: ignore[arg-type]


def test_record_key_encoding_is_the_tuple_of_table_then_id() -> None:
    key = StorageRecordKey(StorageTableName.LEASES, ("env", "lease/1"))
    encoded = storage_record_key_codec.encode(key)
    assert encoded == storage_tuple_codec.encode(("leases", "env", "lease/1")) == key.encoded
    assert storage_record_key_codec.decode_parts(encoded) == ("leases", ("env", "lease/1"))
    with pytest.raises(StorageValidationError):
        storage_record_key_codec.decode_parts(storage_tuple_codec.encode(("leases",)))


# --- prefix upper bound ---------------------------------------------------------------------------------


@st.composite
def tuple_and_prefix(draw: st.DrawFn) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A tuple and a prefix that is either really its prefix or an unrelated (often nearby) tuple."""
    components_ = draw(tuples)
    if draw(st.booleans()):
        return components_, components_[: draw(st.integers(1, len(components_)))]
    return components_, draw(tuples)


@PROPERTY
@given(tuple_and_prefix())
def test_prefix_upper_bound_contains_exactly_the_tuples_with_that_prefix(
    case: tuple[tuple[str, ...], tuple[str, ...]],
) -> None:
    components, prefix = case
    lower = storage_tuple_codec.encode(prefix)
    upper = encode_storage_tuple_prefix_upper_bound(prefix)
    encoded = storage_tuple_codec.encode(components)
    has_prefix = components[: len(prefix)] == prefix
    assert (lower <= encoded < upper) == has_prefix
    assert StorageQueryRange.prefix(prefix).contains(encoded) == has_prefix


@pytest.mark.parametrize("vector", PREFIX_BOUNDS["bounds"], ids=lambda v: "/".join(v["prefix"]) or "empty")
def test_prefix_upper_bound_matches_golden_vector(vector: dict[str, object]) -> None:
    prefix = tuple(vector["prefix"])  # type: ignore[arg-type]
    assert storage_tuple_codec.encode(prefix) == vector["lowerInclusive"]
    upper = encode_storage_tuple_prefix_upper_bound(prefix)
    assert upper == vector["upperExclusive"]
    for inside in vector["inside"]:  # type: ignore[attr-defined]
        assert vector["lowerInclusive"] <= storage_tuple_codec.encode(tuple(inside)) < upper  # type: ignore[operator]
    for outside in vector["outside"]:  # type: ignore[attr-defined]
        encoded = storage_tuple_codec.encode(tuple(outside))
        assert not (vector["lowerInclusive"] <= encoded < upper)  # type: ignore[operator]


def test_prefix_upper_bound_needs_no_unicode_sentinel() -> None:
    # A component starting with U+10FFFF can still grow; a sentinel-based bound would cut it off.
    prefix = ("\U0010ffff",)
    longer = storage_tuple_codec.encode(("\U0010ffff", "\U0010ffff" * 3))
    assert longer < encode_storage_tuple_prefix_upper_bound(prefix)
    assert "\U0010ffff" not in encode_storage_tuple_prefix_upper_bound(prefix)


# --- iso dates ------------------------------------------------------------------------------------------

offsets = st.builds(
    timezone,
    st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)),
)
aware_datetimes = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.one_of(st.just(UTC), offsets)
)


@PROPERTY
@given(aware_datetimes)
def test_iso_date_round_trips_to_the_same_instant_in_utc(moment: datetime) -> None:
    encoded = iso_date_codec.encode(moment)
    assert len(encoded) == len("2024-01-01T00:00:00.000000Z")
    decoded = iso_date_codec.decode(encoded)
    assert decoded == moment
    assert decoded.utcoffset() == timedelta(0)


@PROPERTY
@given(aware_datetimes, aware_datetimes)
def test_iso_dates_sort_as_strings_in_time_order(left: datetime, right: datetime) -> None:
    assert cmp(iso_date_codec.encode(left), iso_date_codec.encode(right)) == cmp(left, right)


@pytest.mark.parametrize("vector", ENCODINGS["isoDates"], ids=lambda v: v["encoded"])
def test_iso_date_matches_golden_vector(vector: dict[str, str]) -> None:
    instant = datetime.fromisoformat(vector["instant"])
    assert iso_date_codec.encode(instant) == vector["encoded"]
    assert iso_date_codec.decode(vector["encoded"]) == instant


def test_iso_dates_keep_microseconds() -> None:
    moment = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    assert iso_date_codec.encode(moment) == "2024-05-06T07:08:09.123456Z"
    assert iso_date_codec.encode(moment + timedelta(microseconds=1)) > iso_date_codec.encode(moment)


def test_iso_dates_before_year_1000_are_zero_padded_so_they_still_sort() -> None:
    early = iso_date_codec.encode(datetime(999, 12, 31, tzinfo=UTC))
    assert early == "0999-12-31T00:00:00.000000Z"
    assert early < iso_date_codec.encode(datetime(1000, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    "value",
    [datetime(2024, 1, 1), datetime(2024, 1, 1).date(), "2024-01-01T00:00:00.000000Z", 0, None],
    ids=["naive-datetime", "date", "string", "int", "none"],
)
def test_iso_date_encoding_refuses_anything_but_an_aware_datetime(value: object) -> None:
    with pytest.raises(StorageValidationError):
        iso_date_codec.encode(value)  # type: ignore[arg-type]


def test_iso_date_outside_the_utc_year_range_is_refused_with_a_validation_error() -> None:
    with pytest.raises(StorageValidationError):
        iso_date_codec.encode(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))


@pytest.mark.parametrize("text", ENCODINGS["invalidIsoDates"])
def test_non_canonical_iso_date_is_refused(text: str) -> None:
    with pytest.raises(StorageValidationError):
        iso_date_codec.decode(text)
    assert not iso_date_codec.is_valid(text)


# --- unsigned 64-bit integers ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 2**53 + 1, 2**64 - 2, U64_MAX])
def test_u64_boundaries_round_trip_exactly(value: int) -> None:
    text = storage_unsigned_integer_codec.encode(value)
    assert text == str(value)
    decoded = storage_unsigned_integer_codec.decode(text)
    assert type(decoded) is int and decoded == value
    ordered = storage_unsigned_integer_codec.encode_ordered(value)
    assert len(ordered) == 20
    assert storage_unsigned_integer_codec.decode_ordered(ordered) == value


def test_u64_max_is_two_to_the_64_minus_one() -> None:
    assert U64_MAX == 18446744073709551615


def test_u64_decode_never_goes_through_a_float() -> None:
    # Both values are exact integers that a float cannot represent.
    assert storage_unsigned_integer_codec.decode("18446744073709551615") == 18446744073709551615
    assert storage_unsigned_integer_codec.decode("9007199254740993") == 9007199254740993
    assert float(9007199254740993) != 9007199254740993


@pytest.mark.parametrize(
    "value",
    [2**64, -1, True, False, 1.0, "1", None],
    ids=["2^64", "-1", "True", "False", "1.0", "str", "none"],
)
def test_u64_encoding_refuses_values_that_are_not_exact_integers_in_range(value: object) -> None:
    with pytest.raises(StorageValidationError):
        storage_unsigned_integer_codec.encode(value)  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError):
        storage_unsigned_integer_codec.encode_ordered(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [*ENCODINGS["invalidUnsignedIntegers"], 1, None])
def test_non_canonical_u64_text_is_refused(text: object) -> None:
    with pytest.raises(StorageValidationError):
        storage_unsigned_integer_codec.decode(text)  # type: ignore[arg-type]
    assert not storage_unsigned_integer_codec.is_valid(text)


@pytest.mark.parametrize("vector", ENCODINGS["unsignedIntegers"], ids=lambda v: v["value"])
def test_u64_matches_golden_vector(vector: dict[str, str]) -> None:
    value = int(vector["value"])
    assert storage_unsigned_integer_codec.encode(value) == vector["encoded"]
    assert storage_unsigned_integer_codec.encode_ordered(value) == vector["ordered"]
    assert storage_unsigned_integer_codec.decode(vector["encoded"]) == value


@pytest.mark.parametrize(
    "text",
    ["1", "000000000000000000001", "0000000000000000001", "18446744073709551616", "-0000000000000000001"],
)
def test_ordered_u64_needs_exactly_20_digits_in_range(text: str) -> None:
    with pytest.raises(StorageValidationError):
        storage_unsigned_integer_codec.decode_ordered(text)


@PROPERTY
@given(st.integers(0, U64_MAX), st.integers(0, U64_MAX))
def test_ordered_u64_encoding_sorts_numerically(left: int, right: int) -> None:
    encoded_left = storage_unsigned_integer_codec.encode_ordered(left)
    encoded_right = storage_unsigned_integer_codec.encode_ordered(right)
    assert cmp(encoded_left, encoded_right) == cmp(left, right)
    assert storage_unsigned_integer_codec.decode(storage_unsigned_integer_codec.encode(left)) == left
