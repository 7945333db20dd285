"""``[tool.runlane]`` in pyproject.toml: run's options from a file, command-line flags first, and
every mistake in the file refused in one line before the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.cli.config import ConfigError, RunConfig, load_run_config, resolve_run

LOST = "conflicts.lost-update"
cli = CliRunner()


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def write(directory: Path, text: str, name: str = "pyproject.toml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_section_sets_every_run_option(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[tool.runlane]\ndriver = "mine"\nprofile = "default"\nworkers = 2\n'
        '[tool.runlane.options]\ndsn = "sqlite://x"\nport = 5432\nfast = true\n'
        f'[tool.runlane.expect-fail]\n"{LOST}" = "not yet"\n',
    )
    config = load_run_config(None, tmp_path)
    settings = resolve_run(config, driver=None, options=(), profile=None, workers=None, expect_fail=())
    assert settings.driver == "mine" and settings.profile == "default" and settings.workers == 2
    assert settings.options == ("dsn=sqlite://x", "port=5432", "fast=true")
    assert settings.expect_fail == (f"{LOST}=not yet",)
    assert settings.source == "pyproject.toml"


def test_command_line_flags_win_per_key() -> None:
    config = RunConfig("pyproject.toml", "mine", {"dsn": "a", "user": "u"}, "default", 2, {LOST: "file"})
    settings = resolve_run(
        config,
        driver="other",
        options=("dsn=b",),
        profile="quick",
        workers=1,
        expect_fail=(f"{LOST}=typed",),
    )
    assert (settings.driver, settings.profile, settings.workers) == ("other", "quick", 1)
    # Later pairs win when options are parsed: the typed dsn comes after the file's.
    assert settings.options == ("dsn=a", "user=u", "dsn=b")
    assert settings.expect_fail == (f"{LOST}=typed",)


def test_without_a_section_the_usual_defaults_apply(tmp_path: Path) -> None:
    write(tmp_path, '[project]\nname = "x"\n')
    settings = resolve_run(
        load_run_config(None, tmp_path), driver="d", options=(), profile=None, workers=None, expect_fail=()
    )
    assert (settings.profile, settings.workers, settings.source) == ("quick", 1, None)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('drivr = "x"', "unknown key 'drivr'; did you mean driver?"),
        ('workers = "2"', "'workers' must be a positive integer"),
        ("workers = 0", "'workers' must be a positive integer"),
        ("workers = true", "'workers' must be a positive integer"),
        ('workers = "many"', "'workers' must be a positive integer or \"auto\""),
        ("driver = 3", "'driver' must be a non-empty string"),
        ("profile = 1", "'profile' must be a string"),
        ('options = "dsn=x"', "'options' must be a table"),
        ("options = { dsn = [1] }", "option 'dsn' must be a string, number or boolean"),
        ('expect-fail = { "a.b" = 1 }', "needs a reason string"),
    ],
)
def test_a_wrong_key_or_type_is_one_clear_error(tmp_path: Path, section: str, message: str) -> None:
    write(tmp_path, f"[tool.runlane]\n{section}\n")
    with pytest.raises(ConfigError, match=r"^pyproject\.toml \[tool\.runlane\]: ") as raised:
        load_run_config(None, tmp_path)
    assert message in str(raised.value)


def test_run_refuses_a_bad_section_with_exit_2_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, '[tool.runlane]\ndriver = "local"\nprofle = "quick"\n')
    monkeypatch.chdir(tmp_path)
    result = invoke("run")
    assert result.exit_code == 2
    assert "unknown key 'profle'; did you mean profile?" in one_error_line(result)
    assert not list(tmp_path.glob(".runlane*")), "nothing may be written for a refused run"


def test_invalid_toml_and_a_missing_config_file_are_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "[tool.runlane\n")
    assert "is not valid TOML" in one_error_line(invoke("run"))
    missing = invoke("run", "--config", "nowhere.toml")
    assert missing.exit_code == 2 and "does not exist" in one_error_line(missing)
    write(tmp_path, '[project]\nname = "x"\n', "other.toml")
    empty = invoke("run", "--config", "other.toml")
    assert empty.exit_code == 2 and "has no [tool.runlane] section" in one_error_line(empty)


def test_run_without_a_driver_anywhere_says_where_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("run")
    assert result.exit_code == 2
    assert "no driver given: pass --driver NAME" in one_error_line(result)


def test_a_file_driver_and_profile_drive_a_real_run_and_a_flag_overrides_the_profile(
    fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(
        tmp_path,
        f'[tool.runlane]\ndriver = "{fake_suite}"\nprofile = "default"\n'
        f'[tool.runlane.options]\nbreak = "{LOST}"\n',
        "runlane.toml",
    )
    from_file = invoke("run", "--config", str(config), "--requirement", LOST, "--seed", "3")
    assert "Hypothesis profile default" in from_file.stdout
    assert from_file.exit_code == 1, from_file.output  # the file's option broke the rule
    overridden = invoke(
        "run", "--config", str(config), "-r", LOST, "--seed", "3", "--profile", "quick", "-o", "break="
    )
    assert "Hypothesis profile quick" in overridden.stdout
    assert overridden.exit_code == 0, overridden.output


def test_workers_may_be_auto_in_the_file(tmp_path: Path) -> None:
    write(tmp_path, '[tool.runlane]\ndriver = "mine"\nworkers = "auto"\n')
    config = load_run_config(None, tmp_path)
    settings = resolve_run(config, driver=None, options=(), profile=None, workers=None, expect_fail=())
    assert settings.workers == "auto"
