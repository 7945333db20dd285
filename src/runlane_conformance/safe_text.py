"""Text from a driver, made safe to print, store and embed; secrets kept out of all of it.

Everything a run shows comes partly from the driver under test: its name or
``module:factory`` spec, its options, its exception messages, skip reasons,
node ids and tracebacks. None of it can be trusted to be printable. A hostile
or merely sloppy driver can hand us

* objects whose ``__str__`` raises (the failure would crash the reporter, and a
  crashed reporter is a verdict nobody sees);
* lone surrogates or bytes smuggled in with ``surrogateescape`` (``json.dumps``
  accepts them, but writing the result as UTF-8 fails, and XML forbids them);
* ANSI escape sequences and other control characters (they recolour, move the
  cursor, retitle or clear the terminal and CI log, or forge a "CERTIFIED" line);
* bidirectional overrides that make a line read differently from its bytes;
* a multi-megabyte message that would bury the verdict and bloat every file.

The helpers here turn any such input into text that is valid Unicode with a
UTF-8 form, carries no terminal control sequence, and has a bounded length with
a visible marker saying how much was left out. They never raise (short of
``KeyboardInterrupt``), because they sit on the error paths themselves.

Escape sequences are recognised by the ECMA-48 grammar (CSI, OSC and the other
string controls, two-character escapes) and removed: they are formatting, not
content. Any other control character that remains, including a lone ESC, is
shown escaped (``\\x1b``) so a reader can still see that it was there.

The second half of the module is redaction: driver options whose key looks
like a credential, and any URL carrying a user name or password, are replaced
by ``***`` wherever they would be shown (the terminal ends up in CI logs, which
are often public, so redaction is not only for files).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

__all__ = [
    "DETAILS_LIMIT",
    "MESSAGE_LIMIT",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_KEY_FRAGMENTS",
    "Keep",
    "clean_text",
    "describe_exception",
    "details_text",
    "is_secret_key",
    "json_text",
    "one_line",
    "redact_options",
    "redact_text",
    "safe_repr",
    "safe_str",
    "secret_values",
    "xml_safe",
]

#: Longest one-line message kept (a failure message, a skip reason, an error line).
MESSAGE_LIMIT = 2_000

#: Longest multi-line text kept (a failing check's traceback).
DETAILS_LIMIT = 20_000

#: What a redacted secret is replaced by.
REDACTED = "***"


class Keep(Enum):
    """Which part of an over-long text survives the cap."""

    #: The beginning (a message: its first words say what happened).
    HEAD = "head"
    #: The beginning and the end, the middle elided (a traceback: where it started and what was raised).
    ENDS = "ends"


# --- turning anything into a string ---------------------------------------------------------------


def _type_name(value: object) -> str:
    try:
        name = type(value).__name__
    except Exception:
        return "object"
    return name if isinstance(name, str) else "object"


def safe_str(value: object) -> str:
    """``str(value)``, except that it never raises and always returns a real ``str``.

    When ``__str__`` raises (or returns something other than a string), ``repr``
    is tried, and failing that the result is ``<unprintable TypeName>``. The
    text is not cleaned; pass it through ``one_line`` or ``clean_text`` before
    showing it.
    """
    if type(value) is str:
        return value
    for convert in (str, repr):
        try:
            text = convert(value)
        except KeyboardInterrupt:
            raise
        except BaseException:
            continue
        if isinstance(text, str):
            # A str subclass could override its own methods; keep only the characters.
            return str.__str__(text)
    return f"<unprintable {_type_name(value)}>"


def safe_repr(value: object) -> str:
    """``repr(value)`` that never raises (``<unprintable TypeName>`` when ``__repr__`` does); not cleaned."""
    try:
        text = repr(value)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return f"<unprintable {_type_name(value)}>"
    return str.__str__(text) if isinstance(text, str) else f"<unprintable {_type_name(value)}>"


def describe_exception(error: BaseException) -> str:
    """``"TypeName: message"`` for an exception (just ``TypeName`` when it has no message); never raises."""
    name = _type_name(error)
    try:
        message = str(error)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return f"{name}: <unprintable {name}>"
    if not isinstance(message, str):
        return f"{name}: <unprintable {name}>"
    message = str.__str__(message)
    return f"{name}: {message}" if message else name


# --- cleaning -------------------------------------------------------------------------------------

# ECMA-48 escape sequences: CSI (colours, cursor moves, erase), OSC (titles, hyperlinks) ended by BEL
# or ST, the DCS/SOS/PM/APC strings ended by ST, and two-character escapes (ESC c resets the terminal).
# Each repetition stops at the next ESC or BEL, so one pass over any input is linear.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b]*+(?:\x07|\x1b\\)|[PX^_][^\x1b]*+\x1b\\|[ -/]*+[0-~])"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A surrogate that is not half of a (high, low) pair: it has no UTF-8 form, and neither has a byte
# smuggled in with surrogateescape.
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")

# Characters never shown raw: C0 controls but tab and newline, DEL, the C1 controls (U+009B is an
# 8-bit CSI on some terminals), Unicode line and paragraph separators, and the bidirectional
# embeddings, overrides and isolates (a line could otherwise read unlike its bytes).
_CONTROL_CODES = (
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)


def _escaped(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_MULTILINE_TABLE: dict[int, str] = {code: _escaped(code) for code in _CONTROL_CODES}
_ONE_LINE_TABLE: dict[int, str] = {**_MULTILINE_TABLE, ord("\n"): " ", ord("\t"): " "}
# Characters whose cleaned width is not simply 1 (or that need a look at their neighbour).
_SPECIAL = re.compile("[" + "".join(re.escape(chr(code)) for code in _MULTILINE_TABLE) + "\n\t\ud800-\udfff]")


def _resolved(text: str) -> str:
    """Surrogate pairs joined into the character they encode, lone surrogates replaced by U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    text = _LONE_SURROGATE.sub("\N{REPLACEMENT CHARACTER}", text)
    if _SURROGATE.search(text):  # only well-formed pairs are left
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    return text


