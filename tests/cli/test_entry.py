"""``runlane-certify --version`` answers without importing the CLI app; everything else reaches the app."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runlane_conformance.cli import app as app_module
from runlane_conformance.cli import entry
from runlane_conformance.cli.version import version_text


def _entry(*args: str, probe: str = "") -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        "from runlane_conformance.cli.entry import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "finally:\n"
        f"    {probe or 'pass'}\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_version_prints_the_same_line_as_the_app_and_imports_neither_typer_nor_pytest() -> None:
    probe = "print(sorted(m for m in ('typer', 'rich', 'pytest', 'hypothesis') if m in sys.modules))"
    result = _entry("--version", probe=probe)
    assert result.returncode == 0, result.stderr
    version_line, loaded = result.stdout.splitlines()
    assert version_line == version_text()
    assert loaded == "[]"


def test_any_other_command_line_goes_to_the_app_and_keeps_its_usage_error() -> None:
    result = _entry("--version", "--no-such-flag")
    assert result.returncode == 2
    assert "runlane-certify: error:" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_entry_point_hands_its_arguments_to_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    monkeypatch.setattr(app_module, "main", seen.append)
    entry.main(["list"])
    assert seen == [["list"]]


_HEAVY = "print(sorted(m for m in ('pytest', 'hypothesis', 'jsonschema') if m in sys.modules))"


@pytest.mark.parametrize("args", [("--help",), ("run", "--help"), ("report", "--help")])
def test_help_is_answered_without_importing_pytest_hypothesis_or_jsonschema(args: tuple[str, ...]) -> None:
    result = _entry(*args, probe=_HEAVY)
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
    assert result.stdout.splitlines()[-1] == "[]"


def test_importing_the_cli_app_loads_neither_pytest_nor_hypothesis_nor_jsonschema() -> None:
    code = f"import sys\nimport runlane_conformance.cli.app\n{_HEAVY}\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
