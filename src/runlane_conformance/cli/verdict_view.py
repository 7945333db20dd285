"""The verdict by contract area, laid out for the terminal it is printed on.

Nothing in it is ever cut: an area name, a status word or a count shortened to ``poi…`` would make
the verdict unreadable exactly where it matters. When the whole table fits it is a table whose
columns never wrap; when it does not (a 60-column pane), each area becomes a short block whose
counts are packed whole onto lines. Gate reasons are long prose, so they go under the counts as
word-wrapped lines instead of squeezing a column. A zero is dim, never coloured like a failure:
colour marks only what happened.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..run.model import AreaSummary
from .wording import count

__all__ = ["COUNT_COLUMNS", "verdict_view"]

TITLE = "Verdict by contract area (requirements)"

#: The count columns in order, with the colour a non-zero count of each gets.
COUNT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("passed", "green"),
    ("failed", "red"),
    ("not run", "red"),
    ("inconclusive", "yellow"),
    ("gated", "yellow"),
)


def _counts(summary: AreaSummary) -> tuple[int, ...]:
    return (summary.passed, summary.failed, summary.not_run, summary.inconclusive, summary.gated)


def _checks(summary: AreaSummary) -> int:
    return summary.tests_passed + summary.tests_failed + summary.tests_gated + summary.tests_inconclusive


def _count(value: int, style: str) -> Text:
    return Text(str(value), style=style if value else "dim")


def _count_cells(summary: AreaSummary) -> list[Text]:
    return [_count(value, style) for value, (_, style) in zip(_counts(summary), COUNT_COLUMNS, strict=True)]


def _table(summaries: Sequence[AreaSummary], shown: Callable[[str], str]) -> Table:
    table = Table(title=TITLE, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("area", no_wrap=True)
    for name, _ in COUNT_COLUMNS:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("checks", justify="right", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    for summary in summaries:
        table.add_row(
            Text(shown(summary.area)),
            *(
                _count(value, style)
                for value, (_, style) in zip(_counts(summary), COUNT_COLUMNS, strict=True)
            ),
            str(_checks(summary)),
            f"{summary.duration:.2f}s",
        )
    return table


def _packed(pieces: Sequence[Text], width: int, indent: int) -> list[Text]:
    """``pieces`` joined by two spaces, a new line started before a piece that would not fit whole."""
    lines: list[Text] = []
    line = Text(" " * indent)
    for piece in pieces:
        if line.cell_len > indent and line.cell_len + 2 + piece.cell_len > width:
            lines.append(line)
            line = Text(" " * indent)
        if line.cell_len > indent:
            line.append("  ")
        line.append_text(piece)
    lines.append(line)
    return lines


def _stacked(summaries: Sequence[AreaSummary], shown: Callable[[str], str], width: int) -> Group:
    lines: list[RenderableType] = [Text(TITLE, style="italic")]
    for summary in summaries:
        lines.append(
            Text.assemble(
                (shown(summary.area), "bold"),
                f"  {count(_checks(summary), 'check')}, {summary.duration:.2f}s",
            )
        )
        pieces = [
            Text.assemble(_count(value, style), f" {name}")
            for value, (name, style) in zip(_counts(summary), COUNT_COLUMNS, strict=True)
        ]
        lines.extend(_packed(pieces, width, indent=2))
    return Group(*lines)


def _gate_reasons(summaries: Sequence[AreaSummary], shown: Callable[[str], str]) -> list[RenderableType]:
    reasons: list[RenderableType] = [
        Padding(
            Text(f"{shown(summary.area)} ({number}): {shown(reason)}", overflow="fold"),
            (0, 0, 0, 2),
            expand=False,
        )
        for summary in summaries
        for reason, number in summary.gate_reasons
    ]
    if not reasons:
        return []
    return [Text("gate reasons (what the driver's profile does not offer):", style="dim"), *reasons]


def _natural_width(table: Table) -> int:
    """The width ``table`` takes when nothing squeezes it (rich would shrink no_wrap columns to fit)."""
    wide = Console(width=10_000, file=io.StringIO(), color_system=None, legacy_windows=False)
    with wide.capture() as captured:
        wide.print(table)
    return max((cell_len(line.rstrip()) for line in captured.get().splitlines()), default=0)


def verdict_view(
    summaries: Sequence[AreaSummary], console: Console, shown: Callable[[str], str] = str
) -> RenderableType:
    """The verdict for ``console``'s width: the table if it fits unwrapped, else stacked blocks.

    ``shown`` cleans driver-influenced text (gate reasons quote the profile) for the terminal.
    """
    table = _table(summaries, shown)
    fits = _natural_width(table) <= console.width
    body: RenderableType = table if fits else _stacked(summaries, shown, console.width)
    return Group(body, *_gate_reasons(summaries, shown))
