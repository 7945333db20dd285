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

import re
from collections.abc import Iterable, Mapping
from enum import Enum

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

# Characters never shown raw: C0 controls (tab and newlines are handled on their own), DEL, the C1
# controls (U+009B is an 8-bit CSI on some terminals), Unicode line and paragraph separators, and the
# bidirectional embeddings, overrides and isolates (a line could otherwise read unlike its bytes).
_CONTROL_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"

_TOKEN = re.compile(
    # ECMA-48 escape sequences: CSI (colours, cursor moves, erase), OSC (titles, hyperlinks) ended by
    # BEL or ST, the DCS/SOS/PM/APC strings ended by ST, and two-character escapes (ESC c resets).
    r"(?P<escape>\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|[ -/]*[0-~]))"
    r"|(?P<pair>[\ud800-\udbff][\udc00-\udfff])"  # a surrogate pair: one real character
    r"|(?P<surrogate>[\ud800-\udfff])"  # a lone surrogate (also surrogateescape'd bytes): no UTF-8 form
    r"|(?P<newline>\r\n|\n)"
    r"|(?P<tab>\t)"
    rf"|(?P<control>\r|[{_CONTROL_CHARS}])"
    rf"|(?P<plain>[^\t\n\r{_CONTROL_CHARS}\ud800-\udfff]+)"
)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _pieces(text: str, multiline: bool) -> Iterable[tuple[str, int]]:
    """The cleaned text as (output, characters of input consumed) pieces, in order."""
    for match in _TOKEN.finditer(text):
        kind, raw = match.lastgroup, match.group()
        if kind == "plain":
            yield raw, len(raw)
        elif kind == "newline":
            yield ("\n" if multiline else " "), len(raw)
        elif kind == "tab":
            yield ("\t" if multiline else " "), 1
        elif kind == "pair":
            yield raw.encode("utf-16", "surrogatepass").decode("utf-16"), 2
        elif kind == "surrogate":
            yield "\N{REPLACEMENT CHARACTER}", 1
        elif kind == "escape":
            yield "", len(raw)
        else:  # a control character outside any sequence (a lone ESC too)
            yield _escaped(raw), 1


def _more(count: int) -> str:
    return f"{count} more character{'' if count == 1 else 's'}"


def _head(text: str, budget: int, multiline: bool) -> tuple[str, int]:
    """At most ``budget`` characters of cleaned output from the start of ``text``, and the input consumed."""
    out: list[str] = []
    used = consumed = 0
    for piece, width in _pieces(text, multiline):
        if used + len(piece) > budget:
            if width == len(piece):  # plain text can be cut anywhere; an escape only whole
                out.append(piece[: budget - used])
                consumed += budget - used
            break
        out.append(piece)
        used += len(piece)
        consumed += width
    return "".join(out), consumed


def _tail(text: str, budget: int, multiline: bool) -> tuple[str, int]:
    """At most ``budget`` characters of cleaned output from the end of ``text``, and the input consumed."""
    window = text[-budget:] if budget else ""
    pieces = list(_pieces(window, multiline))
    out: list[str] = []
    used = consumed = 0
    for piece, width in reversed(pieces):
        if used + len(piece) > budget:
            if width == len(piece):
                keep = budget - used
                out.append(piece[len(piece) - keep :] if keep else "")
                consumed += keep
            break
        out.append(piece)
        used += len(piece)
        consumed += width
    return "".join(reversed(out)), consumed


def clean_text(
    value: object, *, limit: int | None = MESSAGE_LIMIT, multiline: bool = False, keep: Keep = Keep.HEAD
) -> str:
    """``value`` as text that is safe to print, store as UTF-8 JSON and put in XML (see the module doc).

    * Never raises: ``value`` goes through ``safe_str`` first.
    * Escape sequences are removed, other control characters shown as ``\\xNN``
      or ``\\uNNNN``, surrogate pairs joined, lone surrogates replaced by U+FFFD.
    * ``multiline``: newlines (``\\r\\n`` becomes ``\\n``) and tabs are kept;
      otherwise each becomes a space, so the result is one line.
    * ``limit``: when the cleaned text would be longer, what is kept is at most
      ``limit`` characters of it plus a marker ``... (N more characters)``,
      where N counts the characters of the original left out. ``keep`` says
      which part is kept. ``None`` means no cap.
    """
    text = safe_str(value)
    if limit is None:
        return "".join(piece for piece, _ in _pieces(text, multiline))
    limit = max(limit, 0)
    if keep is Keep.HEAD:
        shown, consumed = _head(text, limit, multiline)
        hidden = len(text) - consumed
        return shown if hidden == 0 else f"{shown} ... ({_more(hidden)})"
    # Keep.ENDS: clean the whole text when it fits; otherwise half from each end.
    shown, consumed = _head(text, limit, multiline)
    if consumed == len(text):
        return shown
    head, head_consumed = _head(text, limit - limit // 2, multiline)
    tail, tail_consumed = _tail(text[head_consumed:], limit // 2, multiline)
    hidden = len(text) - head_consumed - tail_consumed
    if hidden == 0:
        return head + tail
    separator = "\n" if multiline else " "
    return f"{head}{separator}... ({_more(hidden)}) ...{separator}{tail}"


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
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s]+)@")
# ?password=... / &token=... inside a URL's query.
_URL_QUERY_SECRET = re.compile(
    r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.\-]*(?:"
    + "|".join(map(re.escape, SECRET_KEY_FRAGMENTS))
    + r")[A-Za-z0-9_.\-]*)=)(?P<value>[^&;#\s]*)",
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
