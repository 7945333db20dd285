"""Close-match hints for names a user types: requirement IDs, areas, drivers, profiles.

Every message that refuses an unknown name ends with the same kind of hint, so a typo costs one
re-run, never a trip to the source: the closest known names (``difflib``, the standard library's
similarity ratio), or, when nothing is close, where the full list is. The pointers name commands of
the installed toolkit (``runlane-certify requirements``), never files only a checkout has.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["REQUIREMENTS_HINT", "close_matches", "did_you_mean"]

#: Where a user finds every requirement ID, in any installation (a wheel has no docs/ folder).
REQUIREMENTS_HINT = "`runlane-certify requirements` lists every requirement ID"

#: How similar a known name must be to count as "close" (difflib's ratio; 0.6 is its own default).
_CUTOFF = 0.6


def close_matches(typed: str, known: Iterable[str], *, limit: int = 3) -> list[str]:
    """Up to ``limit`` known names closest to ``typed``, best first (case is ignored for matching).

    A requirement ID typed without its area (``reads-refused-after-now``) still finds
    ``sealing.reads-refused-after-now``: the rule name after the dot is compared too.
    """
    names = sorted(set(known))
    lowered = {name.lower(): name for name in names}
    found = difflib.get_close_matches(typed.lower(), list(lowered), n=limit, cutoff=_CUTOFF)
    if len(found) < limit:
        rules = {name.partition(".")[2].lower(): name for name in names if "." in name}
        for rule in difflib.get_close_matches(typed.lower(), list(rules), n=limit, cutoff=_CUTOFF):
            candidate = rules[rule].lower()
            if candidate not in found:
                found.append(candidate)
    return [lowered[name] for name in found[:limit]]


def did_you_mean(typed: str, known: Iterable[str], *, otherwise: str) -> str:
    """``"; did you mean X or Y?"`` for the names close to ``typed``, else ``"; " + otherwise``.

    The result is meant to be appended to a one-line error that already names ``typed``.
    """
    close = close_matches(typed, known)
    if close:
        return f"; did you mean {' or '.join(close)}?"
    return f"; {otherwise}"