def _fit(text: str, budget: int, table: Mapping[int, str], *, from_end: bool = False) -> int:
    """How many characters from the start (or the end) of ``text`` make at most ``budget`` characters
    once cleaned. An escaped character or a surrogate pair is never cut in half. Looks at no more
    than ``2 * budget`` characters, however long ``text`` is."""
    window = (text[-2 * budget :] if budget else "") if from_end else text[: 2 * budget]
    if not _SPECIAL.search(window[-budget:] if from_end else window[:budget]):
        return min(len(text), budget)
    sequence = window[::-1] if from_end else window
    first, second = ((0xDC00, 0xDFFF), (0xD800, 0xDBFF)) if from_end else ((0xD800, 0xDBFF), (0xDC00, 0xDFFF))
    used = index = 0
    while index < len(sequence):
        code = ord(sequence[index])
        step = width = 1
        if 0xD800 <= code <= 0xDFFF:
            following = ord(sequence[index + 1]) if index + 1 < len(sequence) else 0
            if first[0] <= code <= first[1] and second[0] <= following <= second[1]:
                step = 2
        else:
            replacement = table.get(code)
            width = 1 if replacement is None else len(replacement)
        if used + width > budget:
            break
        used += width
        index += step
    return index


def _more(count: int) -> str:
    return f"{count} more character{'' if count == 1 else 's'}"


