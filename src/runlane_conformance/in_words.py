"""Contract values in words: encoded keys and sort tuples decoded where a person reads them.

The contract stores tuple components and record keys as lowercase hexadecimal UTF-8 with ``/``
between components, and checks naturally print what they compared: an index page such as
``(StorageRecordKey(...), '72756e2d39/3230...')``. Nobody reads ``72756e2d39`` as ``run-9``. The judge
passes every failure text through :func:`in_words` before it reaches a report, JUnit or the console.

Decoding is conservative, because a wrong decoding would be worse than none: a quoted string is
rewritten only when it is entirely hexadecimal byte pairs (optionally separated by ``/``), contains a
``/`` or at least one of the letters ``a``-``f`` (a decimal version such as ``'4142'`` is never taken
for text), and every component decodes as UTF-8 to printable characters. It becomes
``<run-9 | 2030-01-02T00:00:05.000000Z>``: the angle brackets say "decoded", ``|`` separates components.

Two more things a driver author should not have to read are left out. A repr pytest cut short in the
middle of an encoded value (``[(StorageReco...0303030305a')]``) loses its hex tail (``...'``): the
lines under it show the values whole. And where Hypothesis explains a failure by the lines "always and
only run by failing test cases", the toolkit's own files are dropped (they are the checks, not the
driver) and the rest are shown from the current directory; a block left empty is dropped whole.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["decoded_tuple", "in_words"]

#: The toolkit's own package: files under it are the checks' code, never the driver author's.
_TOOLKIT = str(Path(__file__).resolve().parent) + os.sep
#: pytest's saferepr cut in the middle of an encoded value: ``...`` then 6+ hex up to the closing quote.
_CUT_HEX = re.compile(r"""\.\.\.[0-9a-f/]{6,}(?P<q>['"])""")
#: Hypothesis's explanation of which lines only failing examples ran, and the file:line lines under it.
_EXPLAINED = re.compile(
    r"(?P<head>^(?P<indent>[ \t]*)Explanation:\n[ \t]*These lines were always and only run by failing "
    r"test cases:\n)(?P<lines>(?:[ \t]+\S+:\d+\n?)+)",
    re.M,
)

_QUOTED_HEX = re.compile(r"""(?P<q>['"])(?P<body>(?:[0-9a-f]{2})*(?:/(?:[0-9a-f]{2})*)*)(?P=q)""")
_KEY_REPR = re.compile(
    r"StorageRecordKey\(table=<StorageTableName\.\w+: '(?P<table>[a-z_]+)'>, id=\((?P<id>[^()]*)\)\)"
)


def decoded_tuple(body: str) -> str | None:
    """``body`` (hex components joined by ``/``) decoded, or ``None`` when it may not be text."""
    if not body or ("/" not in body and not re.search(r"[a-f]", body)):
        return None
    parts = []
    for component in body.split("/"):
        try:
            text = bytes.fromhex(component).decode("utf-8")
        except ValueError:
            return None
        if not text.isprintable() or "|" in text or ">" in text:
            return None
        parts.append(text)
    return "<" + " | ".join(parts) + ">"


def in_words(text: str) -> str:
    """``text`` with encoded tuples decoded and record-key reprs shortened to ``table('id', ...)``."""
    text = _KEY_REPR.sub(lambda m: f"{m['table']}({m['id'].rstrip(', ')})", text)

    def replace(match: re.Match[str]) -> str:
        decoded = decoded_tuple(match["body"])
        return match.group(0) if decoded is None else decoded

    text = _QUOTED_HEX.sub(replace, text)
    text = _CUT_HEX.sub(lambda m: "..." + m["q"], text)
    return _EXPLAINED.sub(_explained, text)


def _explained(match: re.Match[str]) -> str:
    """Hypothesis's explanation block without the toolkit's files, the rest from the current directory."""
    kept: list[str] = []
    for line in match["lines"].splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        where, _, number = line.strip().rpartition(":")
        path = os.path.abspath(where)
        if path.startswith(_TOOLKIT):
            continue
        kept.append(f"{indent}{_from_here(path)}:{number}")
    if not kept:
        return ""
    ending = "\n" if match["lines"].endswith("\n") else ""
    return match["head"] + "\n".join(kept) + ending


def _from_here(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith(os.pardir) else relative
