"""``runlane-certify report``: the capability-and-limits report, run afresh or shown from a file.

Shows the advertised profile, each limit verified at its boundary, the profile checks and the
optional capabilities, in tables laid out to stay readable at 80 columns (or the JSON document).
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, cast

import typer
from rich.text import Text

from ..protocol.isolation import DEFAULT_ISOLATION, Isolation
from ..report.files import OutputFileError, OutputTarget, write_output
from ..safe_text import json_text
from .common import (
    ExitCode,
    IsolationOption,
    OptionsOption,
    ProfileOption,
    SeedOption,
    adopt_orphans,
    begin,
    checked_output_target,
    complete_driver,
    console,
    end_driver_processes,
    report_table,
    shown,
    stop,
    unwrapped,
)
from .execute import allow_local_modules, execute, report_for

if TYPE_CHECKING:
    from ..report.model import ResultsReport
    from ..run.request import RunRequest

__all__ = ["report_command"]

_STATUS_STYLE = {
    "passed": "green",
    "failed": "red",
    "gated": "yellow",
    "not_run": "dim",
    "inconclusive": "yellow",
}


def _status(status: str) -> Text:
    return Text(status.replace("_", " "), style=_STATUS_STYLE.get(status, ""))


def _print_evidence(rows: list[tuple[str, list[str]]]) -> None:
    """Which checks measured each entry, one line per entry, folded (never cut) on a narrow terminal."""
    from rich.table import Table

    console.print(Text("evidence (the requirements whose checks measured it):", style="dim"))
    grid = Table.grid(padding=(0, 1), pad_edge=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, requirements in rows:
        grid.add_row(f" {shown(name)}:", Text(shown(", ".join(requirements)) or "no check found"))
    console.print(grid)


#: The capabilities a report lists, in its order.
_CAPABILITIES: tuple[Literal["append", "exclusive_candidates", "faults"], ...] = (
    "append",
    "exclusive_candidates",
    "faults",
)


def _print_capabilities(document: ResultsReport) -> None:
    """The report command's three tables, laid out to stay readable at 80 columns.

    Names (limits, properties, checks) are never wrapped or cut, so two limits can never shrink to the
    same text; long lists of requirement IDs go under each table instead of into a narrow column.
    """
    from ..fixtures.gating import CAPABILITIES

    profile = document["profile"]
    table = report_table("Advertised profile")
    table.add_column("property", no_wrap=True)
    table.add_column("value", no_wrap=True)
    table.add_column("what it means", overflow="fold")
    for name in ("durability", "clock_authority", "index_consistency"):
        table.add_row(name, shown(profile[name]), "")
    capabilities = document["capabilities"]
    for name in _CAPABILITIES:
        offered = capabilities[name]["offered"]
        table.add_row(shown(name), "offered" if offered else "not offered", Text(CAPABILITIES.get(name, "")))
    console.print(table)

    console.print()
    table = report_table("Limits: advertised vs verified")
    table.add_column("limit", no_wrap=True)
    for column in ("advertised", "verified", "accepted at", "rejected at"):
        table.add_column(column, justify="right" if column != "verified" else "left", overflow="fold")
    for entry in document["limits"]:
        table.add_row(
            shown(entry["name"]),
            str(entry["advertised"]),
            _status(entry["status"]),
            "" if entry["accepted_at"] is None else str(entry["accepted_at"]),
            "" if entry["rejected_at"] is None else str(entry["rejected_at"]),
        )
    console.print(table)
    console.print(
        Text("rejected at: refused with StorageLimitError, and nothing committed.", style="dim"),
        overflow="fold",
    )
    _print_evidence([(entry["name"], entry["requirements"]) for entry in document["limits"]])

    console.print()
    table = report_table("Profile checks")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for check in document["checks"]:
        table.add_row(
            shown(check["name"]),
            _status(check["status"]),
            Text(shown(check.get("reason") or "", limit=200)),
        )
    console.print(table)
    _print_evidence([(check["name"], check["requirements"]) for check in document["checks"]])


def _request(
    driver: str, option: list[str] | None, profile: str, seed: int, isolation: Isolation
) -> RunRequest:
    """The report's request: the limits and profile areas only, one worker; bad options exit 2."""
    from ..harness import HarnessError, parse_driver_options
    from ..run.request import RunRequest

    allow_local_modules(driver)
    try:
        options = parse_driver_options(option or [])
    except HarnessError as error:
        stop(ExitCode.USAGE, error)
    return RunRequest(
        driver,
        options,
        areas=("limits", "profile"),
        hypothesis_profile=profile,
        seed=seed,
        workers=1,
        isolation=isolation,
    )


