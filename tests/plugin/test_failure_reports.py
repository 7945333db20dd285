"""What a driver author sees when a check fails under the plugin, and the set-up the plugin needs.

Each test runs pytest in a subprocess, as a driver repository would.
"""

from __future__ import annotations

import re
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

REPO = Path(__file__).resolve().parents[2]
SUITES = ["-p", "no:cacheprovider", "-p", "no:randomly", "--pyargs", "runlane_conformance.suites"]
CURSOR_MUTANT = ["--runlane-driver", "tests.mutants.m_cursors:cursor_skips_one"]
#: The requirement's property check (two checks, one per way of reading): its deleted-last-entry check
#: fails this mutant as well, four times, and each failure shrinks, which these tests need no more of.
CURSOR_CHECK = [
    "--runlane-requirement",
    "cursors.pages-join-to-one-scan",
    "-k",
    "not after_its_last_entry_is_deleted",
]

TYPO_DRIVER = '''
"""A driver with a typo: get() adds a string to a number."""
from runlane_conformance.harness import load_harness


class Tx:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get(self, keys):
        wanted = len(keys) + "0"  # the typo
        return self.inner.get(keys)[:wanted]


class Driver:
    def __init__(self, inner):
        self.inner = inner
        self.profile = inner.profile

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def transaction(self, callback, *args, **kwargs):
        return self.inner.transaction(lambda tx: callback(Tx(tx)), *args, **kwargs)


class Store:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def connect(self, clock=None):
        return Driver(self.inner.connect(clock=clock))


class Harness:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def open_store(self):
        return Store(self.inner.open_store())


def harness(options):
    return Harness(load_harness("tiny", options))
'''


@pytest.fixture
def importable(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The pytester directory and this repository (for ``tests.mutants``) on the subprocess's path."""
    monkeypatch.setenv("PYTHONPATH", f"{pytester.path}:{REPO}")
    return pytester


def _properties(junit: Path) -> list[tuple[str, str]]:
    root = ET.parse(junit).getroot()
    return [(prop.get("name", ""), prop.get("value", "")) for prop in root.iter("property")]


def test_an_exception_from_the_driver_names_its_own_file_and_line_and_one_reproduce_command(
    importable: pytest.Pytester,
) -> None:
    importable.makepyfile(typo_driver=TYPO_DRIVER)
    junit = importable.path / "junit.xml"
    result = importable.runpytest_subprocess(
        *SUITES,
        "--runlane-driver",
        "typo_driver:harness",
        "--runlane-requirement",
        "point_reads.exact-positions",
        "--hypothesis-seed=77",
        f"--junitxml={junit}",
    )
    result.assert_outcomes(failed=2)
    reproduce = (
        "python -m pytest --pyargs runlane_conformance.suites --runlane-driver typo_driver:harness "
        "--runlane-hypothesis-profile quick --runlane-requirement point_reads.exact-positions "
        "--hypothesis-seed=77"
    )
    result.stdout.fnmatch_lines(
        ["*- runlane -*", "driver frame: typo_driver.py:13 in get", f"reproduce: {reproduce}"]
    )
    assert result.stdout.str().count("reproduce: ") == 2  # one per failed check
    properties = _properties(junit)
    assert properties.count(("runlane_driver_frame", "typo_driver.py:13 in get")) == 2
    assert properties.count(("runlane_reproduce", reproduce)) == 2


def test_the_driver_frame_is_shown_from_the_current_directory_whatever_the_rootdir(
    importable: pytest.Pytester,
) -> None:
    importable.makepyfile(typo_driver=TYPO_DRIVER)
    elsewhere = importable.mkdir("elsewhere")
    result = importable.runpytest_subprocess(
        *SUITES,
        f"--rootdir={elsewhere}",
        "--runlane-driver",
        "typo_driver:harness",
        "--runlane-requirement",
        "point_reads.exact-positions",
    )
    result.assert_outcomes(failed=2)
    # Relative to the rootdir this file is ../typo_driver.py, which the rootdir-based path showed absolute.
    result.stdout.fnmatch_lines(["driver frame: typo_driver.py:13 in get"])


def test_a_wrong_answer_names_no_driver_frame_but_still_how_to_reproduce(importable: pytest.Pytester) -> None:
    result = importable.runpytest_subprocess(*SUITES, *CURSOR_MUTANT, *CURSOR_CHECK)
    result.assert_outcomes(failed=2)
    assert "driver frame:" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["reproduce: python -m pytest --pyargs runlane_conformance.suites *--hypothesis-seed=*"]
    )


