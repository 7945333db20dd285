"""Listing the catalogue from the CLI, close-match suggestions for every name a user types, and
help screens without value placeholders on plain flags."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from runlane_conformance.catalogue import AREAS, all_requirements
from runlane_conformance.cli.app import app
from runlane_conformance.suggest import REQUIREMENTS_HINT, close_matches

cli = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return cli.invoke(app, list(args), env=env)


def error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_requirements_lists_every_id_with_level_and_summary() -> None:
    result = invoke("requirements")
    assert result.exit_code == 0, result.output
    catalogue = all_requirements()
    for rid, requirement in catalogue.items():
        assert rid in result.stdout
        assert requirement.summary.split()[0] in result.stdout
    assert f"{len(catalogue)} requirements" in result.stdout


@pytest.mark.parametrize("width", ["60", "140"])
def test_requirements_never_cuts_an_id(width: str) -> None:
    result = invoke("requirements", "--area", "exclusive_selection", env={"COLUMNS": width})
    assert result.exit_code == 0, result.output
    words = set(result.stdout.split())
    for rid in all_requirements():
        if rid.startswith("exclusive_selection."):
            assert rid in words, rid
    assert "…" not in result.stdout


def test_requirements_json_is_one_object_per_requirement_of_the_area() -> None:
    result = invoke("requirements", "--area", "sealing", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    expected = sorted(rid for rid in all_requirements() if rid.startswith("sealing."))
    assert [row["id"] for row in rows] == expected
    assert {row["area"] for row in rows} == {"sealing"}
    assert all(row["level"] in ("MUST", "SHOULD") and row["summary"] for row in rows)


def test_requirements_with_an_unknown_area_suggests_the_close_one_and_exits_2() -> None:
    result = invoke("requirements", "--area", "sealin")
    assert result.exit_code == 2
    assert error_line(result) == "runlane-certify: error: unknown area 'sealin'; did you mean sealing?"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--requirement", "sealing.reads-refused-after-nw"], "did you mean sealing.reads-refused-after-now"),
        (["--area", "conflict"], "did you mean conflicts?"),
        (["--profile", "quik"], "did you mean quick?"),
        (
            ["--expect-fail", "sealing.reads-refused-after-nw=why"],
            "did you mean sealing.reads-refused-after-now",
        ),
    ],
)
def test_a_mistyped_name_gets_a_close_match(args: list[str], expected: str) -> None:
    result = invoke("run", "--driver", "local", *args)
    assert result.exit_code == 2
    assert expected in error_line(result)


def test_a_mistyped_driver_gets_a_close_match() -> None:
    result = invoke("run", "--driver", "locl")
    assert result.exit_code == 2
    assert "did you mean local?" in error_line(result)


def test_a_requirement_with_nothing_close_points_to_the_requirements_command_not_a_file() -> None:
    result = invoke("run", "--driver", "local", "--requirement", "zzz.qqq")
    line = error_line(result)
    assert REQUIREMENTS_HINT in line
    assert "docs/" not in line


def test_a_rule_name_typed_without_its_area_still_finds_it() -> None:
    assert (
        close_matches("reads-refused-after-now", all_requirements())[0] == "sealing.reads-refused-after-now"
    )
    assert close_matches("excluisve_selection", AREAS) == ["exclusive_selection"]


def _commands() -> list[list[str]]:
    commands: dict[str, object] = getattr(typer.main.get_command(app), "commands")  # noqa: B009
    return [[], *([name] for name in sorted(commands))]


@pytest.mark.parametrize("command", _commands())
def test_help_shows_no_value_placeholder_on_a_plain_flag(command: list[str]) -> None:
    result = invoke(*command, "--help", env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert "<str>" not in result.stdout
    for line in result.stdout.splitlines():
        if "--help" in line:
            assert "Show this message" in line
