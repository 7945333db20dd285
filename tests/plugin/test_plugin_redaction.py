"""The plugin's report header and usage errors land in CI logs: secrets never appear there."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITES = ["-p", "no:cacheprovider", "--pyargs", "runlane_conformance.suites"]
ROOT = Path(__file__).resolve().parents[2]
SECRET_OPTIONS = [
    "--runlane-option",
    "password=hunter2secret",
    "--runlane-option",
    "dsn=postgres://alice:pw123word@db/app",
]


def test_the_header_shows_secret_options_as_stars(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", "local", *SECRET_OPTIONS, "--runlane-area", "point_reads", "--co"
    )
    result.stdout.fnmatch_lines(["runlane driver options: password=*** dsn=***"])
    for secret in ("hunter2secret", "pw123word"):
        assert secret not in result.stdout.str() + result.stderr.str()


def test_a_driver_error_echoing_its_settings_is_redacted_and_cleaned(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    driver = "tests.hostile.text_driver:harness"
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", driver, "--runlane-option", "text_mode=factory", *SECRET_OPTIONS
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "connecting with password *** to ***" in output
    assert "hunter2secret" not in output and "pw123word" not in output
    assert "\x1b" not in output
