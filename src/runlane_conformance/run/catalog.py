"""The requirement catalogue without importing the suites, when it was read before.

``requirements.all_requirements`` imports every suite module (and through them pytest,
Hypothesis and the contract) so that each declares its requirements: about half a second of CPU
that the parent of a supervised run would pay only to learn ids, levels, clauses and summaries.
``suite_catalog`` keeps what it returns in a small JSON file under the toolkit's cache directory,
named by a digest of the toolkit version, ``requirements.py`` and every file of the suites
package. Any change to those files names another file, so a stale catalogue is never read; a
cache that cannot be read or written only means the suites are imported as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from .. import __version__
from ..requirements import Requirement, RequirementLevel, all_requirements

__all__ = ["CATALOG_CACHE_VARIABLE", "catalog_digest", "suite_catalog"]

#: Names the directory the catalogue is kept in, or ``off`` (then the suites are always imported).
CATALOG_CACHE_VARIABLE = "RUNLANE_CATALOG_CACHE"

_PACKAGE = Path(__file__).resolve().parents[1]


def catalog_digest() -> str:
    """sha256 over the toolkit version and the sources the catalogue is declared in."""
    digest = hashlib.sha256(__version__.encode() + b"\0")
    sources = [_PACKAGE / "requirements.py", *sorted((_PACKAGE / "suites").rglob("*.py"))]
    for path in sources:
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return digest.hexdigest()


def _directory() -> Path | None:
    chosen = os.environ.get(CATALOG_CACHE_VARIABLE, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(cache_home) / "runlane-conformance" / "catalog"


def _read(path: Path) -> dict[str, Requirement] | None:
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        return {
            entry["id"]: Requirement(
                entry["id"],
                RequirementLevel(entry["level"]),
                entry["clause"],
                entry["summary"],
                entry["capability"],
            )
            for entry in entries
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, catalog: dict[str, Requirement]) -> None:
    entries = [
        {
            "id": r.id,
            "level": r.level.value,
            "clause": r.clause,
            "summary": r.summary,
            "capability": r.capability,
        }
        for r in catalog.values()
    ]
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".catalog-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(entries, stream)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def suite_catalog() -> dict[str, Requirement]:
    """What ``all_requirements()`` returns, from the cache when this toolkit's suites were read before."""
    directory = _directory()
    if directory is None:
        return all_requirements()
    path = directory / f"catalog-{catalog_digest()}.json"
    cached = _read(path)
    if cached is not None:
        return cached
    catalog = all_requirements()
    _write(path, catalog)
    return catalog
