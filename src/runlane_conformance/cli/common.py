"""What every command shares: the console, exit codes, one-line errors, and the shared options.

Only what defining the commands needs is imported here: ``--help`` and ``--version`` must not pay
for pytest, Hypothesis, jsonschema or the contract. Each command imports the rest when it runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from ..catalogue import AREAS
from ..fixtures.defaults import HYPOTHESIS_PROFILES
from ..protocol.isolation import Isolation
from ..report.files import (
    OutputFileError,
    OutputTarget,
    check_output_path,
    output_target,
    write_text_atomically,
)
from ..safe_text import MESSAGE_LIMIT, one_line, redact_options, redact_text, safe_str, secret_values

if TYPE_CHECKING:
    from rich.table import Table

    from ..contract.values import StorageProfile
    from ..run.certification import Verdict

__all__ = [
    "EXIT_CODES",
    "ExitCode",
    "Stopped",
    "begin",
    "console",
    "exit_code_for",
    "shown",
    "stop",
]


class ExitCode(IntEnum):
    """What ``runlane-certify`` returns; CI pipelines branch on these."""

    CERTIFIED = 0
    REQUIREMENT_FAILED = 1
    USAGE = 2
    BROKEN = 3
    #: Nothing failed, but a check could not finish inside its deadline: no verdict (never certified).
    INCONCLUSIVE = 4
    INTERRUPTED = 130


def exit_code_for(verdict: Verdict) -> ExitCode:
    """The exit code of a run that reached a verdict: a lookup in ``EXIT_CODES``, nothing more."""
    return EXIT_CODES[verdict.value]


#: Every verdict's exit code (``run.certification.Verdict``, by value so this module stays light).
#: A partial run exits 0 when everything that ran passed; a stale ``--expect-fail`` (``not_clean``)
#: is exit 1 like pytest's strict xfail; nothing failed but something could not finish is 4.
EXIT_CODES: Mapping[str, ExitCode] = {
    "certified": ExitCode.CERTIFIED,
    "certified_should_failed": ExitCode.REQUIREMENT_FAILED,
    "not_certified": ExitCode.REQUIREMENT_FAILED,
    "inconclusive": ExitCode.INCONCLUSIVE,
    "partial_passed": ExitCode.CERTIFIED,
    "partial_failed": ExitCode.REQUIREMENT_FAILED,
    "partial_inconclusive": ExitCode.INCONCLUSIVE,
    "stopped": ExitCode.REQUIREMENT_FAILED,
    "interrupted": ExitCode.INTERRUPTED,
    "not_clean": ExitCode.REQUIREMENT_FAILED,
}

#: The one console every command prints through (re-pointed at the current stdout per command).
console = Console(highlight=False)

PASS_MARK, FAIL_MARK, SKIP_MARK = "\u2713", "\u2717", "\u25cb"


def begin() -> None:
    # Bind the console to the stdout of *this* invocation (a test runner may have swapped it), and keep
    # it bound while pytest's own output is diverted during the run.
    console.file = sys.stdout
    # Everything shown is cleaned (safe_text), but a character the terminal's encoding lacks must
    # still never turn a verdict into a traceback.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            with contextlib.suppress(Exception):
                reconfigure(errors="backslashreplace")
    # Logs (CI, pipes) have no terminal width; rich's default of 80 columns would fold the tables.
    console.width = 140 if not console.is_terminal and "COLUMNS" not in os.environ else console.size.width


def unwrapped() -> bool:
    """Whether a long line is left whole (a log: grep finds it) rather than word-wrapped (a terminal,
    which would otherwise break it mid-word at its edge)."""
    return not console.is_terminal


def shown(text: object, options: Mapping[str, str] | None = None, limit: int | None = MESSAGE_LIMIT) -> str:
    """Driver-supplied ``text`` as one terminal-safe line: secrets of ``options`` and URL credentials
    redacted, escape sequences and control characters neutralised, capped at ``limit`` characters
    (``None``: not capped; see ``safe_text``)."""
    return one_line(redact_text(safe_str(text), secret_values(options or {})), limit)


class Stopped(typer.Exit):
    """An exit whose one error line is already on stderr; ``message`` keeps it for an unfinished report."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code)
        self.message = message


def stop(code: ExitCode, message: object, options: Mapping[str, str] | None = None) -> NoReturn:
    """Print one clean, redacted line on stderr and exit with ``code``."""
    line = " ".join(shown(message, options).split())
    typer.echo(f"runlane-certify: error: {line}", err=True)
    raise Stopped(int(code), line)


#: True when this process is the ``runlane-certify`` program itself (``app.main``), not a caller that
#: invoked the app in its own process (a test's ``CliRunner``): only then may the CLI adopt orphans
#: and end every process below it.
_OWNS_PROCESS = False


