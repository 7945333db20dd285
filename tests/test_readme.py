"""The README's first lines are the two set-up commands CI runs, as written, in a fresh environment."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / "scripts" / "readme_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commands: list[str] = module.setup_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    return commands


def test_the_readme_opens_with_exactly_two_setup_commands() -> None:
    commands = _setup_commands()
    assert len(commands) == 2, f"the README's first bash block should hold two commands, found {commands}"


def test_the_first_command_installs_and_certifies_the_reference_driver() -> None:
    first = _setup_commands()[0]
    assert first.startswith("pip install") and "runlane-certify run --driver local" in first, first


def test_the_second_command_installs_every_example_the_tests_use_and_runs_pytest() -> None:
    second = _setup_commands()[1]
    assert second.startswith("pip install") and second.rstrip().endswith("pytest -n auto"), second
    used_by_tests = ["tiny", "sqlite", "postgres", "redis"]
    missing = [name for name in used_by_tests if f"-e examples/{name}" not in second]
    assert not missing, f"the tests use examples {missing}, which the README's test command does not install"
