"""Module size: no source module grows past what one reader can hold (issue 36).

A module over the limit mixes concerns and is hard to review; the fix is to
split it by concern, not to raise the limit. Two kinds of file are exempt:
the suites' ``test_*.py`` (one check per requirement, long by nature) and the
catalogue's table data (``contract/table_definitions.py``), which is a table,
not logic.
"""

from __future__ import annotations

from pathlib import Path

import runlane_conformance

#: The most lines a module under ``src/`` may hold.
LIMIT = 900
PACKAGE = Path(runlane_conformance.__file__).parent
#: Table data, exempt by name (relative to the package).
EXEMPT = frozenset({"contract/table_definitions.py"})


def exempt(relative: Path) -> bool:
    """The suites' check modules and the table data may be longer than ``LIMIT``."""
    if relative.as_posix() in EXEMPT:
        return True
    return relative.parts[0] == "suites" and len(relative.parts) == 2 and relative.name.startswith("test_")


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_every_source_module_is_at_most_the_limit() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert modules, f"no module found under {PACKAGE}"
    too_long = [
        f"{path.relative_to(PACKAGE).as_posix()}: {count} lines"
        for path in modules
        if not exempt(path.relative_to(PACKAGE)) and (count := line_count(path)) > LIMIT
    ]
    assert not too_long, f"modules over {LIMIT} lines (split them by concern): " + "; ".join(too_long)


def test_the_exemptions_are_narrow() -> None:
    """Only the check modules and the table data are exempt; a helper module in suites/ is not."""
    assert exempt(Path("suites/test_model.py"))
    assert exempt(Path("contract/table_definitions.py"))
    assert not exempt(Path("suites/_differential_support.py"))
    assert not exempt(Path("history/check.py"))
    assert not exempt(Path("suites/nested/test_x.py"))
    assert (PACKAGE / "contract" / "table_definitions.py").is_file(), (
        "the exempt table data moved: update EXEMPT"
    )
