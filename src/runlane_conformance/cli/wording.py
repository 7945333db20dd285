"""Small wording helpers, so the CLI never prints "1 checks"."""

from __future__ import annotations

__all__ = ["count"]


def count(number: int, singular: str, plural: str | None = None) -> str:
    """``number`` followed by the noun in the right number: ``1 check``, ``2 checks``, ``0 checks``.

    ``plural`` is needed only where adding an ``s`` is wrong (``1 entry`` / ``2 entries``).
    """
    noun = singular if number == 1 else (plural if plural is not None else f"{singular}s")
    return f"{number} {noun}"
