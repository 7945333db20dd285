"""Every malformed input the CLI reads is one ``runlane-certify: error:`` line and exit 2, never a traceback.

Each case here once ended in a Python traceback: bytes that are not UTF-8 where TOML or JSON is
expected, and JSON nested deeper than the parser's recursion limit.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.hostile.conftest import ROOT, certify_command, hostile_env

NOT_UTF8 = b"\xff\xfe[tool.runlane]\n"
TOO_DEEP = b"[" * 100_000


@pytest.mark.parametrize(
    ("content", "arguments"),
    [
        pytest.param(NOT_UTF8, ("run", "--config", "{file}"), id="config-not-utf8"),
        pytest.param(TOO_DEEP, ("badge", "{file}", "--svg", "{dir}/badge.svg"), id="badge-report-too-deep"),
        pytest.param(TOO_DEEP, ("report", "--from", "{file}"), id="report-from-too-deep"),
        pytest.param(NOT_UTF8, ("check-history", "{file}"), id="history-not-utf8"),
        pytest.param(TOO_DEEP, ("check-history", "{file}"), id="history-too-deep"),
    ],
)
def test_a_malformed_input_file_is_one_error_line_and_exit_2(
    tmp_path: Path, content: bytes, arguments: tuple[str, ...]
) -> None:
    given = tmp_path / "input"
    given.write_bytes(content)
    filled = [a.format(file=given, dir=tmp_path) for a in arguments]
    done = subprocess.run(
        certify_command(*filled),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("runlane-certify: error: "), done.stderr
    assert not (tmp_path / "badge.svg").exists()
