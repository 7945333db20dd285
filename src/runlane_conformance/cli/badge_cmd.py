"""``runlane-certify badge``: an offline SVG badge and a shields.io endpoint from a verified report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from ..report.files import same_file
from ..safe_text import json_text
from .common import ExitCode, begin, console, refuse_output_path, shown, stop, unwrapped, write_or_stop

__all__ = ["badge"]


def badge(
    report: Annotated[Path, typer.Argument(help="A report written by `run --report`.", show_default=False)],
    svg: Annotated[Path | None, typer.Option(help="Write an SVG badge here.", show_default=False)] = None,
    endpoint: Annotated[
        Path | None,
        typer.Option(help="Write a shields.io endpoint JSON document here.", show_default=False),
    ] = None,
) -> None:
    """Make an offline SVG badge and/or a shields.io endpoint JSON from a report.

    The report is validated against the schema, then its verdict is recomputed
    from its own requirement outcomes and this toolkit's catalogue. A report
    whose claim does not follow from its content, that comes from a partial or
    interrupted run, or that names another toolkit version is refused (exit 2).
    """
    from ..report.badge import badge_for, endpoint_json, isolation_note, render_svg
    from ..report.files import read_report
    from ..report.schema import ReportError
    from ..report.verify import verified_report

    begin()
    if svg is None and endpoint is None:
        stop(ExitCode.USAGE, "give --svg PATH and/or --endpoint PATH")
    for path, what in ((svg, "SVG badge"), (endpoint, "endpoint JSON")):
        if path is not None and same_file(path, report):
            # Writing the badge would destroy the very report it vouches for.
            stop(ExitCode.USAGE, f"the {what} {str(path)!r} is the report being read; choose another path")
        refuse_output_path(path, what)
    if svg is not None and endpoint is not None and same_file(svg, endpoint):
        stop(ExitCode.USAGE, f"--svg and --endpoint name the same file {str(svg)!r}")
    try:
        document = verified_report(read_report(report))
    except ReportError as error:
        stop(ExitCode.USAGE, f"refusing report {str(report)!r}: {error}")
    made = badge_for(document)
    if svg is not None:
        write_or_stop(svg, render_svg(made), "SVG badge")
    if endpoint is not None:
        write_or_stop(endpoint, json_text(endpoint_json(made), indent=2) + "\n", "endpoint JSON")
    console.print(Text(f"badge: {shown(made.label)} | {shown(made.message)} ({made.color})"), soft_wrap=True)
    console.print(Text(isolation_note(document)), soft_wrap=unwrapped())