def report_command(
    driver: Annotated[
        str | None,
        typer.Option(
            "--driver",
            "-d",
            metavar="NAME|MODULE:FACTORY",
            help="Driver to examine: an installed name or module:factory.",
            show_default=False,
            autocompletion=complete_driver,
        ),
    ] = None,
    option: OptionsOption = None,
    profile: ProfileOption = "quick",
    seed: SeedOption = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--report", "--output", help="Write the JSON report here (atomically).", show_default=False
        ),
    ] = None,
    show: Annotated[
        Path | None,
        typer.Option(
            "--from", help="Show an existing report (validated) instead of running.", show_default=False
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report JSON instead of tables.")] = False,
    isolation: IsolationOption = DEFAULT_ISOLATION,
) -> None:
    """The capability-and-limits report: fast, runs only the limits and profile areas.

    Shows the advertised profile, each limit verified at its boundary (accepted
    at N, rejected at N+1 with nothing committed), limit coherence, the
    durability, clock and index-consistency checks, and the optional
    capabilities offered.
    """
    from ..report.badge import isolation_note
    from ..report.files import read_report
    from ..report.schema import ReportError, is_unfinished

    begin()
    if (driver is None) == (show is None):
        stop(ExitCode.USAGE, "give exactly one of --driver (run the checks) or --from (show a saved report)")
    target: OutputTarget | None = None
    if show is not None:
        try:
            document = read_report(show)
        except ReportError as error:
            stop(ExitCode.USAGE, error)
        if is_unfinished(document):
            status = document["run"]["status"]
            stop(ExitCode.USAGE, f"report {str(show)!r} holds no results: the run is marked {status}")
    else:
        assert driver is not None
        target = checked_output_target(output, "report")
        if target is not None and target.is_stdout:
            if as_json:
                stop(ExitCode.USAGE, "--json and --report - would both print the report to standard output")
            console.file = sys.stderr  # standard output carries the report alone
        seed = secrets.randbelow(2**32) if seed is None else seed
        adopt_orphans()
        try:
            result = execute(_request(driver, option, profile, seed, isolation))
        except KeyboardInterrupt:
            typer.echo("runlane-certify: interrupted", err=True)
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        finally:
            end_driver_processes()
        document = report_for(result, "capabilities")
        if target is not None:
            try:
                write_output(target, json_text(document, indent=2) + "\n")
            except OutputFileError as error:
                stop(ExitCode.USAGE, error)
    results = cast("ResultsReport", document)  # an unfinished report was refused above
    if as_json:
        typer.echo(json_text(document, indent=2))
    else:
        console.print(
            Text(f"Capabilities and limits of driver {shown(document['driver']['spec'])}", style="bold"),
            soft_wrap=True,
        )
        _print_capabilities(results)
        console.print(Text(isolation_note(results)), soft_wrap=unwrapped())
        if target is not None and not target.is_stdout:
            console.print(Text(f"report: {shown(output)}"), soft_wrap=True)
    must_failed = results["certification"]["must_failed"]
    raise typer.Exit(int(ExitCode.REQUIREMENT_FAILED if must_failed else ExitCode.CERTIFIED))
