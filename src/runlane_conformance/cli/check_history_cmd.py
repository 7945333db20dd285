"""``runlane-certify check-history``: re-check a saved concurrent history without the driver."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from .common import ExitCode, begin, console, shown, stop

__all__ = ["check_history_command"]


def check_history_command(
    history: Annotated[
        Path, typer.Argument(help="A history saved by a failing histories.* check.", show_default=False)
    ],
) -> None:
    """Re-check a saved concurrent history without the driver: every anomaly with its shortest cycle.

    Exit 0 when the history shows no anomaly, 1 when it shows one, 2 when the
    file is not a history this toolkit reads.
    """
    from ..history import HistoryFormatError, check_history, load

    begin()
    try:
        recorded = load(history)
    except (OSError, HistoryFormatError, ValueError, RecursionError) as error:
        stop(ExitCode.USAGE, f"cannot read history {str(history)!r}: {error}")
    verdict = check_history(recorded)
    for line in verdict.render(recorded).splitlines():
        console.print(Text(shown(line, limit=None)), soft_wrap=True)
    raise typer.Exit(int(ExitCode.CERTIFIED if verdict.ok else ExitCode.REQUIREMENT_FAILED))
