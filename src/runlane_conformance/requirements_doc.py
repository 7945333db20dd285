"""Renders ``docs/requirements.md`` from the requirement catalog.

The document is generated, never edited by hand: ``python -m
runlane_conformance.requirements_doc --write docs/requirements.md``. A test
fails when the committed file differs from what this renders.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from .requirements import AREAS, all_requirements

HEADER = """# Conformance requirements

Generated from the requirement catalog by `python -m runlane_conformance.requirements_doc --write
docs/requirements.md`; do not edit by hand. Each ID is frozen: it names the same rule in pytest ids,
JUnit properties and certification reports. MUST failures deny certification; SHOULD failures are
reported only. A capability in the last column means the check runs only when the driver's profile
offers it (otherwise it is skipped with a `profile:` reason).
"""


def render() -> str:
    catalog = all_requirements()
    lines = [HEADER]
    for area in AREAS:
        rows = [req for req in catalog.values() if req.area == area]
        if not rows:
            continue
        lines.append(f"\n## {area}\n")
        lines.append("| ID | Level | Rule | Spec clause | Needs |")
        lines.append("|---|---|---|---|---|")
        for req in rows:
            summary = req.summary.replace("|", "\\|")
            clause = req.clause.replace("|", "\\|")
            needs = req.capability or ""
            lines.append(f"| `{req.id}` | {req.level.value} | {summary} | {clause} | {needs} |")
    total = len(catalog)
    must = sum(1 for req in catalog.values() if req.level.value == "MUST")
    lines.append(f"\n{total} requirements ({must} MUST, {total - must} SHOULD).\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, help="write the document to this path (atomically)")
    args = parser.parse_args(argv)
    text = render()
    if args.write is None:
        sys.stdout.write(text)
        return 0
    target: Path = args.write
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
