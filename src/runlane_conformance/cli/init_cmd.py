"""``runlane-certify init``: write a new driver package that certifies as generated.

The command only parses and reports; ``runlane_conformance.scaffold`` decides
what is written and guarantees that a refused or failed ``init`` writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..safe_text import one_line
from ..scaffold import DriverStyle, ScaffoldError, plan_scaffold, write_scaffold

__all__ = ["init"]

_USAGE = 2


def init(
    path: Annotated[
        Path,
        typer.Argument(
            help="A new or empty directory to write the package into.", metavar="PATH", show_default=False
        ),
    ],
    name: Annotated[
        str,
        typer.Option(
            "--name",
            metavar="NAME",
            help="The driver's name (lower-case letters, digits, underscores), as given to --driver.",
            show_default=False,
        ),
    ],
    style: Annotated[
        DriverStyle,
        typer.Option(
            "--style",
            help="lock: one lock per transaction. optimistic: read sets and scanned ranges validated at "
            "commit, the callback replayed when it lost a race.",
            case_sensitive=False,
        ),
    ] = DriverStyle.LOCK,
) -> None:
    """Write a driver package: pyproject with the entry point, harness, in-memory driver, tests, README
    and a CI workflow. It installs and certifies as generated; then replace its dictionary with your
    storage.

    A PATH that is not new or empty, or an invalid NAME, is refused with one line (exit 2, nothing written).
    """
    try:
        plan = plan_scaffold(name, style)
        written = write_scaffold(path, plan)
    except ScaffoldError as error:
        typer.echo(f"runlane-certify: error: {one_line(error)}", err=True)
        raise typer.Exit(_USAGE) from None
    shown = one_line(path)
    typer.echo(f"Wrote {plan.distribution} ({plan.style.value} style) to {shown}:")
    for relative in written:
        typer.echo(f"  {relative}")
    typer.echo("Next:")
    typer.echo(f"  cd {shown} && pip install -e .    # with runlane-conformance installed first")
    typer.echo(f"  runlane-certify run --driver {plan.driver} --profile quick")
    typer.echo("  pytest")
