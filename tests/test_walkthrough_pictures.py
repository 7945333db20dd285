"""The pictures in docs/walkthrough.md show what the CLI prints today, not what it printed once.

The certified-run picture is compared with a fresh run of the same command (same seed, same width)
by structure, never by timings: how many checks ran, which areas the verdict lists and in what
order, the verdict table's columns and the certification level. A change to any of them (a new
check, a new column, a new capability) fails here until ``python scripts/capture.py`` is run again.
"""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from runlane_conformance.catalogue import AREAS

ROOT = Path(__file__).resolve().parent.parent
STALE = "docs/images/terminal-run.svg is stale: run `python scripts/capture.py` and commit the pictures"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class RunPicture:
    """What a certified run's output says, without its timings."""

    checks_run: int
    checks_total: int
    areas: tuple[str, ...]
    columns: str
    level: str


def structure(text: str) -> RunPicture:
    text = text.replace("\xa0", " ")
    lines = text.splitlines()
    counted = re.search(r"(\d+) of (\d+) checks? run", text)
    level = re.search(r"CERTIFIED: \S+ at level (\S+)", text)
    assert counted is not None and level is not None, text[-2000:]
    header = next(line for line in lines if line.split()[:1] == ["area"])
    rows = [line.split() for line in lines]
    areas = tuple(cells[0] for cells in rows if len(cells) == 8 and cells[0] in AREAS and cells[1].isdigit())
    return RunPicture(
        int(counted.group(1)), int(counted.group(2)), areas, " ".join(header.split()), level.group(1)
    )


def svg_text(path: Path) -> str:
    """The terminal text of a rich SVG export: its ``<text>`` spans placed at their columns, line by
    line (rich leaves out spans of blanks, so each span's ``x`` says where it starts)."""
    svg = path.read_text(encoding="utf-8")
    spans = re.findall(
        r'<text [^>]*x="([0-9.]+)"[^>]*textLength="([0-9.]+)"[^>]*-line-(\d+)\)"[^>]*>(.*?)</text>', svg
    )
    assert spans, f"{path} holds no terminal text"
    cell = min(float(length) / len(html.unescape(text)) for _, length, _, text in spans if text)
    lines: dict[int, str] = {}
    for x, _, number, content in spans:
        column = round(float(x) / cell)
        line = lines.get(int(number), "")
        lines[int(number)] = line.ljust(column) + html.unescape(content)
    return "\n".join(lines[number].replace("\xa0", " ") for number in sorted(lines))


@pytest.fixture(scope="module")
def capture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capture", ROOT / "scripts" / "capture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["capture"] = module
    spec.loader.exec_module(module)
    return module


def test_the_certified_run_picture_matches_a_fresh_run(capture: ModuleType, tmp_path: Path) -> None:
    picture = next(c for c in capture.CAPTURES if c.name == "run")
    code, output = capture.run_cli(picture.argv, picture.width, tmp_path)
    assert code == picture.expect_exit, output[-2000:]
    fresh = structure(ANSI.sub("", output))
    assert fresh.checks_run == fresh.checks_total
    try:
        shown = structure(svg_text(ROOT / "docs" / "images" / "terminal-run.svg"))
    except (AssertionError, StopIteration):
        pytest.fail(f"{STALE} (it no longer has the shape the CLI prints)")
    assert shown == fresh, STALE


def test_a_picture_shows_the_verdict_table_with_every_area(capture: ModuleType) -> None:
    shown = structure(svg_text(ROOT / "docs" / "images" / "terminal-run.svg"))
    assert set(shown.areas) == set(AREAS)
    assert shown.columns.startswith("area passed failed not run")
