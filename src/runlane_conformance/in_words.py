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
"""

from __future__ import annotations

import re

__all__ = ["decoded_tuple", "in_words"]

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

    return _QUOTED_HEX.sub(replace, text)
