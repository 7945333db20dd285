"""Every assertion in the suites says, in words, what it expected and what came back.

A failure is the only thing a driver author sees of a check. ``assert 100 ==
(100 + 1)`` tells them nothing about which rule they broke, so each
``assert`` statement in ``runlane_conformance/suites`` must carry a message.
The test reads the suites' source (no driver is run) and names every
assertion that lacks one, with file and line, so the rule cannot erode as
checks are added. An assertion of a parenthesised ``(test, message)`` pair
(always true) is caught too. The same holds for an expected error: a bare
``pytest.raises`` says only "DID NOT RAISE" when the driver accepts the call,
so the suites use ``_messages.refused`` (or ``propagated``), whose failure
names what was done, what was expected and the requirement it breaks.
Checks also must not carry a fixed ``timeout`` marker: their time comes from
the Hypothesis profile's budget, which a fixed number would cap (a thorough
run would fail a correct driver for being slow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import runlane_conformance.suites as suites
from runlane_conformance.catalogue import Requirement, RequirementLevel, all_requirements
from runlane_conformance.suites._messages import CALLBACK_ERROR_RULE, propagated, refused

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


def _bare_raises(path: Path) -> list[str]:
    """Every ``pytest.raises`` in ``path`` (called as ``pytest.raises(...)`` or imported by name), by line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "raises"
            and isinstance(node.value, ast.Name)
            and node.value.id == "pytest"
        ):
            found.append((node.lineno, "pytest.raises"))
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            found.extend(
                (node.lineno, "from pytest import raises") for alias in node.names if alias.name == "raises"
            )
    return [f"{path.name}:{line}: {text}" for line, text in sorted(found)]


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


def test_every_expected_error_in_the_suites_names_the_rule_an_acceptance_breaks() -> None:
    bare = [line for path in SOURCES for line in _bare_raises(path)]
    assert not bare, (
        f"{len(bare)} bare pytest.raises in the suites: when the driver raises nothing it says only "
        "'DID NOT RAISE'. Use suites._messages.refused(error, what=..., rule=REQUIREMENT) instead (or "
        "propagated(error, what=...) for an error the check's own callback raises):\n" + "\n".join(bare)
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
        "@pytest.mark.timeout(300)\ndef test_y():\n    pass\n"
        "def test_z():\n    with pytest.raises(ValueError):\n        pass\n"
        "from pytest import raises\n",
        encoding="utf-8",
    )
    assert _bare_assertions(sample) == [
        "test_sample.py:4: assert 100 == 100 + 1",
        "test_sample.py:5: assert (1 == 2, 'x')",
    ], _bare_assertions(sample)
    assert _fixed_timeouts(sample) == ["test_sample.py:6: pytest.mark.timeout(300)"], _fixed_timeouts(sample)
    assert _bare_raises(sample) == [
        "test_sample.py:10: pytest.raises",
        "test_sample.py:12: from pytest import raises",
    ], _bare_raises(sample)


# -- refused / propagated: the replacement for pytest.raises --------------------------------------------

# Built directly, not declared: the catalog holds only the suites' own requirements.
SAMPLE_RULE = Requirement(
    "limits.sample-boundary",
    RequirementLevel.MUST,
    "Limits",
    "A record of exactly max_record_bytes is stored; one byte more is refused with StorageLimitError.",
)


class _Expected(Exception):
    pass


class _Other(Exception):
    pass


def test_an_accepted_call_fails_with_what_was_done_what_was_expected_and_the_rule() -> None:
    with (
        pytest.raises(AssertionError) as failure,
        refused(_Expected, what="the check created a record of max_record_bytes + 1 bytes", rule=SAMPLE_RULE),
    ):
        pass
    assert str(failure.value) == (
        "the check created a record of max_record_bytes + 1 bytes, and the driver accepted it (nothing was "
        "raised); expected _Expected. This breaks limits.sample-boundary: A record of exactly "
        "max_record_bytes is stored; one byte more is refused with StorageLimitError."
    ), str(failure.value)


def test_the_accepted_clause_and_every_expected_type_are_named() -> None:
    with (
        pytest.raises(AssertionError) as failure,
        refused((_Expected, _Other), what="x", accepted="core went ahead", rule=SAMPLE_RULE),
    ):
        pass
    assert "x, and core went ahead; expected _Expected or _Other." in str(failure.value), str(failure.value)


def test_the_expected_error_is_caught_and_handed_back_like_pytest_raises() -> None:
    raised = _Expected("refused")
    with refused(_Expected, what="x", rule=SAMPLE_RULE) as caught:
        raise raised
    assert caught.value is raised, f"expected the raised error back, got {caught.value!r}"
    assert caught.type is _Expected, f"expected the info to name _Expected, got {caught.type!r}"


def _driver_raises_other() -> None:
    raise _Other("the driver failed another way")


def test_an_error_of_another_type_propagates_unchanged_with_the_drivers_frame() -> None:
    with pytest.raises(_Other) as escaped, refused(_Expected, what="x", rule=SAMPLE_RULE):
        _driver_raises_other()
    assert escaped.traceback[-1].name == "_driver_raises_other", (
        f"the innermost frame must stay the raiser's, got {escaped.traceback[-1].name}"
    )


def test_a_swallowed_callback_error_points_at_the_callback_error_rule() -> None:
    with (
        pytest.raises(AssertionError) as failure,
        propagated(_Expected, what="the callback staged a write and raised"),
    ):
        pass
    text = str(failure.value)
    assert text.startswith(
        "the callback staged a write and raised, but driver.transaction() returned normally"
    ), text
    assert f"({CALLBACK_ERROR_RULE}); this check cannot judge its own rule" in text, text


def test_the_callback_error_rule_named_by_propagated_is_in_the_catalog() -> None:
    catalog = all_requirements()
    assert CALLBACK_ERROR_RULE in catalog, f"{CALLBACK_ERROR_RULE} is not a catalogued requirement"
