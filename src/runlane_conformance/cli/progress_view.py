"""The live per-area progress display, kept whole on a narrow terminal.

rich lays a progress bar out as one grid row; with a long description (the check in flight) and a
fixed 40-cell bar, a 60-column pane has no room left for the bar, the count and the timer, and they
vanish. Here the description column alone gives way: it keeps at least the mark and the longest area
name, and only the check's name is cut with an ellipsis (it changes every moment anyway; the
verdict afterwards is never cut). The bar narrows with the terminal.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from ..catalogue import AREAS

__all__ = ["area_progress"]

#: Room the mark, a space and the longest area name need, so no area name is ever cut.
_AREA_CELLS = 2 + max(len(area) for area in AREAS)
#: The count (``146/146``) and the timer (``0:00:12``), which must always show.
_FIXED_CELLS = 7 + 7


def _bar_width(width: int) -> int:
    """Up to rich's usual 40 cells, less on a narrow terminal, never under 5."""
    return max(5, min(40, width - _AREA_CELLS - _FIXED_CELLS - 12))


def area_progress(console: Console) -> Progress:
    """A progress display for ``console`` (disabled off a terminal) whose bars fit its width."""
    return Progress(
        TextColumn(
            "{task.description}",
            table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis", min_width=_AREA_CELLS),
        ),
        BarColumn(bar_width=_bar_width(console.width)),
        MofNCompleteColumn(table_column=Column(no_wrap=True, justify="right")),
        TimeElapsedColumn(table_column=Column(no_wrap=True)),
        console=console,
        disable=not console.is_terminal,
        expand=True,
    )
