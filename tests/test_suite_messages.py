"""Every assertion in the suites says, in words, what it expected and what came back.

A failure is the only thing a driver author sees of a check. ``assert 100 ==
(100 + 1)`` tells them nothing about which rule they broke, so each
``assert`` statement in ``runlane_conformance/suites`` must carry a message.
The test reads the suites' source (no driver is run) and names every
assertion that lacks one, with file and line, so the rule cannot erode as
checks are added. An assertion of a parenthesised ``(test, message)`` pair
(always true) is caught too. Checks also must not carry a fixed ``timeout`` marker:
their time comes from the Hypothesis profile's budget, which a fixed number
would cap (a thorough run would fail a correct driver for being slow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import runlane_conformance.suites as suites

SUITES = Path(suites.__file__).parent
SOURCES = sorted(SUITES.glob("*.py"))


def _bare_assertions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.name}:{node.lineno}: assert {ast.unparse(node.test)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert) and (node.msg is None or isinstance(node.test, ast.Tuple))
    ]


def _fixed_timeouts(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "timeout"
            and ast.unparse(node.func.value) == "pytest.mark"
        ):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_suites_are_where_this_test_looks() -> None:
    names = {path.name for path in SOURCES}
    assert "test_conflicts.py" in names and "test_limits.py" in names, (
        f"expected the suite modules in {SUITES}, found {sorted(names)}"
    )


def test_every_assertion_in_the_suites_says_what_was_expected_and_what_came_back() -> None:
    bare = [line for path in SOURCES for line in _bare_assertions(path)]
    assert not bare, (
        f"{len(bare)} assertion(s) in the suites have no message; give each one that names what was "
        "expected, what came back and the rule (see suites/_messages.py):\n" + "\n".join(bare)
    )


def test_no_check_carries_a_fixed_time_limit() -> None:
    fixed = [line for path in SOURCES for line in _fixed_timeouts(path)]
    assert not fixed, (
        "checks with a fixed timeout marker; a check's time comes from the profile's budget "
        "(hypothesis_profiles.check_budget, read with _hypothesis_support.check_seconds):\n"
        + "\n".join(fixed)
    )


def test_the_guard_finds_a_bare_assertion(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\n"
        "def test_x():\n    assert 1 == 1, 'fine'\n    assert 100 == 100 + 1\n    assert (1 == 2, 'x')\n"
        "@pytest.mark.timeout(300)\ndef test_y():\n    pass\n",
        encoding="utf-8",
    )
    assert _bare_assertions(sample) == [
        "test_sample.py:4: assert 100 == 100 + 1",
        "test_sample.py:5: assert (1 == 2, 'x')",
    ], _bare_assertions(sample)
    assert _fixed_timeouts(sample) == ["test_sample.py:6: pytest.mark.timeout(300)"], _fixed_timeouts(sample)