def own_process() -> None:
    """Record that this process is the program itself (``app.main`` calls it first)."""
    global _OWNS_PROCESS
    _OWNS_PROCESS = True


def adopt_orphans() -> None:
    """Become the subreaper of whatever the driver starts (see ``run.reaper``), when we own the process."""
    from ..run.reaper import become_subreaper

    if _OWNS_PROCESS:
        become_subreaper()


def end_driver_processes() -> None:
    """End every process still below this one (the driver's daemons included) before any output."""
    from ..run.reaper import end_descendants

    if _OWNS_PROCESS:
        end_descendants()


def refuse_output_path(path: Path | None, what: str) -> None:
    """Refuse an output target before the run, not after it (see ``output_files``)."""
    if path is None:
        return
    try:
        check_output_path(path, what)
    except OutputFileError as error:
        stop(ExitCode.USAGE, error)


def checked_output_target(path: Path | None, what: str) -> OutputTarget | None:
    """The target ``path`` names (``-`` or stdout itself: standard output), refused before the run."""
    if path is None:
        return None
    try:
        return output_target(path, what)
    except OutputFileError as error:
        stop(ExitCode.USAGE, error)


def write_or_stop(path: Path, text: str, what: str) -> None:
    try:
        write_text_atomically(path, text, what)
    except OutputFileError as error:
        stop(ExitCode.USAGE, error)


def options_text(options: Mapping[str, str]) -> str:
    """Driver options as ``k=v, ...`` with secrets shown as ``***``, cleaned for the terminal."""
    return ", ".join(f"{key}={value}" for key, value in redact_options(options).items())


def describe_profile(profile: StorageProfile) -> str:
    offered = ", ".join(profile.capabilities())
    return (
        f"durability {profile.durability.value}, clock authority {profile.clock_authority.value}, "
        f"index consistency {profile.index_consistency.value}; "
        + (f"offers {offered}" if offered else "no optional capabilities")
    )


def report_table(title: str) -> Table:
    # A light box leaves more of an 80-column terminal to the values; the title stays on its own line.
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)


# --- shell completion and shared option declarations ------------------------------------------------


def complete_driver(incomplete: str) -> list[str]:
    """Installed driver names for shell completion (a module:factory spec is typed by hand)."""
    from ..harness import available_drivers

    try:
        names = [info.name for info in available_drivers()]
    except Exception:  # completion must never print a traceback into the user's shell
        return []
    return [name for name in names if name.startswith(incomplete)]


def complete_area(incomplete: str) -> list[str]:
    return [area for area in AREAS if area.startswith(incomplete)]


def complete_requirement(incomplete: str) -> list[str]:
    """Requirement ids of the catalogue (importing the suites takes a moment, once per completion)."""
    try:
        from ..catalogue import all_requirements

        return [rid for rid in all_requirements() if rid.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the user's shell
        return []


def complete_profile(incomplete: str) -> list[str]:
    return [name for name in HYPOTHESIS_PROFILES if name.startswith(incomplete)]


# --- shared option declarations ---------------------------------------------------------------------

DriverOption = Annotated[
    str | None,
    typer.Option(
        "--driver",
        "-d",
        metavar="NAME|MODULE:FACTORY",
        help="Driver to certify: an installed name (see [bold]list[/bold]) or module:factory "
        "(importable from the current directory). Required unless \\[tool.runlane] sets driver.",
        show_default=False,
        autocompletion=complete_driver,
    ),
]
OptionsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        metavar="KEY=VALUE",
        help="Option passed to the driver's harness factory (repeatable).",
        show_default=False,
    ),
]
ProfileOption = Annotated[
    str,
    typer.Option(
        "--profile",
        "--hypothesis-profile",
        metavar="|".join(HYPOTHESIS_PROFILES),
        help="How hard the property-based checks search: quick (CI), default or thorough.",
        autocompletion=complete_profile,
    ),
]
#: ``run``'s --profile: no default in the signature, so a value from [tool.runlane] can apply.
RunProfileOption = Annotated[
    str | None,
    typer.Option(
        "--profile",
        "--hypothesis-profile",
        metavar="|".join(HYPOTHESIS_PROFILES),
        help="How hard the property-based checks search: quick (CI, the default), default or thorough.",
        show_default=False,
        autocompletion=complete_profile,
    ),
]
SeedOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        metavar="N",
        help="Hypothesis seed; chosen and printed when omitted, so every run can be replayed.",
        show_default=False,
    ),
]


IsolationOption = Annotated[
    Isolation,
    typer.Option(
        "--isolation",
        help="Where the driver's code runs: process serves it from a backend process of its own, so "
        "nothing it does can reach the checks or the verdict (docs/trust.md); none loads it next to "
        "the checks, for debugging with a debugger. Reports record the mode.",
        case_sensitive=False,
    ),
]
