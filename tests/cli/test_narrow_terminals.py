"""The verdict and the progress stay whole on any terminal width: nothing cut to ``poi…``, no word
broken at the edge, and a zero never coloured like a failure."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from runlane_conformance.catalogue import AREAS
from runlane_conformance.cli.progress_view import area_progress
from runlane_conformance.cli.verdict_view import COUNT_COLUMNS, verdict_view
from runlane_conformance.run.model import AreaSummary

WIDTHS = (60, 80, 100, 140)
GATE_REASON = "profile: cross_process not offered (process-local store)"


def _summary(area: str, index: int) -> AreaSummary:
    gated = 2 if area == "exclusive_selection" else 0
    return AreaSummary(
        area=area,
        passed=10 + index,
        failed=1 if area == "conflicts" else 0,
        gated=gated,
        not_run=0,
        tests_passed=100 + index,
        tests_failed=0,
        tests_gated=gated,
        duration=1.5 + index,
        gate_reasons=((GATE_REASON, gated),) if gated else (),
        inconclusive=0,
    )


SUMMARIES = tuple(_summary(area, index) for index, area in enumerate(AREAS))


def _render(width: int, *, color: bool = False) -> str:
    console = Console(
        width=width,
        file=io.StringIO(),
        force_terminal=color,
        color_system="truecolor" if color else None,
        legacy_windows=False,
    )
    console.print(verdict_view(SUMMARIES, console))
    output = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(output, str)
    return output


@pytest.mark.parametrize("width", WIDTHS)
def test_every_area_status_word_and_count_appears_whole(width: int) -> None:
    output = _render(width)
    lines = output.splitlines()
    assert "…" not in output
    assert all(len(line) <= width for line in lines)
    words = set(re.findall(r"[\w.]+", output))
    for summary in SUMMARIES:
        assert summary.area in words, summary.area
        row = next(line for line in lines if re.search(rf"(^|\s){summary.area}(\s|$)", line))
        assert str(summary.tests_passed + summary.tests_gated) in row or width < 100
    for name, _ in COUNT_COLUMNS:
        assert name in output, name
    for summary in SUMMARIES:
        assert str(summary.passed) in words


@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_is_broken_at_the_edge(width: int) -> None:
    output = _render(width)
    words = set(output.split())
    for word in GATE_REASON.split():
        assert word in words, f"{word!r} broken at {width} columns"


def test_a_wide_terminal_gets_the_table_and_a_narrow_one_the_stacked_blocks() -> None:
    wide = _render(140)
    assert re.search(r"area\s+passed\s+failed\s+not run\s+inconclusive\s+gated\s+checks\s+time", wide)
    narrow = _render(60)
    assert "area " not in narrow.splitlines()[1]
    assert re.search(r"10 passed\s+0 failed\s+0 not run", narrow)


@pytest.mark.parametrize("width", (60, 140))
def test_a_zero_count_is_dim_not_failure_red(width: int) -> None:
    output = _render(width, color=True)
    red = re.compile(r"\x1b\[[0-9;]*38;2;128;0;0m|\x1b\[31m|\x1b\[[0-9;]*;31m")
    # Only conflicts failed: exactly one red count (its 1), no red zero anywhere.
    red_spans = re.findall(r"(\x1b\[[0-9;]*m)([^\x1b]*)", output)
    red_texts = [text.strip() for code, text in red_spans if red.fullmatch(code)]
    assert red_texts and all(text == "1" for text in red_texts if text.isdigit()), red_texts
    assert "0" not in red_texts


@pytest.mark.parametrize("width", WIDTHS)
def test_progress_keeps_the_area_bar_count_and_timer_visible(width: int) -> None:
    console = Console(width=width, file=io.StringIO(), force_terminal=True, color_system=None)
    progress = area_progress(console)
    task = progress.add_task("  exclusive_selection: test_a_very_long_check_name_that_goes_on", total=146)
    progress.update(task, completed=12)
    console.print(progress.make_tasks_table(progress.tasks))
    line = console.file.getvalue().splitlines()[0]  # type: ignore[attr-defined]
    assert "exclusive_selection" in line
    assert "12/146" in line
    assert re.search(r"\d:\d\d:\d\d|-:--:--", line)
    assert "━" in line


@pytest.mark.parametrize("width", WIDTHS)
def test_a_real_run_prints_its_verdict_whole_at_any_width(
    fake_suite: str, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from runlane_conformance.cli.app import app

    monkeypatch.setenv("COLUMNS", str(width))
    result = CliRunner().invoke(app, ["run", "--driver", fake_suite, "--seed", "1"])
    assert result.exit_code in (0, 1), result.output
    verdict = result.stdout[result.stdout.index("Verdict by contract area") :]
    assert "…" not in verdict
    words = set(verdict.split())
    for name in ("passed", "failed", "inconclusive", "gated"):
        assert name in words, name
    assert "run" in words and "not" in words
