"""``runlane-certify requirements``: the requirement catalogue, from the installed toolkit itself.

A driver author needs the IDs for ``--requirement`` and ``--expect-fail`` and the rule each one
names; a wheel has no ``docs/`` folder, so the command reads the same catalogue the run uses.
Wide terminals get a table; narrow ones get one block per requirement (ID and level on a line, the
summary wrapped under it), so no ID is ever cut or broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console, Group, RenderableType
from rich.text import Text

from ..catalogue import AREAS, Requirement, all_requirements
from ..contract.errors import RunlaneError
from ..safe_text import json_text
from ..suggest import did_you_mean
from .common import ExitCode, begin, complete_area, console, stop

__all__ = [
    "UnknownAreaError",
    "requirements_command",
    "requirements_json",
    "requirements_view",
    "select_requirements",
]

#: Below this width the table would squeeze summaries into a sliver: stack instead.
_TABLE_MIN_WIDTH = 100


class UnknownAreaError(RunlaneError, ValueError):
    """``--area`` named no contract area; the message is one line with a close-match hint."""


def select_requirements(areas: Sequence[str]) -> list[Requirement]:
    """The catalogue's requirements in ``areas`` (all when empty), in report order (area, then ID)."""
    for area in areas:
        if area not in AREAS:
            hint = did_you_mean(area, AREAS, otherwise=f"areas: {', '.join(AREAS)}")
            raise UnknownAreaError(f"unknown area {area!r}{hint}")
    order = {area: index for index, area in enumerate(AREAS)}
    chosen = [r for r in all_requirements().values() if not areas or r.area in areas]
    return sorted(chosen, key=lambda r: (order[r.area], r.id))


def requirements_json(chosen: Sequence[Requirement]) -> str:
    """The requirements as a JSON array (one object per requirement, every catalogue field)."""
    rows: list[dict[str, Any]] = [
        {
            "id": r.id,
            "area": r.area,
            "level": r.level.value,
            "summary": r.summary,
            "clause": r.clause,
            "capability": r.capability,
        }
        for r in chosen
    ]
    return json_text(rows, indent=2) + "\n"


def _level(requirement: Requirement) -> Text:
    return Text(requirement.level.value, style="bold" if requirement.level.value == "MUST" else "")


def _needs(requirement: Requirement) -> str:
    return f" (needs {requirement.capability})" if requirement.capability else ""


def requirements_view(chosen: Sequence[Requirement], width: int) -> RenderableType:
    """The listing for a ``width``-column terminal: a table when it fits, stacked blocks otherwise."""
    # Imported here: registering the command (every --help) must not load rich's table machinery.
    from rich.padding import Padding
    from rich.table import Table

    if width >= _TABLE_MIN_WIDTH:
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        table.add_column("requirement", no_wrap=True)
        table.add_column("level", no_wrap=True)
        table.add_column("summary", overflow="fold")
        for r in chosen:
            table.add_row(Text(r.id), _level(r), Text(r.summary + _needs(r)))
        return table
    blocks: list[RenderableType] = []
    for r in chosen:
        blocks.append(Text.assemble((r.id, "bold"), " ", _level(r), overflow="fold"))
        blocks.append(Padding(Text(r.summary + _needs(r)), (0, 0, 0, 2), expand=False))
    return Group(*blocks)


def print_requirements(console: Console, chosen: Sequence[Requirement]) -> None:
    """Print the listing on ``console``, with a closing count."""
    console.print(requirements_view(chosen, console.width))
    must = sum(r.level.value == "MUST" for r in chosen)
    console.print(
        Text(f"{len(chosen)} requirements ({must} MUST, {len(chosen) - must} SHOULD)", style="dim"),
        soft_wrap=True,
    )


def requirements_command(
    area: Annotated[
        list[str] | None,
        typer.Option(
            "--area",
            "-a",
            metavar="AREA",
            help="List only this contract area's requirements (repeatable).",
            show_default=False,
            autocompletion=complete_area,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON array (id, area, level, summary, ...).")
    ] = False,
) -> None:
    """List the requirement IDs, with level and summary: what --requirement and --expect-fail take."""
    begin()
    try:
        chosen = select_requirements(area or ())
    except UnknownAreaError as error:
        stop(ExitCode.USAGE, error)
    if as_json:
        typer.echo(requirements_json(chosen), nl=False)
    else:
        print_requirements(console, chosen)
