"""The requirement catalogue the parent of a run judges by: the catalogue package, read every time.

The catalogue sets each requirement's level and the capability that gates it, so it decides what
certifies. It is built in this process from the toolkit's own ``catalogue`` package, which imports
neither pytest nor the suites, and kept only in memory. It once lived in a JSON file under the
user's cache directory, which any program running as the user (the driver under test among them)
could rewrite to turn every MUST into a SHOULD. Nothing the judge decides from lives where the
judged can write it (``docs/trust.md``).
"""

from __future__ import annotations

from ..catalogue import Requirement, all_requirements

__all__ = ["suite_catalog"]


def suite_catalog() -> dict[str, Requirement]:
    """The whole catalogue by ID (a fresh dict each call)."""
    return all_requirements()
