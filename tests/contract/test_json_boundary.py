"""The JSON boundary: only finite, acyclic JSON in the one envelope crosses into storage, frozen, measured."""

from __future__ import annotations

import json
import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runlane_conformance import (
    FrozenJsonObject,
    StorageDocument,
    StorageValidationError,
    canonical_json,
    freeze_json,
    parse_storage_document,
    thaw_json,
)
from runlane_conformance.contract.json_boundary import parse_canonical_storage_document

NON_FINITE = [math.nan, math.inf, -math.inf]
NON_FINITE_LITERALS = ["NaN", "Infinity", "-Infinity"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=5)


def envelope(value_text: str) -> str:
    return '{"schemaVersion":1,"value":' + value_text + "}"


# --- non-finite numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", NON_FINITE_LITERALS)
@pytest.mark.parametrize("where", ['{"n":%s}', '{"a":[1,{"b":%s}]}'], ids=["member", "nested"])
def test_parsing_refuses_non_finite_number_literals(literal: str, where: str) -> None:
    text = envelope(where % literal)
    with pytest.raises(StorageValidationError):
        parse_storage_document(text)
    with pytest.raises(StorageValidationError):
        parse_storage_document(text.encode("utf-8"))


def test_parsing_refuses_a_number_that_overflows_to_infinity() -> None:
    with pytest.raises(StorageValidationError):
        parse_storage_document(envelope('{"n":1e400}'))


@pytest.mark.parametrize("number", NON_FINITE, ids=["nan", "inf", "-inf"])
def test_encoding_refuses_non_finite_numbers(number: float) -> None:
    with pytest.raises(StorageValidationError):
        StorageDocument({"n": number})
    with pytest.raises(StorageValidationError):
        StorageDocument({"deep": [{"n": number}]})
    with pytest.raises(StorageValidationError):
        canonical_json([number])
    with pytest.raises(StorageValidationError):
        parse_storage_document({"schemaVersion": 1, "value": {"n": number}})


# --- reference cycles ------------------------------------------------------------------------------------


def self_referencing_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


def self_referencing_list() -> dict[str, Any]:
    items: list[Any] = [1]
    items.append(items)
    return {"items": items}


def nested_cycle() -> dict[str, Any]:
    inner: dict[str, Any] = {}
    outer: dict[str, Any] = {"level": [{"inner": inner}]}
    inner["back"] = [outer]
    return outer


def cycle_through_a_tuple() -> dict[str, Any]:
    items: list[Any] = []
    items.append((items,))
    return {"items": items}


CYCLES = {
    "dict": self_referencing_dict,
    "list": self_referencing_list,
    "nested": nested_cycle,
    "through-tuple": cycle_through_a_tuple,
}


@pytest.mark.parametrize("build", CYCLES.values(), ids=CYCLES.keys())
def test_reference_cycles_are_refused_when_parsing_and_encoding(build: Any) -> None:
    with pytest.raises(StorageValidationError):
        parse_storage_document({"schemaVersion": 1, "value": build()})
    with pytest.raises(StorageValidationError):
        StorageDocument(build())
    with pytest.raises(StorageValidationError):
        canonical_json(build())
    with pytest.raises(StorageValidationError):
        freeze_json(build())


def test_a_value_shared_twice_without_a_cycle_is_accepted() -> None:
    shared = {"x": [1, 2]}
    document = StorageDocument({"a": shared, "b": shared, "c": [shared, shared]})
    assert document.value["a"] == document.value["b"]


# --- other non-JSON input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [{1: "x"}, {"s": {1, 2}}, {"b": b"x"}, {"o": object()}, {"s": "\ud800"}, {"\udfff": 1}],
    ids=["int-key", "set", "bytes", "object", "lone-surrogate-value", "lone-surrogate-key"],
)
def test_values_that_are_not_json_are_refused(value: object) -> None:
    with pytest.raises(StorageValidationError):
        StorageDocument(value)


