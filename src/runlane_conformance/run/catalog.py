"""The requirement catalogue the parent of a run judges by: read from the installed suites, every time.

The catalogue sets each requirement's level and the capability that gates it, so it decides
what certifies. It is therefore computed in this process from the toolkit's own modules
(``requirements.all_requirements`` imports every suite module, which declares its requirements)
and kept only in memory. It used to be cached in a JSON file under the user's cache directory,
which saved about a quarter of a second of CPU per run, but any program running as the user (the
driver under test among them) could rewrite that file and turn every MUST into a SHOULD; a
digest kept next to it could be rewritten just as easily. Nothing the judge decides from lives
where the judged can write it (``docs/trust.md``).
"""

from __future__ import annotations

from functools import cache

from ..requirements import Requirement, all_requirements

__all__ = ["suite_catalog"]


@cache
def _catalog() -> dict[str, Requirement]:
    return all_requirements()


def suite_catalog() -> dict[str, Requirement]:
    """What ``all_requirements()`` returns (a fresh copy; computed once per process)."""
    return dict(_catalog())
