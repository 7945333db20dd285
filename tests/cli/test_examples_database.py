"""runlane-certify keeps failing examples, so the reproduce lines it prints replay them at once.

The fake suite's ``conftest.lost-update`` property fails for n >= 3 when the driver breaks that
requirement; Hypothesis saves the shrunk example into the run's database and replays it first.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli import run_cmd
from runlane_conformance.cli.app import app
from runlane_conformance.fixtures.driver_frame import path_from_here

cli = CliRunner()
LOST = "conflicts.lost-update"
REPO = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def _failing(fake_suite: str, *extra: str) -> list[str]:
    return ["run", "--driver", fake_suite, "--option", f"break={LOST}", "--requirement", LOST, *extra]


def _saved(directory: Path) -> list[Path]:
    return [path for path in directory.rglob("*") if path.is_file()] if directory.exists() else []


def _falsifying(stdout: str) -> str:
    """The failing input, as the fake property's own message states it.

    Hypothesis's header for the example ("Falsifying example" or "Failing test case", by release) is
    not read: the check names its input in its own words, which no Hypothesis release changes.
    """
    section = stdout.partition("Failed requirements")[2]
    match = re.search(r"this example: (n=\d+)", section)
    assert match, section
    return match.group(1)


def _printed(stdout: str, label: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.strip().startswith(f"{label}:")]
    return line.strip().removeprefix(f"{label}:").strip()


def test_a_failure_is_saved_and_the_printed_reproduce_line_replays_it(
    fake_suite: str, tmp_path: Path
) -> None:
    examples = tmp_path / "examples"
    report = tmp_path / "report.json"
    first = invoke(*_failing(fake_suite, "--seed", "3", "--examples", str(examples), "--report", str(report)))
    assert first.exit_code == 1, first.output
    assert _saved(examples), "the failing example was not saved"
    assert first.stdout.count(f"examples: {examples}") == 1
    assert json.loads(report.read_text())["run"]["examples"] == str(examples)
    reproduce = _printed(first.stdout, "reproduce")
    assert f"--examples {examples}" in reproduce
    assert f"--runlane-examples {examples}" in _printed(first.stdout, "pytest")
    # The printed line itself, as the author pastes it.
    words = shlex.split(reproduce)
    assert words[:2] == ["runlane-certify", "run"]
    again = invoke(*words[1:])
    assert again.exit_code == 1, again.output
    assert _falsifying(again.stdout) == _falsifying(first.stdout)
    assert "lost update with at least 3 writers" in again.stdout.partition("Failed requirements")[2]
    assert _saved(examples)


def test_a_run_that_saves_nothing_creates_no_database_directory(fake_suite: str, tmp_path: Path) -> None:
    examples = tmp_path / "deeper" / "examples"
    result = invoke("run", "--driver", fake_suite, "--requirement", LOST, "--examples", str(examples))
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "deeper").exists()


def test_examples_none_keeps_nothing_and_says_so(fake_suite: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = invoke(*_failing(fake_suite, "--examples", "none", "--report", str(report)))
    assert result.exit_code == 1, result.output
    assert "examples: none" in result.stdout
    assert "--examples" not in _printed(result.stdout, "reproduce")
    assert "--runlane-examples" not in _printed(result.stdout, "pytest")
    assert json.loads(report.read_text())["run"]["examples"] is None
    assert not _saved(run_cmd.DEFAULT_EXAMPLES_DIR)


def test_by_default_failures_go_under_the_current_directory_and_the_lines_need_no_path(
    fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_cmd, "DEFAULT_EXAMPLES_DIR", Path(".runlane") / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    result = invoke(*_failing(fake_suite, "--seed", "4"))
    assert result.exit_code == 1, result.output
    assert _saved(tmp_path / ".runlane" / "examples")
    assert "examples: .runlane/examples" in result.stdout
    assert "--examples" not in _printed(result.stdout, "reproduce")


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.write_text("x"), "it is a file"),
        (lambda p: (p.parent / "file").write_text("x"), "file' is a file"),
    ],
    ids=["a file", "a file in the way"],
)
def test_an_unusable_database_path_is_refused_before_the_run_in_one_line(
    fake_suite: str, tmp_path: Path, make: Any, says: str
) -> None:
    target = tmp_path / "examples"
    make(target)
    given = target if target.exists() else tmp_path / "file" / "examples"
    result = invoke("run", "--driver", fake_suite, "--examples", str(given))
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("runlane-certify: error: cannot use example database") and says in line, line
    assert not result.stdout.strip()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_database_directory_is_refused_before_the_run(fake_suite: str, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        result = invoke("run", "--driver", fake_suite, "--examples", str(locked / "examples"))
    finally:
        locked.chmod(0o700)
    assert result.exit_code == 2, result.output
    assert "is not writable" in result.stderr


def test_paths_are_shown_from_the_current_directory_when_below_it(tmp_path: Path) -> None:
    assert path_from_here(str(tmp_path / "a" / "b.py"), str(tmp_path)) == os.path.join("a", "b.py")
    assert path_from_here(str(tmp_path / "b.py"), str(tmp_path / "a")) == str(tmp_path / "b.py")
    assert path_from_here(str(tmp_path), str(tmp_path)) == str(tmp_path)


def test_no_output_shows_an_empty_hypothesis_blob(fake_suite: str, tmp_path: Path) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    result = invoke(*_failing(fake_suite, "--report", str(report), "--junit", str(junit), "--tb", "long"))
    assert result.exit_code == 1, result.output
    failures = [f for r in json.loads(report.read_text())["requirements"] for f in r.get("failures", [])]
    assert failures and all(f["hypothesis_blob"] is None for f in failures)
    for text in (result.stdout, junit.read_text()):
        assert "hypothesis:" not in text and "reproduce_failure" not in text