@pytest.mark.parametrize(
    "text",
    [
        envelope('{"s":"\\ud800"}'),
        envelope('{"a":1,"a":2}'),
        '{"schemaVersion":2,"schemaVersion":1,"value":{}}',
        envelope('{"a":'),
        "",
        b"\xff\xfe\x00",
    ],
    ids=[
        "escaped-lone-surrogate",
        "duplicate-key",
        "duplicate-envelope-key",
        "truncated",
        "empty",
        "not-utf8",
    ],
)
def test_text_that_is_not_unambiguous_json_is_refused(text: str | bytes) -> None:
    with pytest.raises(StorageValidationError):
        parse_storage_document(text)


def test_nesting_too_deep_to_walk_is_a_validation_error_not_a_crash() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(StorageValidationError):
        StorageDocument({"deep": deep})
    with pytest.raises(StorageValidationError):
        parse_storage_document(envelope('{"deep":' + "[" * 100_000 + "]" * 100_000 + "}"))


# --- canonical text --------------------------------------------------------------------------------------


def test_canonical_text_sorts_keys_has_no_whitespace_and_keeps_non_ascii() -> None:
    value = {"b": 1, "a": {"d": [1, 2.5, None, True], "c": "é 😀"}}
    assert canonical_json(value) == '{"a":{"c":"é 😀","d":[1,2.5,null,true]},"b":1}'


def test_canonical_key_order_is_code_point_order_not_utf16_order() -> None:
    # In UTF-16, U+1F600 is a surrogate pair (0xD83D...) and would sort before U+FFFF.
    value = {"😀": 1, "\uffff": 2, "é": 3, "z": 4, "Z": 5}
    assert canonical_json(value) == '{"Z":5,"z":4,"é":3,"\uffff":2,"😀":1}'


def test_document_text_is_the_canonical_envelope() -> None:
    document = StorageDocument({"z": [], "a": {}})
    assert document.text == '{"schemaVersion":1,"value":{"a":{},"z":[]}}'
    assert document.schema_version == 1


@settings(max_examples=200, deadline=None, print_blob=True)
@given(json_objects)
def test_canonical_text_parses_back_to_an_equal_document(value: dict[str, Any]) -> None:
    document = StorageDocument(value)
    reparsed = parse_storage_document(document.text)
    assert reparsed == document
    assert reparsed.text == document.text
    assert document.to_json() == {"schemaVersion": 1, "value": value}
    assert canonical_json(json.loads(document.text)) == document.text


@settings(max_examples=200, deadline=None, print_blob=True)
@given(json_objects)
def test_canonical_text_does_not_depend_on_insertion_order(value: dict[str, Any]) -> None:
    reversed_value = dict(reversed(list(value.items())))
    assert StorageDocument(reversed_value).text == StorageDocument(value).text


# --- the envelope ----------------------------------------------------------------------------------------


def test_the_envelope_is_accepted_as_mapping_text_and_bytes() -> None:
    from_mapping = parse_storage_document({"schemaVersion": 1, "value": {"a": 1}})
    from_text = parse_storage_document('{"value":{"a":1},"schemaVersion":1}')
    from_bytes = parse_storage_document(b'{"schemaVersion":1,"value":{"a":1}}')
    assert from_mapping == from_text == from_bytes
    assert from_mapping.value == {"a": 1}


BAD_ENVELOPES: dict[str, object] = {
    "schema-version-2": {"schemaVersion": 2, "value": {}},
    "schema-version-0": {"schemaVersion": 0, "value": {}},
    "schema-version-string": {"schemaVersion": "1", "value": {}},
    "schema-version-float": {"schemaVersion": 1.0, "value": {}},
    "schema-version-true": {"schemaVersion": True, "value": {}},
    "schema-version-null": {"schemaVersion": None, "value": {}},
    "extra-key": {"schemaVersion": 1, "value": {}, "extra": 1},
    "missing-value": {"schemaVersion": 1},
    "missing-schema-version": {"value": {}},
    "value-array": {"schemaVersion": 1, "value": []},
    "value-string": {"schemaVersion": 1, "value": "x"},
    "value-number": {"schemaVersion": 1, "value": 1},
    "value-null": {"schemaVersion": 1, "value": None},
    "not-an-object": [1, {}],
    "none": None,
}


