"""scripts/capture.py turns the real CLI's output into the SVG pictures docs/walkthrough.md shows."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

import runlane_conformance

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def capture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capture", ROOT / "scripts" / "capture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["capture"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_real_cli_is_captured_with_its_colours(capture: ModuleType, tmp_path: Path) -> None:
    code, output = capture.run_cli(["--version"], 80, tmp_path)
    assert code == 0
    assert f"runlane-certify {runlane_conformance.__version__}" in output
    svg = capture.render_svg("runlane-certify --version", output, 80, "version")
    assert svg.startswith("<svg") and "runlane-certify" in svg


def test_a_capture_shows_the_command_and_keeps_ansi_colours(capture: ModuleType, tmp_path: Path) -> None:
    def fake_cli(argv: Sequence[str], width: int, cwd: Path) -> tuple[int, str]:
        assert cwd == tmp_path and width == 80
        return 0, "\x1b[1;32mCERTIFIED\x1b[0m: fake at level core\n"

    picture = capture.Capture("demo", ("run", "--driver", "fake"), 0, width=80)
    svg = capture.make(picture, tmp_path, run=fake_cli)
    assert "runlane-certify&#160;run&#160;--driver&#160;fake" in svg
    assert "CERTIFIED" in svg
    assert "fill: #" in svg or "fill:#" in svg  # the colour survived as an SVG style


def test_an_unexpected_exit_code_is_an_error_not_a_picture(capture: ModuleType, tmp_path: Path) -> None:
    def crashing_cli(argv: Sequence[str], width: int, cwd: Path) -> tuple[int, str]:
        return 3, "the run broke\n"

    with pytest.raises(RuntimeError, match="exit 3, expected 0"):
        capture.make(capture.Capture("demo", ("run",), 0), tmp_path, run=crashing_cli)


def test_every_picture_the_walkthrough_shows_is_made_by_the_script(capture: ModuleType) -> None:
    page = (ROOT / "docs" / "walkthrough.md").read_text(encoding="utf-8")
    shown = {line.split("(images/")[1].rstrip(")") for line in page.splitlines() if "(images/" in line}
    made = {f"terminal-{c.name}.svg" for c in capture.CAPTURES} | {
        k for c in capture.CAPTURES for k in c.keep
    }
    assert shown == made
    for name in shown:
        assert (ROOT / "docs" / "images" / name).is_file(), f"run python scripts/capture.py ({name})"
