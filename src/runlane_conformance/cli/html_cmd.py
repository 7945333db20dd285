"""``runlane-certify html``: the HTML page of a saved report (the page ``run --html`` writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from ..report.files import same_file
from .common import ExitCode, begin, console, refuse_output_path, shown, stop, write_or_stop

__all__ = ["html_command"]


def html_command(
    report: Annotated[Path, typer.Argument(help="A report written by `run --report`.", show_default=False)],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="PATH", help="Write the HTML page here.", show_default=False),
    ],
) -> None:
    """Write the HTML page of a saved report: the verdict by area, each failure, each history cycle drawn.

    The same page ``run --html`` writes, made from the JSON alone (validated against the schema
    first), so a report kept from CI can be turned into a page anywhere the toolkit is installed.
    """
    from ..html_report import HtmlUnavailable, render_html
    from ..report.files import read_report
    from ..report.schema import ReportError

    begin()
    if same_file(output, report):
        stop(ExitCode.USAGE, f"the HTML page {str(output)!r} is the report being read; choose another path")
    refuse_output_path(output, "HTML report")
    try:
        document = read_report(report)
    except ReportError as error:
        stop(ExitCode.USAGE, f"refusing report {str(report)!r}: {error}")
    try:
        page = render_html(document, report_name=report.name)
    except HtmlUnavailable as error:
        stop(ExitCode.USAGE, error)
    write_or_stop(output, page, "HTML report")
    console.print(Text(f"html:   {shown(str(output))}"), soft_wrap=True)
