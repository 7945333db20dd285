"""The finish of runlane-certify: version, -h, wording, 80-column tables and shell completion."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import runlane_conformance
from runlane_conformance import StorageLimits, StorageProfile
from runlane_conformance.cli import common
from runlane_conformance.cli.app import app
from runlane_conformance.cli.progress_view import LiveProgress
from runlane_conformance.cli.wording import count

cli = CliRunner()
SCRIPT = Path(sys.executable).parent / "runlane-certify"


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def command_names() -> list[str]:
    """Every command of the app (typer may vendor click, so the group is read by shape)."""
    commands: dict[str, object] = getattr(typer.main.get_command(app), "commands")  # noqa: B009
    return sorted(commands)


# --- --version and -h -------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_toolkit_version_and_exits_0(flag: str) -> None:
    result = invoke(flag)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"runlane-certify {runlane_conformance.__version__} ")
    assert result.stdout.count("\n") == 1


def test_version_wins_over_a_command_given_after_it() -> None:
    result = invoke("--version", "run")
    assert result.exit_code == 0
    assert "runlane-certify" in result.stdout and "Usage" not in result.stdout


@pytest.mark.parametrize("command", [[], *([name] for name in command_names())])
def test_dash_h_is_the_same_help_as_dash_dash_help(command: list[str]) -> None:
    short, long = invoke(*command, "-h"), invoke(*command, "--help")
    assert short.exit_code == long.exit_code == 0, short.output
    assert short.stdout == long.stdout
    assert "Usage:" in short.stdout


def test_the_app_help_names_version_and_completion() -> None:
    result = invoke("--help")
    for text in ("--version", "--install-completion", "--show-completion", "-h"):
        assert text in result.stdout


# --- wording ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "expected"),
    [(0, "0 checks"), (1, "1 check"), (2, "2 checks"), (330, "330 checks")],
)
def test_counts_use_the_singular_only_for_one(number: int, expected: str) -> None:
    assert count(number, "check") == expected


def test_an_irregular_plural_is_given_explicitly() -> None:
    assert count(1, "entry", "entries") == "1 entry"
    assert count(3, "entry", "entries") == "3 entries"


@pytest.mark.parametrize("durability", ["process", "durable"])
def test_the_profile_line_never_repeats_a_word(durability: str) -> None:
    profile = StorageProfile(
        durability=durability,
        clock_authority="client",
        index_consistency="strong",
        limits=StorageLimits(),
        exclusive_candidates=False,
        append=True,
    )
    line = common.describe_profile(profile)
    words = line.replace(",", " ").replace(";", " ").split()
    assert all(a != b for a, b in itertools.pairwise(words)), line
    assert f"durability {durability}" in line and "offers append" in line


def test_a_run_of_one_check_says_check_not_checks(fake_suite: str) -> None:
    result = invoke("run", "--driver", fake_suite, "--area", "append", "--seed", "3")
    assert result.exit_code in (0, 1), result.output  # a restricted run may refuse to certify
    (summary,) = [line for line in result.stdout.splitlines() if "; seed 3" in line]
    assert summary.startswith("1 of 1 check run in "), summary


def test_a_single_must_failure_is_counted_in_the_singular(fake_suite: str) -> None:
    result = invoke("run", "--driver", fake_suite, "-o", "break=limits.point-reads-boundary")
    assert result.exit_code == 1, result.output
    assert "1 MUST requirement failed" in result.stdout
    assert "requirement(s)" not in result.stdout


# --- report at 80 columns ---------------------------------------------------------------------------


def test_the_report_tables_fit_80_columns_and_keep_every_name_whole(
    fake_suite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(common.console, "_width", None)
    result = invoke("report", "--driver", fake_suite)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    too_wide = [line for line in lines if len(line.rstrip()) > 80]
    assert too_wide == []
    assert "\u2026" not in result.stdout, "a cell was cut with an ellipsis"
    for name in StorageLimits.__dataclass_fields__:
        rows = [line for line in lines if line.startswith(name + " ")]
        assert len(rows) == 1, f"{name} is not one whole row of the limits table:\n{result.stdout}"
    for capability in ("append", "exclusive_candidates"):
        assert any(line.startswith(capability + " ") for line in lines)


# --- shell completion -------------------------------------------------------------------------------


def complete(words: str) -> list[str]:
    """What the installed script answers to bash's completion request for ``words``."""
    script = SCRIPT if SCRIPT.exists() else Path(shutil.which("runlane-certify") or SCRIPT)
    parts = words.split(" ")
    environment = dict(
        os.environ,
        _RUNLANE_CERTIFY_COMPLETE="complete_bash",
        COMP_WORDS=words,
        COMP_CWORD=str(len(parts) - 1),
    )
    done = subprocess.run(
        [str(script)], env=environment, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.split()


def test_completion_offers_the_commands() -> None:
    assert complete("runlane-certify rep") == ["report"]
    assert complete("runlane-certify re") == ["report", "requirements"]


def test_completion_offers_installed_drivers_areas_and_profiles() -> None:
    assert "local" in complete("runlane-certify run --driver ")
    assert complete("runlane-certify run --area exclusive") == ["exclusive_selection"]
    assert complete("runlane-certify report --profile th") == ["thorough"]
    assert complete("runlane-certify run --requirement sealing.reads-refused-after-n") == [
        "sealing.reads-refused-after-now"
    ]


def test_the_completion_script_is_typer_s_for_the_requested_shell() -> None:
    result = invoke("--show-completion", "bash")
    assert result.exit_code == 0, result.output
    assert "_RUNLANE_CERTIFY_COMPLETE" in result.stdout


def test_the_driver_list_fits_80_columns_without_cutting_a_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(common.console, "_width", None)
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert "\u2026" not in result.stdout
    assert all(len(line.rstrip()) <= 80 for line in result.stdout.splitlines())
    assert any(line.split()[:1] == ["local"] for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    ("options", "expected"),
    [(["colour=blue"], "does not know option colour;"), (["colour=blue", "size=1"], "options colour, size;")],
)
def test_an_unknown_local_option_is_named_in_the_right_number(options: list[str], expected: str) -> None:
    args = [part for option in options for part in ("--option", option)]
    result = invoke("report", "--driver", "local", *args)
    assert result.exit_code == 2
    assert expected in result.stderr
    assert "option(s)" not in result.stderr


# --- live progress ---------------------------------------------------------------------------------


def test_an_area_whose_checks_were_all_gated_says_so_with_the_reason_never_ok(fake_suite: str) -> None:
    result = invoke("run", "--driver", fake_suite, "--seed", "3")
    assert result.exit_code == 0, result.output
    lines = {line.split(":")[0].strip(): line for line in result.stdout.splitlines() if ": " in line}
    assert "1 check, all gated (profile: append not offered) in " in lines["\u25cb append"]
    assert "5 checks, ok in " in lines["\u2713 limits"]


def test_the_live_display_names_the_check_in_flight_and_times_each_area_from_its_first_check() -> None:
    from runlane_conformance.run.model import CheckResult, Outcome
    from runlane_conformance.runner import CheckStarted, CollectionFinished, TestFinished

    live = LiveProgress()
    live(CollectionFinished({"limits": 2, "profile": 1}))
    tasks = {task.description.strip(): task for task in live.progress.tasks}
    assert not tasks["limits"].started and not tasks["profile"].started
    live(CheckStarted("x/test_limits.py::test_exactly_at_the_limit[limits.a-b]", "limits", "limits.a-b"))
    (limits,) = [task for task in live.progress.tasks if "limits" in task.description]
    assert limits.started and "test_exactly_at_the_limit" in limits.description
    (profile,) = [task for task in live.progress.tasks if "profile" in task.description]
    assert not profile.started
    check = CheckResult(
        "x/test_limits.py::test_exactly_at_the_limit[limits.a-b]", "limits.a-b", "limits", Outcome.PASSED, 0.1
    )
    live(TestFinished(check))
    assert live.done["limits"] == 1 and live.failed["limits"] == 0
