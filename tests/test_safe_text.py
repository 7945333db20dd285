"""safe_text: driver text becomes printable, UTF-8-encodable, XML-safe and bounded; secrets hidden."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runlane_conformance.safe_text import (
    MESSAGE_LIMIT,
    REDACTED,
    Keep,
    clean_text,
    describe_exception,
    details_text,
    is_secret_key,
    one_line,
    redact_options,
    redact_text,
    safe_repr,
    safe_str,
    secret_values,
    xml_safe,
)

PROPERTY = settings(max_examples=300, deadline=None, print_blob=True)

# Any code point, surrogates included, with the hostile ones drawn often.
hostile_chars = st.one_of(
    st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF),
    st.sampled_from(["\x1b", "\x1b[", "\x1b]0;", "\x07", "\r", "\n", "\t", "\x9b", "\x00", "\u202e"]),
    st.sampled_from(["\ud800", "\udfff", "\udc80", "\ud83d\ude00", "\ufffe", "\uffff", "\x1b\\"]),
)
hostile_text = st.lists(hostile_chars, max_size=60).map("".join)

# What must never survive cleaning: C0 controls but tab/newline, DEL, C1, surrogates, separators, bidi.
_FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")

    def __repr__(self) -> str:
        raise RuntimeError("not either")


class StrReturnsNonString:
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


# --- safe_str and describe_exception -----------------------------------------------------------------


def test_safe_str_of_an_object_whose_str_and_repr_raise_names_its_type() -> None:
    assert safe_str(Unprintable()) == "<unprintable Unprintable>"


def test_safe_str_falls_back_to_repr_when_only_str_misbehaves() -> None:
    text = safe_str(StrReturnsNonString())
    assert text.startswith("<") and "StrReturnsNonString" in text


def test_safe_str_returns_plain_str_for_str_subclasses() -> None:
    class Shouty(str):
        def __str__(self) -> str:
            return "SHOUT"

    assert type(safe_str(Shouty("quiet"))) is str


def test_safe_repr_never_raises() -> None:
    assert safe_repr(Unprintable()) == "<unprintable Unprintable>"
    assert safe_repr("a") == "'a'"


def test_describe_exception_names_type_and_message_and_never_raises() -> None:
    assert describe_exception(ValueError("bad dsn")) == "ValueError: bad dsn"
    assert describe_exception(KeyError()) == "KeyError"
    assert describe_exception(Unprintable()) == "Unprintable: <unprintable Unprintable>"


def test_keyboard_interrupt_from_str_is_not_swallowed() -> None:
    class Interrupting:
        def __str__(self) -> str:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        safe_str(Interrupting())


# --- cleaning --------------------------------------------------------------------------------------


def test_ansi_sequences_are_removed_and_other_controls_shown_escaped() -> None:
    assert one_line("\x1b[31mred\x1b[0m \x1b]0;title\x07ok\x1b]8;;http://x\x1b\\link") == "red oklink"
    assert one_line("bell\x07 nul\x00 csi\x9b lone\x1b") == "bell\\x07 nul\\x00 csi\\x9b lone\\x1b"
    assert one_line("reset\x1bc done") == "reset done"  # ESC c would reset the terminal
    assert one_line("abc\u202eevil") == "abc\\u202eevil"


def test_carriage_returns_cannot_overwrite_a_line() -> None:
    assert one_line("CERTIFIED\rNOT") == "CERTIFIED\\x0dNOT"
    assert clean_text("a\r\nb\rc", multiline=True, limit=None) == "a\nb\\x0dc"


def test_one_line_turns_newlines_and_tabs_into_spaces_multiline_keeps_them() -> None:
    assert one_line("a\nb\tc") == "a b c"
    assert clean_text("a\nb\tc", multiline=True) == "a\nb\tc"


def test_surrogate_pairs_are_joined_and_lone_surrogates_replaced() -> None:
    assert one_line("\ud83d\ude00") == "\U0001f600"
    smuggled = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    assert one_line(smuggled) == "caf\ufffd \ufffd"
    assert one_line("x\ud800y") == "x\ufffdy"


def test_long_text_is_capped_with_a_count_of_what_was_left_out() -> None:
    text = "x" * 10_000_000
    capped = one_line(text)
    assert capped == "x" * MESSAGE_LIMIT + f" ... ({10_000_000 - MESSAGE_LIMIT} more characters)"
    assert one_line("abcd", limit=3) == "abc ... (1 more character)"
    assert one_line("abc", limit=3) == "abc"


def test_escapes_are_never_cut_in_half_by_the_cap() -> None:
    assert one_line("ab\x00cd", limit=4) == "ab ... (3 more characters)"


def test_details_keep_the_start_and_the_end_of_a_long_traceback() -> None:
    text = "Traceback (most recent call last):\n" + "y" * 1_000_000 + "\nValueError: the end"
    kept = details_text(text, limit=1000)
    assert kept.startswith("Traceback (most recent call last):\n")
    assert kept.endswith("\nValueError: the end")
    hidden = int(re.search(r"\.\.\. \((\d+) more characters\) \.\.\.", kept).group(1))  # type: ignore[union-attr]
    assert hidden == len(text) - 1000
    assert len(kept) < 1100


def test_short_details_are_kept_whole() -> None:
    assert details_text("line 1\nline 2", limit=100) == "line 1\nline 2"


@PROPERTY
@given(hostile_text, st.sampled_from([None, 0, 1, 5, 40]), st.booleans(), st.sampled_from(list(Keep)))
def test_cleaned_text_is_utf8_free_of_controls_and_bounded(
    text: str, limit: int | None, multiline: bool, keep: Keep
) -> None:
    cleaned = clean_text(text, limit=limit, multiline=multiline, keep=keep)
    cleaned.encode("utf-8")  # no lone surrogates
    assert not _FORBIDDEN.search(cleaned), ascii(cleaned)
    assert "\x1b" not in cleaned and "\r" not in cleaned
    if not multiline:
        assert "\n" not in cleaned and "\t" not in cleaned
    if limit is not None:
        body = re.sub(r"\s?\.\.\. \(\d+ more characters?\)( \.\.\.\s?)?", "", cleaned)
        assert len(body) <= limit


@PROPERTY
@given(hostile_text)
def test_uncapped_clean_text_of_plain_text_is_the_identity(text: str) -> None:
    plain = _FORBIDDEN.sub("", text).replace("\r", "").replace("\x1b", "")
    assert clean_text(plain, limit=None, multiline=True) == plain


@PROPERTY
@given(hostile_text)
def test_xml_safe_text_survives_an_xml_round_trip(text: str) -> None:
    safe = xml_safe(text)
    element = ET.Element("t", attribute=safe)
    element.text = safe
    parsed = ET.fromstring(ET.tostring(element, encoding="unicode"))
    assert parsed.text == (safe or None)


@PROPERTY
@given(hostile_text)
def test_cleaned_text_can_be_written_as_utf8_json(text: str) -> None:
    json.dumps({"m": one_line(text)}, ensure_ascii=False).encode("utf-8")


# --- redaction -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWD",
        "pwd",
        "db_secret",
        "token",
        "api_key",
        "dsn",
        "connection",
        "conn_str",
        "database_url",
        "uri",
        "credentials",
        "auth",
        "Cookie",
    ],
)
def test_secret_looking_keys_are_recognised(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["schema", "max_point_reads", "host", "port", "prefix", "durable"])
def test_ordinary_keys_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_options_hides_secret_keys_and_url_credentials_in_any_value() -> None:
    options = {
        "password": "hunter2",
        "server": "postgres://alice:s3cret@db:5432/app",
        "target": "https://TOKEN123@example.com/x?user=a&access_token=abc&page=2",
        "schema": "public",
    }
    assert redact_options(options) == {
        "password": REDACTED,
        "server": f"postgres://{REDACTED}@db:5432/app",
        "target": f"https://{REDACTED}@example.com/x?user=a&access_token={REDACTED}&page=2",
        "schema": "public",
    }


def test_redact_text_hides_secret_values_and_urls_anywhere_in_free_text() -> None:
    options = {"password": "hunter2", "dsn": "redis://:pw@h:6379/0", "pin": "abc"}
    secrets = secret_values(options)
    message = "auth failed for hunter2 at redis://:pw@h:6379/0 (also redis://u:x@other/1)"
    redacted = redact_text(message, secrets)
    assert "hunter2" not in redacted and ":pw@" not in redacted and "u:x@" not in redacted
    assert redacted == f"auth failed for {REDACTED} at {REDACTED} (also redis://{REDACTED}@other/1)"


def test_very_short_secret_values_are_not_hunted_in_free_text() -> None:
    assert secret_values({"password": "a"}) == ()
    assert redact_text("a cat", ["a"]) == "a cat"


_MARKER = re.compile(r"(?P<sep>[ \n])\.\.\. \((?P<hidden>\d+) more characters?\)(?: \.\.\.[ \n])?")


@PROPERTY
@given(hostile_text, st.integers(min_value=0, max_value=30), st.booleans(), st.sampled_from(list(Keep)))
def test_a_capped_text_shows_exactly_the_ends_of_the_uncapped_one(
    text: str, limit: int, multiline: bool, keep: Keep
) -> None:
    full = clean_text(text, limit=None, multiline=multiline)
    capped = clean_text(text, limit=limit, multiline=multiline, keep=keep)
    marker = _MARKER.search(capped) if capped != full else None
    if marker is None:
        assert capped == full
        return
    start, end = capped[: marker.start()], capped[marker.end() :]
    assert full.startswith(start)
    assert full.endswith(end)
    assert len(start) + len(end) <= limit
    if keep is Keep.HEAD:
        assert end == ""