def test_the_reproduce_line_of_a_module_factory_driver_runs_from_the_folder_the_run_was_made_in(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No PYTHONPATH: the driver module is found only because it sits in the working folder, as a new
    # author's first driver does. The ``pytest`` script would not look there; the printed line must.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    pytester.makepyfile(typo_driver=TYPO_DRIVER)
    check = ["--runlane-requirement", "point_reads.exact-positions", "--hypothesis-seed=77"]
    first = pytester.run(
        sys.executable, "-m", "pytest", *SUITES, "--runlane-driver", "typo_driver:harness", *check
    )
    lines = [line for line in first.outlines if line.startswith("reproduce: ")]
    assert lines, first.stdout.str()
    words = shlex.split(lines[0].removeprefix("reproduce: "))
    assert words[:3] == ["python", "-m", "pytest"]
    replay = pytester.run(sys.executable, *words[1:], "-p", "no:cacheprovider")
    assert replay.ret == pytest.ExitCode.TESTS_FAILED, replay.stdout.str()
    replay.stdout.fnmatch_lines(["driver frame: typo_driver.py:13 in get"])


def _failure_lines(output: str) -> list[str]:
    # The failure and the falsifying example's draws (record keys carry a fresh environment name).
    # Newer Hypothesis releases annotate a replayed draw ("  # or any other generated value"); the
    # draw itself is what must match.
    lines = [line for line in output.splitlines() if re.match(r"E +(AssertionError:|Draw \d+ |via=)", line)]
    return [re.sub(r"\s+# or any other generated value$", "", line) for line in lines]


def test_a_failure_is_saved_and_the_second_run_replays_the_same_shrunk_example(
    importable: pytest.Pytester,
) -> None:
    examples = importable.path / "examples"
    args = [*SUITES, *CURSOR_MUTANT, *CURSOR_CHECK, "--runlane-examples", str(examples)]
    first = importable.runpytest_subprocess(*args)
    first.assert_outcomes(failed=2)
    # Shown from the directory pytest started in, as a driver frame is.
    first.stdout.fnmatch_lines(["*--runlane-examples examples"])
    saved = sorted(path for path in examples.rglob("*") if path.is_file())
    assert saved, "the failing examples were not saved"
    second = importable.runpytest_subprocess(*args)
    second.assert_outcomes(failed=2)
    assert _failure_lines(second.stdout.str()) == _failure_lines(first.stdout.str())
    assert any(line.lstrip("E ").startswith("Draw ") for line in _failure_lines(second.stdout.str())), (
        "the replayed failure shows no drawn example"
    )


def test_the_example_database_path_is_in_the_header_and_none_disables_it(importable: pytest.Pytester) -> None:
    examples = importable.path / "examples"
    shown = importable.runpytest_subprocess(
        *SUITES,
        "--runlane-driver",
        "tiny",
        "--runlane-area",
        "point_reads",
        "--runlane-examples",
        str(examples),
    )
    shown.stdout.fnmatch_lines([f"runlane examples: {examples} (failures found here replay first;*"])
    off = importable.runpytest_subprocess(
        *SUITES, *CURSOR_MUTANT, *CURSOR_CHECK, "--runlane-examples", "none"
    )
    off.stdout.fnmatch_lines(["runlane examples: none*"])
    assert not examples.exists() or not any(examples.iterdir())


def test_the_default_example_database_lives_under_the_rootdir(importable: pytest.Pytester) -> None:
    importable.makeini("[pytest]\n")
    result = importable.runpytest_subprocess(
        "-p", "no:randomly", "--pyargs", "runlane_conformance.suites", *CURSOR_MUTANT, *CURSOR_CHECK
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"runlane examples: {importable.path / '.runlane' / 'examples'} *"])
    assert any((importable.path / ".runlane" / "examples").iterdir())


SEED_PROBE = """
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("n", range(6))
def test_record_the_seed(request, n):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    Path(f"seed-{worker}").write_text(str(request.config.option.hypothesis_seed))
"""


def test_under_xdist_every_worker_uses_the_seed_printed_even_with_q(importable: pytest.Pytester) -> None:
    importable.makepyfile(test_seed_probe=SEED_PROBE)
    result = importable.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "xdist", "-n", "2", "-q",
        "--pyargs", "runlane_conformance.suites.test_point_reads", "test_seed_probe.py",
        "--runlane-driver", "tiny",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    # The point_reads checks (their number grows with the catalogue) and the probes, all passing.
    assert outcomes.get("passed", 0) > 2, outcomes
    assert not outcomes.get("failed") and not outcomes.get("errors"), outcomes
    closing = re.search(
        r"^runlane: hypothesis seed (\d+) \(rerun with --hypothesis-seed=\1\)$", result.stdout.str(), re.M
    )
    assert closing, result.stdout.str()
    used = {path.name: path.read_text() for path in importable.path.glob("seed-gw*")}
    assert used and set(used.values()) == {closing.group(1)}, used


