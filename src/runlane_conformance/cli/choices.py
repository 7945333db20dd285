"""The enumerations command-line options take, in a module that imports nothing heavy.

Typer builds ``--help`` from the commands' signatures, so every type named there is imported
with ``cli.app``; keeping them here keeps ``--help`` from loading the run machinery.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TracebackStyle"]


class TracebackStyle(StrEnum):
    """How much of each failure is shown (pytest's ``--tb``)."""

    SHORT = "short"
    LONG = "long"
    NO = "no"