@pytest.mark.parametrize("source", BAD_ENVELOPES.values(), ids=BAD_ENVELOPES.keys())
def test_anything_but_the_schema_version_1_envelope_is_refused(source: object) -> None:
    with pytest.raises(StorageValidationError):
        parse_storage_document(source)
    with pytest.raises(StorageValidationError):
        parse_storage_document(json.dumps(source))


# --- immutability, measurement and copies -----------------------------------------------------------------


def parsed() -> StorageDocument:
    return parse_storage_document(envelope('{"list":[1,{"x":[2]}],"object":{"y":"z"}}'))


def test_parsed_documents_are_deeply_immutable() -> None:
    document = parsed()
    value = document.value
    assert isinstance(value, FrozenJsonObject)
    assert isinstance(value["list"], tuple)
    nested = value["list"][1]  # type: ignore[index]
    assert isinstance(nested, FrozenJsonObject)
    assert isinstance(nested["x"], tuple)
    with pytest.raises(TypeError):
        value["new"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        del value["list"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        nested["x"] = 3  # type: ignore[index]
    for target in (value, nested, document):
        with pytest.raises(AttributeError):
            target._items = {}  # type: ignore[union-attr]
        with pytest.raises(AttributeError):
            target.anything = 1  # type: ignore[union-attr]
    with pytest.raises(AttributeError):
        del value._items
    with pytest.raises(AttributeError):
        del document._text
    assert not hasattr(value, "__dict__")


def test_frozen_objects_cannot_be_built_around_the_validator() -> None:
    with pytest.raises(TypeError):
        FrozenJsonObject({"n": math.nan})


def test_a_document_owns_its_values_so_later_caller_mutation_changes_nothing() -> None:
    source = {"list": [1, 2], "object": {"a": 1}}
    document = StorageDocument(source)
    text = document.text
    source["list"].append(3)  # type: ignore[attr-defined]
    source["object"]["a"] = 2  # type: ignore[index]
    source["new"] = True  # type: ignore[assignment]
    assert document.text == text
    assert document.value == {"list": (1, 2), "object": {"a": 1}}


@pytest.mark.parametrize(
    ("value", "utf8_bytes_of_content"),
    [("a", 1), ("é", 2), ("€", 3), ("😀", 4), ("\U0010ffff", 4), ("a😀é", 7)],
)
def test_size_is_the_utf8_length_of_the_text_including_non_bmp_characters(
    value: str, utf8_bytes_of_content: int
) -> None:
    document = StorageDocument({"s": value})
    assert document.size == len(document.text.encode("utf-8"))
    assert document.size == len('{"schemaVersion":1,"value":{"s":""}}') + utf8_bytes_of_content


@settings(max_examples=200, deadline=None, print_blob=True)
@given(json_objects)
def test_size_always_equals_the_utf8_length_of_text(value: dict[str, Any]) -> None:
    document = StorageDocument(value)
    assert document.size == len(document.text.encode("utf-8"))


def test_to_json_returns_an_independent_mutable_copy_each_time() -> None:
    document = parsed()
    first = document.to_json()
    assert first == {"schemaVersion": 1, "value": {"list": [1, {"x": [2]}], "object": {"y": "z"}}}
    assert type(first["value"]) is dict and type(first["value"]["list"]) is list  # type: ignore[index]
    first["value"]["list"].append("mutated")  # type: ignore[index, union-attr]
    first["value"]["object"]["y"] = "mutated"  # type: ignore[index]
    second = document.to_json()
    assert second["value"]["list"] == [1, {"x": [2]}]  # type: ignore[index]
    assert second["value"]["object"] == {"y": "z"}  # type: ignore[index]
    assert second is not first
    assert thaw_json(document.value) is not thaw_json(document.value)


# --- reuse versus re-validation ---------------------------------------------------------------------------


def test_a_storage_document_is_reused_as_is() -> None:
    document = parsed()
    assert parse_storage_document(document) is document


def test_a_mapping_envelope_is_revalidated_even_when_its_value_is_already_frozen() -> None:
    document = parsed()
    rebuilt = parse_storage_document({"schemaVersion": 1, "value": document.value})
    assert rebuilt is not document
    assert rebuilt == document
    with pytest.raises(StorageValidationError):
        parse_storage_document({"schemaVersion": 2, "value": document.value})
    with pytest.raises(StorageValidationError):
        parse_storage_document({"schemaVersion": 1, "value": document.value, "extra": 1})


def test_frozen_parts_do_not_vouch_for_the_mutable_rest_of_a_mapping() -> None:
    frozen_part = parsed().value
    with pytest.raises(StorageValidationError):
        parse_storage_document({"schemaVersion": 1, "value": {"ok": frozen_part, "bad": math.nan}})
    cyclic = self_referencing_list()
    cyclic["ok"] = frozen_part
    with pytest.raises(StorageValidationError):
        parse_storage_document({"schemaVersion": 1, "value": cyclic})


def test_read_only_views_and_tuples_are_walked_because_looking_frozen_proves_nothing() -> None:
    with pytest.raises(StorageValidationError):
        parse_storage_document(
            MappingProxyType({"schemaVersion": 1, "value": MappingProxyType({"n": math.inf})})
        )
    with pytest.raises(StorageValidationError):
        StorageDocument({"t": (1, (2, math.nan))})


def test_freezing_returns_an_already_frozen_object_unchanged() -> None:
    value = parsed().value
    assert freeze_json(value) is value


def test_string_subclasses_are_frozen_to_their_plain_text() -> None:
    from enum import Enum

    class Colour(str, Enum):  # noqa: UP042 - the plain (str, Enum) mix-in is the case under test
        RED = "red"

    frozen = freeze_json({Colour.RED: [Colour.RED]})
    assert canonical_json(frozen) == '{"red":["red"]}'
    assert type(next(iter(frozen))) is str  # type: ignore[arg-type]
    assert type(frozen["red"][0]) is str  # type: ignore[index]


# --- canonical text from across a process boundary ----------------------------------------------------------

ODD_TEXTS = [
    envelope('{"s":"\\ud800"}'),
    envelope('{"a":1,"a":2}'),
    '{"schemaVersion":2,"schemaVersion":1,"value":{}}',
    envelope('{"a":'),
    "",
    envelope('{"n":NaN}'),
    envelope('{"n":1e400}'),
    envelope('{"deep":' + "[" * 5000 + "]" * 5000 + "}"),
    *(json.dumps(source, separators=(",", ":")) for source in BAD_ENVELOPES.values()),
]


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_the_canonical_fast_path_refuses_exactly_what_the_full_parser_refuses(text: str) -> None:
    with pytest.raises(StorageValidationError):
        parse_storage_document(text)
    with pytest.raises(StorageValidationError):
        parse_canonical_storage_document(text)


@settings(max_examples=300, deadline=None, print_blob=True)
@given(json_objects, st.sampled_from(["canonical", "spaced", "ascii", "reversed"]))
def test_the_canonical_fast_path_gives_the_document_the_full_parser_gives(
    value: dict[str, Any], spelling: str
) -> None:
    canonical = StorageDocument(value).text
    texts = {
        "canonical": canonical,
        "spaced": json.dumps({"schemaVersion": 1, "value": value}),
        "ascii": json.dumps({"schemaVersion": 1, "value": value}, ensure_ascii=True, separators=(",", ":")),
        "reversed": json.dumps({"value": dict(reversed(list(value.items()))), "schemaVersion": 1}),
    }
    text = texts[spelling]
    fast, full = parse_canonical_storage_document(text), parse_storage_document(text)
    assert fast == full and fast.text == full.text == canonical
    assert fast.size == full.size
    assert fast.value == full.value and fast.to_json() == full.to_json()
    assert isinstance(fast.value, FrozenJsonObject)


def test_a_document_from_canonical_text_is_as_immutable_as_any_other() -> None:
    document = parse_canonical_storage_document(envelope('{"list":[1,{"x":[2]}]}'))
    assert document.value["list"][1]["x"] == (2,)
    with pytest.raises(AttributeError):
        document._text = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        document.value["list"][1]["x"] = 3  # type: ignore[index]