def test_a_disabled_plugin_is_one_usage_error_naming_the_fix(importable: pytest.Pytester) -> None:
    result = importable.runpytest_subprocess(*SUITES, "-p", "no:runlane_conformance", "--runlane-area", "x")
    # Without the plugin its options do not exist either: pytest says so itself.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = importable.runpytest_subprocess(*SUITES, "-p", "no:runlane_conformance")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: the Runlane conformance suites need the runlane_conformance pytest plugin*"]
    )
    assert "fixture 'leases' not found" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_suites_pulled_into_a_test_tree_without_the_plugin_stop_with_the_hint(
    importable: pytest.Pytester,
) -> None:
    importable.makepyfile(
        test_conformance="from runlane_conformance import import_suites\nimport_suites(globals())\n"
    )
    result = importable.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:runlane_conformance", "-x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "need the runlane_conformance pytest plugin" in output
    assert "add -p runlane_conformance.fixtures.plugin" in output
    assert "fixture 'leases' not found" not in output and "fixture 'driver' not found" not in output


def test_a_driver_test_tree_needs_only_the_one_import_line_no_conftest(importable: pytest.Pytester) -> None:
    importable.makeini("[pytest]\nrunlane_driver = tiny\nrunlane_areas =\n    point_reads\n    mutations\n")
    importable.makepyfile(
        test_conformance="from runlane_conformance import import_suites\nimport_suites(globals())\n"
    )
    result = importable.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) > 16 and "failed" not in outcomes and "errors" not in outcomes, outcomes


def test_the_old_conftest_import_line_still_works_and_warns_to_delete_it(importable: pytest.Pytester) -> None:
    importable.makeini("[pytest]\nrunlane_driver = tiny\nrunlane_areas = point_reads\n")
    importable.makepyfile(
        test_conformance="from runlane_conformance import import_suites\nimport_suites(globals())\n"
    )
    importable.makeconftest("from runlane_conformance.suites.conftest import *  # noqa\n")
    result = importable.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=22, warnings=1)  # the checks of the point_reads area
    result.stdout.fnmatch_lines(
        ["*is no longer needed (the runlane_conformance plugin provides every fixture); delete that line"]
    )


def test_a_declared_known_failure_is_reported_as_known_with_its_reason(importable: pytest.Pytester) -> None:
    result = importable.runpytest_subprocess(
        *SUITES, *CURSOR_MUTANT, *CURSOR_CHECK, "-rx",
        "--runlane-expect-fail", "cursors.pages-join-to-one-scan=cursor skips one, fixing in #12",
    )  # fmt: skip
    result.assert_outcomes(xfailed=2)
    result.stdout.fnmatch_lines(
        ["XFAIL *pages-join-to-one-scan* - known failure (cursor skips one, fixing in #12)"]
    )
    assert result.ret == pytest.ExitCode.OK


def test_a_known_failure_that_passes_fails_the_run(importable: pytest.Pytester) -> None:
    importable.makeini("[pytest]\nrunlane_expect_fail =\n    point_reads.exact-positions = thought broken\n")
    result = importable.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--runlane-requirement", "point_reads.exact-positions"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*expected failure passed: point_reads.exact-positions was declared*(thought broken)*"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_an_unknown_known_failure_is_a_usage_error_naming_close_ids(importable: pytest.Pytester) -> None:
    result = importable.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--runlane-expect-fail", "conflicts.lost-updates=x"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *unknown requirement 'conflicts.lost-updates'; did you mean conflicts.lost-update*"]
    )


SHRINK_SPY = """
import pytest


@pytest.hookimpl(optionalhook=True)
def pytest_runlane_shrinking(item):
    with open("shrinking.log", "a") as log:
        log.write(item.nodeid.rpartition("::")[2] + "\\n")
"""


def test_the_shrinking_hook_is_called_once_per_failing_check_as_it_starts_shrinking(
    importable: pytest.Pytester,
) -> None:
    importable.makepyfile(shrink_spy=SHRINK_SPY)
    result = importable.runpytest_subprocess(
        "-p", "shrink_spy", "-p", "no:cacheprovider", "-p", "no:randomly",
        "--pyargs", "runlane_conformance.suites",
        *CURSOR_MUTANT, *CURSOR_CHECK, "--runlane-requirement", "point_reads.exact-positions",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 2 and outcomes.get("passed", 0) > 0, outcomes
    logged = (importable.path / "shrinking.log").read_text().splitlines()
    assert sorted(logged) == sorted(
        [
            "test_cursor_pages_join_to_one_unpaged_scan[query-cursors.pages-join-to-one-scan]",
            "test_cursor_pages_join_to_one_unpaged_scan[query_candidates-cursors.pages-join-to-one-scan]",
        ]
    )
