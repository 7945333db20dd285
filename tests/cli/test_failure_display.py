"""What a driver author sees of a failure: the whole message, the driver frame, one reproduce line,
repeated errors once, and pytest's --tb / --maxfail / -x / -v switches."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.cli.failures import MESSAGE_LINES, error_text, failure_key
from runlane_conformance.cli.progress_view import LiveProgress
from runlane_conformance.run.model import CheckResult, Outcome
from runlane_conformance.runner import (
    CheckShrinking,
    CheckStarted,
    CollectionFinished,
    RunEvent,
    TestFinished,
    certify_driver,
    run_suites,
)
from tests.cli.fake_driver import DRIVER_FRAME, REPRODUCE, SHRINK_NOTE

cli = CliRunner()
LOST = "conflicts.lost-update"


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def failed_section(stdout: str) -> str:
    return stdout.partition("Failed requirements")[2]


def test_a_failure_shows_every_line_of_its_message_and_the_driver_frame(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-o", f"break={LOST}", "-o", "history=4", "-a", "conflicts")
    assert result.exit_code == 1, result.output
    section = failed_section(result.stdout)
    for line in ("final state: counter=1", "T1 returned: 1", "T2 returned: 1", "step 3: T2 wrote counter=3"):
        assert line in section
    assert f"driver frame: {DRIVER_FRAME}" in section
    assert f"note:         {SHRINK_NOTE}" in section


def test_a_long_message_is_capped_with_a_count_of_the_lines_left_out(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-o", f"break={LOST}", "-o", "history=100", "-a", "conflicts")
    section = failed_section(result.stdout)
    assert "step 0:" in section and "step 99:" not in section
    # 5 lines of message head + 100 history lines, of which MESSAGE_LINES are shown.
    assert f"... ({105 - MESSAGE_LINES} more lines; the report has them all)" in section


def test_each_failed_requirement_has_one_reproduce_line_not_one_per_check(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-o", f"break={LOST}", "-o", "history=2", "-a", "conflicts")
    section = failed_section(result.stdout)
    assert len(result.stdout.split(LOST)) > 2  # the requirement has two failed checks
    assert section.count("reproduce:") == 1
    assert section.count("pytest:") == 1
    assert f"--requirement {LOST}" in section
    # The plugin's own replay command for the check is used when the check recorded one.
    assert f"pytest:       {REPRODUCE}" in section


def test_one_error_in_every_check_is_shown_once_naming_each_requirement_once(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-o", "typo=true")
    assert result.exit_code == 1
    error = "TypeError: transaction() takes 2 positional arguments but 3 were given"
    # Once as it happened (above the progress lines), once in the summary.
    assert result.stdout.count(error) == 2, result.stdout
    section = failed_section(result.stdout)
    assert "same error in " in section and " checks of " in section
    (listing,) = [line for line in section.splitlines() if line.strip().startswith("requirements:")]
    named = listing.partition(":")[2].split(", ")
    assert len(named) == len(set(named)) > 5
    assert section.count("reproduce:") == 1


def test_failures_are_printed_as_they_happen_not_only_at_the_end(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-o", "break=limits.point-reads-boundary", "-a", "limits")
    out = result.stdout
    live = out.index("\u2717 limits.point-reads-boundary: AssertionError: the fake driver breaks")
    assert live < out.index("limits: ") < out.index("Failed requirements")


def test_tb_no_gives_one_line_per_failed_requirement(fake_suite: str) -> None:
    broken = "limits.point-reads-boundary,conflicts.lost-update"
    result = invoke("run", "-d", fake_suite, "-o", f"break={broken}", "-o", "history=9", "--tb", "no")
    assert result.exit_code == 1
    lines = [line for line in failed_section(result.stdout).splitlines()[1:] if line.strip()]
    failed = lines[: lines.index(next(line for line in lines if line.startswith("NOT CERTIFIED")))]
    assert [line.split(" (")[0] for line in failed] == [
        f"\u2717 {LOST}",
        "\u2717 limits.point-reads-boundary",
    ]
    assert "reproduce:" not in result.stdout and "step 1:" not in result.stdout


def test_tb_long_shows_the_traceback_text(fake_suite: str) -> None:
    args = ("run", "-d", fake_suite, "-o", f"break={LOST}", "-o", "history=2", "-a", "conflicts")
    short, long = invoke(*args), invoke(*args, "--tb", "long")
    assert "raise AssertionError(" not in short.stdout
    assert "raise AssertionError(" in long.stdout
    assert "test_conflicts.py" in failed_section(long.stdout)


def test_exitfirst_stops_at_the_first_failed_check_and_the_run_never_certifies(
    fake_suite: str, tmp_path: Path
) -> None:
    path = tmp_path / "report.json"
    broken = "limits.point-reads-boundary,conflicts.lost-update"
    result = invoke("run", "-d", fake_suite, "-o", f"break={broken}", "-x", "--report", str(path))
    assert result.exit_code == 1, result.output
    assert "STOPPED after 1 failed check (--maxfail 1)" in result.stdout
    assert "requirements did not run: the run stopped after 1 failed check (--maxfail 1)" in result.stdout
    document = json.loads(path.read_text())
    assert document["run"]["status"] == "stopped"
    assert document["run"]["checks"]["failed"] == 1
    assert document["run"]["checks"]["not_run"] > 0
    assert document["certification"]["certified"] is False
    badge = invoke("badge", str(path), "--svg", str(tmp_path / "badge.svg"))
    assert badge.exit_code == 2
    assert "stopped run, which is never a certification" in badge.stderr


def test_maxfail_n_lets_n_checks_fail_before_stopping(fake_suite: str) -> None:
    result = certify_driver(
        fake_suite, {"break": "limits.point-reads-boundary,conflicts.lost-update"}, max_failures=2, seed=3
    )
    assert result.status.value == "stopped"
    assert sum(t.outcome.value == "failed" for t in result.tests) == 2
    not_run = [t for t in result.tests if t.outcome.value == "not_run"]
    assert not_run and all(
        "stopped after 2 failed checks (--maxfail 2)" in (t.message or "") for t in not_run
    )


def test_a_passing_run_with_exitfirst_still_certifies(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-x")
    assert result.exit_code == 0, result.output
    assert "CERTIFIED" in result.stdout


def test_verbose_prints_each_checks_outcome_as_it_ends(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-a", "conflicts", "-v")
    assert result.exit_code == 0, result.output
    outcomes = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  PASSED ")]
    assert len(outcomes) == 3
    assert (
        "  PASSED   conflicts.lost-update  test_lost_update_scenario[conflicts.lost-update]" in result.stdout
    )


def test_requirement_and_area_work_with_the_new_switches(fake_suite: str) -> None:
    for scope in (("-r", LOST), ("-a", "conflicts")):
        result = invoke("run", "-d", fake_suite, "-o", f"break={LOST}", *scope, "--tb", "no", "-x", "-v")
        assert result.exit_code == 1
        assert "STOPPED after 1 failed check" in result.stdout
        assert result.stdout.count("  FAILED   conflicts.lost-update") == 1


def test_an_area_and_a_requirement_with_nothing_in_common_is_a_usage_error(fake_suite: str) -> None:
    result = invoke("run", "-d", fake_suite, "-r", LOST, "-a", "limits")
    assert result.exit_code == 2
    assert "no requirement given with --requirement is in the areas given with --area" in result.stderr


def _events(run: Any, fake_suite: str) -> list[RunEvent]:
    seen: list[RunEvent] = []
    run(
        fake_suite,
        {"break": LOST, "shrink": "true"},
        areas=["conflicts"],
        seed=1,
        listener=seen.append,
    )
    return seen


def test_a_check_that_shrinks_a_failure_says_so_before_it_ends(fake_suite: str) -> None:
    for run in (certify_driver, run_suites):
        events = _events(run, fake_suite)
        prop = next(e.nodeid for e in events if isinstance(e, CheckShrinking))
        assert "test_lost_update_property" in prop
        order = [type(e) for e in events if getattr(e, "nodeid", getattr(e, "test", None)) is not None]
        kinds = [
            type(e)
            for e in events
            if (isinstance(e, CheckStarted | CheckShrinking) and e.nodeid == prop)
            or (isinstance(e, TestFinished) and e.test.nodeid == prop)
        ]
        assert order and kinds[0] is CheckStarted and kinds[-1] is TestFinished
        assert CheckShrinking in kinds[1:-1]


def test_the_live_display_says_which_check_is_shrinking_a_failure() -> None:
    live = LiveProgress()
    live(CollectionFinished({"conflicts": 2}))
    nodeid = "suites/test_conflicts.py::test_lost_update_property[conflicts.lost-update]"
    live(CheckStarted(nodeid, "conflicts", LOST))
    live(CheckShrinking(nodeid, "conflicts", LOST))
    (task,) = live.progress.tasks
    assert task.description.endswith("conflicts: shrinking a failure in test_lost_update_property")


def test_the_driver_frame_is_shown_from_the_current_directory_and_absolute_outside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Path(__file__).resolve().parents[2]
    typo = "tests.hostile.drivers:typo"
    args = ["run", "--driver", typo, "--requirement", "point_reads.exact-positions", "--examples", "none"]
    monkeypatch.chdir(repo)
    inside = invoke(*args)
    assert inside.exit_code == 1, inside.output
    assert "driver frame: tests/hostile/drivers.py:" in inside.stdout, inside.stdout
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))
    outside = invoke(*args)
    assert outside.exit_code == 1, outside.output
    assert f"driver frame: {repo / 'tests' / 'hostile' / 'drivers.py'}:" in outside.stdout, outside.stdout


@pytest.mark.parametrize(
    "example_header",
    ["Falsifying example: test_it(", "Failing test case: test_it(", "Failing explicit example: test_it("],
)
def test_one_error_with_different_examples_is_one_failure_whatever_hypothesis_calls_the_example(
    example_header: str,
) -> None:
    # Hypothesis 6.155 and later releases name the failing input differently; either way, the same
    # error found with two different inputs must be grouped (and printed live) once.
    def check(value: int) -> CheckResult:
        text = f"TypeError: takes 2 positional arguments\n{example_header}\n    value={value},\n)"
        return CheckResult(
            nodeid=f"suite.py::test_{value}",
            requirement_id="point_reads.exact-positions",
            area="point_reads",
            outcome=Outcome.FAILED,
            duration=0.0,
            message=text,
            full_message=text,
        )

    assert error_text(check(1)) == "TypeError: takes 2 positional arguments"
    assert failure_key(check(1)) == failure_key(check(2))
