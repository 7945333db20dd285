"""Failure texts name keys and sort values in words, and never decode what may not be text."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def test_a_repr_cut_inside_an_encoded_value_loses_its_hex_tail() -> None:
    text = "assert [(StorageReco...0303030305a')] == [(StorageReco...30305a')]"
    assert in_words(text) == "assert [(StorageReco...')] == [(StorageReco...')]"
    assert in_words("'abc...'") == "'abc...'"  # no hex after the dots: nothing was cut there
    assert in_words("'wait...bad'") == "'wait...bad'"  # too short to be a cut encoded value


def test_hypothesis_explanations_drop_the_toolkit_s_own_files_and_show_the_rest_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runlane_conformance

    toolkit = Path(runlane_conformance.__file__).resolve().parent
    monkeypatch.chdir(tmp_path)
    driver = tmp_path / "my_driver" / "store.py"
    text = (
        "    Explanation:\n"
        "        These lines were always and only run by failing test cases:\n"
        f"            {toolkit / 'local' / 'store.py'}:572\n"
        f"            {driver}:175\n"
        f"            {toolkit / 'suites' / 'test_profile.py'}:321\n"
        "    note: shrinking stopped\n"
    )
    assert in_words(text) == (
        "    Explanation:\n"
        "        These lines were always and only run by failing test cases:\n"
        "            my_driver/store.py:175\n"
        "    note: shrinking stopped\n"
    )
    only_toolkit = text.replace(f"            {driver}:175\n", "")
    assert in_words(only_toolkit) == "    note: shrinking stopped\n"
