"""Failure texts name keys and sort values in words, and never decode what may not be text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance import StorageRecordKey, StorageTableName, storage_tuple_codec
from runlane_conformance.in_words import decoded_tuple, in_words


def test_an_encoded_sort_tuple_reads_as_its_components() -> None:
    sort = storage_tuple_codec.encode(("run-9", "2030-01-02T00:00:05.000000Z"))
    assert in_words(f"expected [{sort!r}]") == "expected [<run-9 | 2030-01-02T00:00:05.000000Z>]"


def test_a_record_key_repr_reads_as_table_and_id() -> None:
    key = StorageRecordKey(StorageTableName.RUNS, ("env-1", "run-7"))
    assert in_words(f"got {key!r}") == "got runs('env-1', 'run-7')"


def test_a_decimal_version_is_never_taken_for_text() -> None:
    # '4142' is valid hex for "AB"; versions are decimal, so digits alone are left as they are.
    assert in_words("version '4142' then '17'") == "version '4142' then '17'"


def test_bytes_that_are_not_printable_utf8_stay_encoded() -> None:
    assert decoded_tuple("ff00") is None
    assert decoded_tuple("0a0b") is None
    assert in_words("'abcd'") == "'abcd'"


@given(st.lists(st.text(min_size=1).filter(str.isprintable), min_size=1, max_size=4))
def test_every_printable_tuple_decodes_to_exactly_its_components(components: list[str]) -> None:
    encoded = storage_tuple_codec.encode(tuple(components))
    decoded = decoded_tuple(encoded)
    if decoded is not None:  # left encoded only when a component could be mistaken for punctuation
        assert decoded == "<" + " | ".join(components) + ">"
    else:
        assert any(("|" in c or ">" in c) for c in components) or (
            len(components) == 1 and not any(ch in encoded for ch in "abcdef")
        )