def clean_text(
    value: object, *, limit: int | None = MESSAGE_LIMIT, multiline: bool = False, keep: Keep = Keep.HEAD
) -> str:
    """``value`` as text that is safe to print, store as UTF-8 JSON and put in XML (see the module doc).

    * Never raises: ``value`` goes through ``safe_str`` first.
    * Escape sequences are removed, other control characters shown as ``\\xNN``
      or ``\\uNNNN``, surrogate pairs joined, lone surrogates replaced by U+FFFD.
    * ``multiline``: newlines (``\\r\\n`` becomes ``\\n``) and tabs are kept;
      otherwise each becomes a space, so the result is one line.
    * ``limit``: when the cleaned text would be longer, at most ``limit``
      characters of it are kept plus a marker ``... (N more characters)``, where
      N counts the characters left out (escape sequences, already removed, are
      not counted). ``keep`` says which part is kept. ``None`` means no cap.

    Capped, the work beyond one linear pass in C (removing escape sequences)
    is proportional to ``limit``, not to the text: a 10 MB message costs
    milliseconds.
    """
    text = safe_str(value)
    if "\x1b" in text:
        text = _ESCAPE_SEQUENCE.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    table = _MULTILINE_TABLE if multiline else _ONE_LINE_TABLE
    if limit is None:
        return _resolved(text).translate(table)
    limit = max(limit, 0)
    head = _fit(text, limit, table)
    if head == len(text):
        return _resolved(text).translate(table)
    if keep is Keep.HEAD:
        return f"{_resolved(text[:head]).translate(table)} ... ({_more(len(text) - head)})"
    # Keep.ENDS: half the budget for each end, the middle elided.
    head = _fit(text, limit - limit // 2, table)
    rest = text[head:]
    tail = _fit(rest, limit // 2, table, from_end=True)
    start = _resolved(text[:head]).translate(table)
    end = _resolved(rest[len(rest) - tail :]).translate(table)
    separator = "\n" if multiline else " "
    return f"{start}{separator}... ({_more(len(rest) - tail)}) ...{separator}{end}"


def one_line(value: object, limit: int | None = MESSAGE_LIMIT) -> str:
    """``value`` cleaned to a single line of at most ``limit`` characters (plus the marker)."""
    return clean_text(value, limit=limit, multiline=False)


def details_text(value: object, limit: int | None = DETAILS_LIMIT) -> str:
    """Multi-line ``value`` (a traceback) cleaned, keeping its start and its end when capped."""
    return clean_text(value, limit=limit, multiline=True, keep=Keep.ENDS)


# XML 1.0 allows tab, LF, CR and U+0020..U+D7FF, U+E000..U+FFFD, U+10000..U+10FFFF; nothing else,
# not even as a character reference. C1 controls are allowed but discouraged; clean_text escapes them.
_NOT_XML = re.compile("[\ufffe\uffff]")


def xml_safe(value: object, *, limit: int | None = None, multiline: bool = True) -> str:
    """``value`` cleaned so that every character may appear in an XML 1.0 document.

    This removes what XML cannot carry at all; escaping ``<``, ``&`` and quotes
    stays the job of the serialiser (ElementTree, ``xml.sax.saxutils``).
    """
    cleaned = clean_text(value, limit=limit, multiline=multiline, keep=Keep.ENDS if multiline else Keep.HEAD)
    return _NOT_XML.sub("\N{REPLACEMENT CHARACTER}", cleaned)


# Inside JSON text these can only occur within strings (the structure is ASCII), so writing each as a
# \uXXXX escape keeps the document identical while the text stays valid UTF-8 and inert in a terminal.
# json.dumps already escapes U+0000..U+001F itself.
_JSON_ESCAPED = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``json.dumps(value, ensure_ascii=False)`` that can always be written as UTF-8 and shown in a terminal.

    Non-ASCII text stays readable; lone surrogates, DEL, C1 controls, Unicode
    line separators and bidi controls are written as ``\\uXXXX`` escapes, which
    decode back to the same document.
    """
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _JSON_ESCAPED.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


# --- redaction -------------------------------------------------------------------------------------

#: Fragments of an option key that mark its value as a credential (matched anywhere, any case). Broad on
#: purpose: hiding a harmless value costs a reader little, showing a password in a public log costs a lot.
SECRET_KEY_FRAGMENTS: tuple[str, ...] = (
    "pass",  # password, passwd, passphrase
    "pwd",
    "secret",
    "token",
    "key",
    "dsn",
    "conn",  # connection, conn_string
    "url",
    "uri",
    "credential",
    "auth",
    "cookie",
)

_SECRET_KEY = re.compile("|".join(map(re.escape, SECRET_KEY_FRAGMENTS)), re.IGNORECASE)

# scheme://userinfo@ -- the userinfo (user, or user:password) is hidden whole: tokens often sit in the
# user part (https://TOKEN@host).
# Every repetition is bounded or possessive and the scheme must start a word, so the patterns stay
# linear on hostile input (a 10 MB run of letters would otherwise make the scheme search quadratic).
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31}+://)(?P<userinfo>[^/?#@\s]{1,4096}+)@"
)
# ?password=... / &token=... inside a URL's query.
_URL_QUERY_SECRET = re.compile(
    r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.\-]{0,32}(?:"
    + "|".join(map(re.escape, SECRET_KEY_FRAGMENTS))
    + r")[A-Za-z0-9_.\-]{0,32}+)=)(?P<value>[^&;#\s]*+)",
    re.IGNORECASE,
)

#: Secret values shorter than this are not searched for in free text (a one-letter password would
#: otherwise turn every message into asterisks); they are still hidden wherever the option is shown.
MIN_SECRET_LENGTH = 4


def is_secret_key(key: str) -> bool:
    """True when an option key looks like it names a credential (``password``, ``dsn``, ``api_key``...)."""
    return bool(_SECRET_KEY.search(key))


def _redact_urls(text: str) -> str:
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    return _URL_QUERY_SECRET.sub(lambda m: f"{m['lead']}{REDACTED}", text)


def redact_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options with secrets hidden: values of secret-looking keys become ``***`` and
    credentials inside any other value (a URL's user and password, a secret query parameter) too."""
    return {
        key: REDACTED if is_secret_key(key) else _redact_urls(safe_str(value))
        for key, value in options.items()
    }


def secret_values(options: Mapping[str, str]) -> tuple[str, ...]:
    """The values of secret-looking options, longest first, as ``redact_text`` wants them."""
    found = {safe_str(value) for key, value in options.items() if is_secret_key(safe_str(key))}
    return tuple(sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every occurrence of the given secret values and every URL credential replaced by ``***``.

    Use it on free text that may echo an option (an exception from a driver
    that could not connect usually quotes its DSN).
    """
    for secret in secrets:
        if len(secret) >= MIN_SECRET_LENGTH:
            text = text.replace(secret, REDACTED)
    return _redact_urls(text)
