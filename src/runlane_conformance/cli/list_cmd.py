"""``runlane-certify list``: the drivers installed under the ``runlane.storage_drivers`` entry points."""

from __future__ import annotations

from rich.text import Text

from .common import begin, console, report_table, shown

__all__ = ["list_drivers"]


def list_drivers() -> None:
    """List the drivers installed under the runlane.storage_drivers entry point group."""
    from ..harness import available_drivers

    begin()
    drivers = available_drivers()
    if not drivers:
        console.print(
            "No drivers installed. A driver registers an entry point in group runlane.storage_drivers."
        )
        return
    table = report_table("Installed drivers")
    table.pad_edge = True
    table.add_column("name", no_wrap=True)
    table.add_column("factory", overflow="fold")  # folded, never cut: it is what --driver accepts too
    table.add_column("distribution", overflow="fold")
    table.add_column("version", no_wrap=True)
    for info in drivers:
        table.add_row(
            Text(shown(info.name)),
            Text(shown(info.target)),
            Text(shown(info.distribution or "?")),
            Text(shown(info.version or "?")),
        )
    console.print(table)
