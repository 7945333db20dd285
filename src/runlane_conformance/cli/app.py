"""``runlane-certify``: certify a Runlane storage driver against the storage contract.

Exit codes are part of the interface, so CI can branch on them:

* 0 -- certified: every applicable MUST requirement passed;
* 1 -- at least one MUST requirement failed (the run itself was fine);
* 2 -- usage or driver-loading problem, reported on one line without a traceback;
* 3 -- the run itself broke (the suites could not be collected, pytest or the toolkit failed);
* 4 -- inconclusive: nothing failed, but a check could not finish inside its deadline, so there is
  no verdict (give it more time with ``--check-timeout`` or the machine less to do with ``--workers``);
* 130 -- interrupted (Ctrl-C or SIGTERM); a ``--report`` is still written, marked interrupted.

From the moment ``run`` starts, its ``--report`` and ``--junit`` files say "running" (an
earlier file there is replaced at once), and a run that ends without a verdict leaves them
marked broken (exit 2 or 3) or interrupted (130): a file at those paths is never an earlier
run's. ``-`` (or ``/dev/stdout``) writes a machine output to standard output; all human
output then goes to standard error. Before any output is written, every process the driver
left behind is ended (``run.reaper``).

A run restricted with ``--area`` or ``--requirement`` is never a certification:
it exits 0 when everything that ran passed, 1 otherwise, and its report is
marked partial (``badge`` refuses it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from ..catalogue import AREAS

# Only what defining the commands needs is imported here: ``--help`` and ``--version`` must not pay
# for pytest, Hypothesis, jsonschema or the contract. Each command imports the rest when it runs.
from ..fixtures.defaults import CHECK_BUDGET_SECONDS, DEFAULT_EXAMPLES, HYPOTHESIS_PROFILES
from ..run.isolation import DEFAULT_ISOLATION, Isolation
from ..run.sandbox import SandboxNetwork
from ..run.scaling import AUTO, WorkerCount, parse_workers
from ..safe_text import (
    MESSAGE_LIMIT,
    describe_exception,
    json_text,
    one_line,
    redact_options,
    redact_text,
    safe_str,
    secret_values,
)
from . import init_cmd
from .choices import TracebackStyle
from .config import ConfigError, RunSettings, load_run_config, resolve_run
from .entry import version_text
from .help_format import hide_flag_types
from .output_files import (
    OutputFileError,
    OutputTarget,
    check_output_directory,
    check_output_path,
    invalidate,
    output_target,
    same_file,
    write_output,
    write_text_atomically,
)
from .termination import interrupt_on_termination, release_termination
from .wording import count

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.progress import TaskID
    from rich.table import Table

    from ..contract.values import StorageProfile
    from ..expected_failures import ExpectedFailure
    from ..run.certify import RunEvent, RunResult
    from ..run.model import CheckResult, RunStatus

__all__ = ["ExitCode", "app", "console", "main"]


class ExitCode(IntEnum):
    """What ``runlane-certify`` returns; CI pipelines branch on these."""

    CERTIFIED = 0
    REQUIREMENT_FAILED = 1
    USAGE = 2
    BROKEN = 3
    #: Nothing failed, but a check could not finish inside its deadline: no verdict (never certified).
    INCONCLUSIVE = 4
    INTERRUPTED = 130


hide_flag_types()

app = typer.Typer(
    name="runlane-certify",
    help="Certify a Runlane storage driver against the storage contract.\n\n"
    "Exit codes: 0 certified, 1 a requirement failed, 2 usage or driver-loading error, "
    "3 the run itself broke, 4 inconclusive (a check could not finish in time), 130 interrupted.\n\n"
    "Shell completion: run [bold]runlane-certify --install-completion[/bold] once, then open a new shell.",
    no_args_is_help=True,
    # Typer's own completion: --install-completion / --show-completion for bash, zsh, fish, PowerShell.
    add_completion=True,
    # -h works wherever --help does, on the app and on every command.
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

#: The one console every command prints through (re-pointed at the current stdout per command).
console = Console(highlight=False)

_PASS, _FAIL, _SKIP = "\u2713", "\u2717", "\u25cb"


def _begin() -> None:
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


def _unwrapped() -> bool:
    """Whether a long line is left whole (a log: grep finds it) rather than word-wrapped (a terminal,
    which would otherwise break it mid-word at its edge)."""
    return not console.is_terminal


def _shown(text: object, options: Mapping[str, str] | None = None, limit: int | None = MESSAGE_LIMIT) -> str:
    """Driver-supplied ``text`` as one terminal-safe line: secrets of ``options`` and URL credentials
    redacted, escape sequences and control characters neutralised, capped at ``limit`` characters
    (``None``: not capped; see ``safe_text``)."""
    return one_line(redact_text(safe_str(text), secret_values(options or {})), limit)


class _Stopped(typer.Exit):
    """An exit whose one error line is already on stderr; ``message`` keeps it for an unfinished report."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code)
        self.message = message


def _stop(code: ExitCode, message: object, options: Mapping[str, str] | None = None) -> NoReturn:
    """Print one clean, redacted line on stderr and exit with ``code``."""
    line = " ".join(_shown(message, options).split())
    typer.echo(f"runlane-certify: error: {line}", err=True)
    raise _Stopped(int(code), line)


#: True when this process is the ``runlane-certify`` program itself (``main``), not a caller that
#: invoked the app in its own process (a test's ``CliRunner``): only then may the CLI adopt orphans
#: and end every process below it.
_OWNS_PROCESS = False


def _adopt_orphans() -> None:
    """Become the subreaper of whatever the driver starts (see ``run.reaper``), when we own the process."""
    from ..run.reaper import become_subreaper

    if _OWNS_PROCESS:
        become_subreaper()


def _end_driver_processes() -> None:
    """End every process still below this one (the driver's daemons included) before any output."""
    from ..run.reaper import end_descendants

    if _OWNS_PROCESS:
        end_descendants()


def _check_output_path(path: Path | None, what: str) -> None:
    """Refuse an output target before the run, not after it (see ``output_files``)."""
    if path is None:
        return
    try:
        check_output_path(path, what)
    except OutputFileError as error:
        _stop(ExitCode.USAGE, error)


def _output_target(path: Path | None, what: str) -> OutputTarget | None:
    """The target ``path`` names (``-`` or stdout itself: standard output), refused before the run."""
    if path is None:
        return None
    try:
        return output_target(path, what)
    except OutputFileError as error:
        _stop(ExitCode.USAGE, error)


@dataclass
class _RunOutputs:
    """The ``--report`` and ``--junit`` targets of one ``run``, from its first moment to its exit.

    ``start`` replaces whatever the file targets hold with a report marked ``running`` (and a
    JUnit file whose one testcase says so), so nothing an earlier run left there can pass for this
    run, even if this process is killed outright. Then exactly one of ``finish`` (the verdict) or
    ``abandon`` (broken or interrupted: no verdict) writes the final files; standard output gets
    only that final document. Both first end every process the driver left behind, so none can
    rewrite a file after it was written.
    """

    report: OutputTarget | None
    junit: OutputTarget | None
    driver: str
    seed: int
    profile: str
    areas: tuple[str, ...]
    requirements: tuple[str, ...]
    workers: int | Literal["auto"]
    started_at: datetime
    options: Mapping[str, str] = field(default_factory=dict)
    #: ``--html``: the page made from the same document (a file; see ``html_report``).
    html: OutputTarget | None = None
    done: bool = False

    def _unfinished(self, status: RunStatus, code: int | None, problems: Sequence[str]) -> dict[str, Any]:
        from .report import unfinished_report

        return unfinished_report(
            status,
            driver=self.driver,
            options=self.options,
            seed=self.seed,
            hypothesis_profile=self.profile,
            areas=self.areas,
            requirements=self.requirements,
            workers=WorkerCount.of(self.workers).start,
            started_at=self.started_at,
            problems=problems,
            exit_code=code,
        )

    def _write(self, document: dict[str, Any], *, files_only: bool = False) -> None:
        targets = [
            target
            for target in (self.report, self.junit, self.html)
            if target is not None and not (files_only and target.is_stdout)
        ]
        if not targets:
            return  # nothing is written, so there is nothing to validate (a run without --report)
        from .junit import junit_xml
        from .report import validate_report

        validate_report(document)
        page = None if self.html is None else self.html.given
        for target in targets:
            if target is self.html:
                from ..html_report import render_html

                text = render_html(document)
            elif target is self.report:
                text = json_text(document, indent=2) + "\n"
            else:
                text = junit_xml(document, html=None if page is None else str(page))
            write_output(target, text)

    def start(self) -> None:
        """Mark the file targets ``running`` before anything else happens; refuses (exit 2) if it cannot."""
        from ..run.model import RunStatus

        try:
            self._write(self._unfinished(RunStatus.RUNNING, None, ()), files_only=True)
        except OutputFileError as error:
            self.done = True  # nothing of ours is there to mark broken
            # The marker could not be written (a full disk, a read-only directory): whatever an
            # earlier run left there must not pass for this one, so it is emptied (or removed).
            left = [
                target.given
                for target in (self.report, self.junit, self.html)
                if target is not None and target.path is not None and not invalidate(target.path)
            ]
            note = (
                f"; {', '.join(repr(given) for given in left)} could not be emptied either"
                if left
                else "; any earlier file there was emptied"
            )
            _stop(ExitCode.USAGE, f"{error}{note}")

    def finish(self, document: dict[str, Any]) -> None:
        """Write the verdict's report and JUnit (a failure to write is exit 2, the files marked broken)."""
        _end_driver_processes()
        self.done = True  # a target that cannot take the verdict keeps saying ``running``: no verdict there
        try:
            self._write(document)
        except OutputFileError as error:
            _stop(ExitCode.USAGE, error)
        for target, label in ((self.report, "report: "), (self.junit, "junit:  "), (self.html, "html:   ")):
            if target is not None and not target.is_stdout:
                console.print(Text(f"{label}{_shown(target.given)}"), soft_wrap=True)

    def abandon(self, code: int, problem: str) -> None:
        """Leave the targets marked interrupted (exit 130) or broken (any other exit without a verdict)."""
        from ..run.model import RunStatus
        from .report import ReportError

        if self.done:
            return
        self.done = True
        _end_driver_processes()
        status = RunStatus.INTERRUPTED if code == ExitCode.INTERRUPTED else RunStatus.BROKEN
        try:
            self._write(self._unfinished(status, code, [problem] if problem else []))
        except (OutputFileError, ReportError) as error:
            typer.echo(f"runlane-certify: error: {_shown(error)}", err=True)


#: Where ``run`` keeps failing examples unless told otherwise: the plugin's default, under the current
#: directory (so the printed reproduce lines, run from here, replay them).
DEFAULT_EXAMPLES_DIR = DEFAULT_EXAMPLES


def _examples_dir(value: str | None) -> Path | None:
    """The example database ``--examples`` names (``none``: no database), refused before the run
    if it cannot be used; the default is ``.runlane/examples`` under the current directory."""
    if value is not None and value.strip().lower() == "none":
        return None
    path = Path(value).expanduser() if value else Path.cwd() / DEFAULT_EXAMPLES_DIR
    try:
        return check_output_directory(path, "example database")
    except OutputFileError as error:
        _stop(ExitCode.USAGE, error)


def _write(path: Path, text: str, what: str) -> None:
    try:
        write_text_atomically(path, text, what)
    except OutputFileError as error:
        _stop(ExitCode.USAGE, error)


def _write_report(path: Path, document: dict[str, Any]) -> None:
    from .report import write_report

    try:
        write_report(path, document)
    except OutputFileError as error:
        _stop(ExitCode.USAGE, error)


def _options_text(options: Mapping[str, str]) -> str:
    """Driver options as ``k=v, ...`` with secrets shown as ``***``, cleaned for the terminal."""
    return ", ".join(f"{key}={value}" for key, value in redact_options(options).items())


# --- version and shell completion ------------------------------------------------------------------


def _version_text() -> str:
    return version_text()


def _show_version(value: bool) -> None:
    if value:
        typer.echo(_version_text())
        raise typer.Exit(0)


@app.callback()
def _root(
    context: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the toolkit version and exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Options of the program itself (the app's help text above is what users see)."""
    if context.invoked_subcommand != "run":
        release_termination()  # ``run`` releases SIGTERM once its outputs say running


def _complete_driver(incomplete: str) -> list[str]:
    """Installed driver names for shell completion (a module:factory spec is typed by hand)."""
    from ..harness import available_drivers

    try:
        names = [info.name for info in available_drivers()]
    except Exception:  # completion must never print a traceback into the user's shell
        return []
    return [name for name in names if name.startswith(incomplete)]


def _complete_area(incomplete: str) -> list[str]:
    return [area for area in AREAS if area.startswith(incomplete)]


def _complete_requirement(incomplete: str) -> list[str]:
    """Requirement ids of the catalogue (importing the suites takes a moment, once per completion)."""
    try:
        from ..catalogue import all_requirements

        return [rid for rid in all_requirements() if rid.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the user's shell
        return []


def _complete_profile(incomplete: str) -> list[str]:
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
        autocompletion=_complete_driver,
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
        autocompletion=_complete_profile,
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
        autocompletion=_complete_profile,
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


# --- run -------------------------------------------------------------------------------------------


class _LiveProgress:
    """Per-area progress: a live rich bar on a terminal, one honest line per finished area elsewhere.

    On a terminal each area's bar names the check in flight and its timer starts
    with the area's first check. In a log, a finished area prints how its checks
    ended; an area whose checks were all gated says so, with the reason, instead of "ok".
    ``on_plan`` runs once when the plan is known (the CLI prints its header then, so a
    driver that cannot load leaves nothing but its one-line error).

    Failures are printed as they happen, above the bars: the first check with a given
    error prints its requirement, first message line and driver frame; later checks
    with the same error print nothing more (the closing summary counts them), so a
    driver whose every call fails does not flood the screen. ``verbose`` prints every
    check's outcome as it ends. While a check shrinks a failure its bar says so.
    """

    def __init__(
        self,
        on_plan: Callable[[], None] = lambda: None,
        *,
        verbose: bool = False,
        options: Mapping[str, str] | None = None,
        expected: Collection[str] = (),
    ) -> None:
        from .progress_view import area_progress

        self.progress = area_progress(console)
        self._on_plan = on_plan
        self._verbose = verbose
        self._options = dict(options or {})
        self._expected = frozenset(expected)
        self._errors_seen: set[tuple[str, str | None]] = set()
        self.tasks: dict[str, TaskID] = {}
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.unfinished: dict[str, int] = {}
        self.gated: dict[str, int] = {}
        self.reasons: dict[str, Counter[str]] = {}
        self.started: dict[str, float] = {}

    def _ensure(self, area: str, total: int | None) -> None:
        if area in self.tasks:
            return
        self.totals[area] = total or 0
        self.done[area] = self.failed[area] = self.gated[area] = self.unfinished[area] = 0
        self.reasons[area] = Counter()
        self.tasks[area] = self.progress.add_task(f"  {area}", total=total, start=False)

    def _mark(self, area: str) -> str:
        if self.failed[area]:
            return _FAIL
        if self.unfinished[area] and self.done[area] >= self.totals[area]:
            return "?"
        if self.done[area] >= self.totals[area]:
            return _SKIP if self.gated[area] == self.done[area] else _PASS
        return " "

    def __call__(self, event: RunEvent) -> None:
        from ..run.certify import CheckShrinking, CheckStarted, CollectionFinished, TestFinished
        from ..run.model import Outcome

        if isinstance(event, CollectionFinished):
            self._on_plan()
            order = {area: index for index, area in enumerate(AREAS)}
            for area in sorted(event.totals, key=lambda a: (order.get(a, len(order)), a)):
                self._ensure(area, event.totals[area])
            return
        if isinstance(event, CheckStarted):
            self._ensure(event.area, None)
            if event.area not in self.started:
                self.started[event.area] = time.monotonic()
                self.progress.start_task(self.tasks[event.area])
            name = event.nodeid.rpartition("::")[2].partition("[")[0]
            self.progress.update(
                self.tasks[event.area], description=f"{self._mark(event.area)} {event.area}: {name[:48]}"
            )
            return
        if isinstance(event, CheckShrinking):
            self._ensure(event.area, None)
            name = event.nodeid.rpartition("::")[2].partition("[")[0]
            self.progress.update(
                self.tasks[event.area],
                description=f"{_FAIL} {event.area}: shrinking a failure in {name[:48]}",
            )
            if not console.is_terminal and self._verbose:
                console.print(f"  shrinking a failure in {_shown(name, self._options)}", markup=False)
            return
        assert isinstance(event, TestFinished)
        test = event.test
        area = test.area
        self._ensure(area, None)
        self.started.setdefault(area, time.monotonic())
        self.done[area] += 1
        self.failed[area] += int(test.failed)
        self.unfinished[area] += int(test.inconclusive)
        if test.outcome is Outcome.GATED:
            self.gated[area] += 1
            self.reasons[area][test.message or "profile"] += 1
        self._tell(test)
        finished = self.done[area] >= self.totals[area]
        mark = self._mark(area)
        description = f"{mark} {area}" if finished else f"{mark} {area}: {test.name.partition('[')[0][:48]}"
        self.progress.update(self.tasks[area], advance=1, description=description)
        if finished:
            self.progress.stop_task(self.tasks[area])
            if not console.is_terminal:
                console.print(f"  {mark} {area}: {self._summary(area)}", markup=False)

    def _tell(self, test: CheckResult) -> None:
        """Print a check's end above the bars: always its first failure of a kind, every end if verbose."""
        from ..run.model import Outcome
        from .failures import LINE_CHARS, failure_key

        label = _shown(test.requirement_id or test.area, self._options)
        if self._verbose:
            outcome = test.outcome.value.replace("_", " ").upper()
            console.print(
                Text(f"  {outcome:<8} {label}  {_shown(test.name, self._options)} ({test.duration:.2f}s)"),
                soft_wrap=True,
            )
        if test.inconclusive:
            first = test.text.strip().splitlines()[0] if test.text.strip() else "inconclusive"
            console.print(
                Text.assemble(("? " + label, "bold yellow"), f": {_shown(first, self._options, LINE_CHARS)}"),
                soft_wrap=True,
            )
            return
        if not test.failed or test.outcome is Outcome.NOT_RUN or test.requirement_id in self._expected:
            return  # a declared known failure is summed up once, at the end
        key = failure_key(test)
        if key in self._errors_seen:
            return
        self._errors_seen.add(key)
        first = test.text.strip().splitlines()[0] if test.text.strip() else "failed"
        console.print(
            Text.assemble((f"{_FAIL} {label}", "bold red"), f": {_shown(first, self._options, LINE_CHARS)}"),
            soft_wrap=True,
        )
        if test.driver_frame:
            console.print(
                Text(f"    driver frame: {_shown(test.driver_frame, self._options, LINE_CHARS)}"),
                soft_wrap=True,
            )

    def _summary(self, area: str) -> str:
        done, failed, gated = self.done[area], self.failed[area], self.gated[area]
        elapsed = time.monotonic() - self.started.get(area, time.monotonic())
        reasons = "; ".join(reason for reason, _ in self.reasons[area].most_common())
        unfinished = self.unfinished[area]
        if failed:
            verdict = f"{failed} failed" + (f", {unfinished} inconclusive" if unfinished else "")
        elif unfinished:
            verdict = f"{unfinished} inconclusive (could not finish in time)"
        elif gated == done:
            verdict = f"all gated ({reasons})"
        elif gated:
            verdict = f"ok, {gated} gated ({reasons})"
        else:
            verdict = "ok"
        return f"{count(done, 'check')}, {verdict} in {elapsed:.1f}s"


def _describe_profile(profile: StorageProfile) -> str:
    offered = ", ".join(profile.capabilities())
    return (
        f"durability {profile.durability.value}, clock authority {profile.clock_authority.value}, "
        f"index consistency {profile.index_consistency.value}; "
        + (f"offers {offered}" if offered else "no optional capabilities")
    )


def _verdict_table(result: RunResult) -> RenderableType:
    from .verdict_view import verdict_view

    return verdict_view(result.area_summaries(), console, lambda text: _shown(text, result.options, 200))


def _print_failures(result: RunResult, style: TracebackStyle) -> None:
    from .failures import failure_lines, unexpected_pass_lines

    options = result.options

    def shown(text: object, limit: int | None) -> str:
        return _shown(text, options, limit)

    lines = failure_lines(result, style, shown)
    unexpected = unexpected_pass_lines(result, shown)
    if not lines and not unexpected:
        return
    for section in (lines, unexpected):
        if section:
            console.print()
        for line in section:
            console.print(line, soft_wrap=True)
    if redact_options(options) != dict(options):
        console.print(
            Text(
                "(secret-looking option values are shown as ***: put your own back in to reproduce)",
                style="dim",
            ),
            soft_wrap=True,
        )


def _scope_of(result: RunResult) -> str:
    parts = [f"areas {', '.join(result.areas)}"] if result.areas else []
    if result.requirement_filter:
        parts.append(f"requirements {', '.join(result.requirement_filter)}")
    return _shown("; ".join(parts))


def _print_verdict(result: RunResult) -> None:
    from ..run.model import INCONCLUSIVE_HINT, Outcome, RunStatus

    should = [r for r in result.failed_requirements if r not in result.must_failures]
    console.print()
    for problem in result.problems:
        console.print(Text.assemble(("RUN PROBLEM", "bold red"), f": {problem}"), soft_wrap=_unwrapped())
    if result.status is RunStatus.INTERRUPTED:
        console.print(
            Text.assemble(("INTERRUPTED", "bold red"), f": {_shown(result.driver)}: not a certification"),
            soft_wrap=_unwrapped(),
        )
    elif result.status is RunStatus.STOPPED:
        not_run = sum(t.outcome is Outcome.NOT_RUN for t in result.tests)
        console.print(
            Text.assemble(
                ("STOPPED", "bold red"),
                f" after {count(result.max_failures or 0, 'failed check')} (--maxfail "
                f"{result.max_failures}): {_shown(result.driver)}: {count(not_run, 'check')} not run; "
                "a stopped run is not a certification",
            ),
            soft_wrap=_unwrapped(),
        )
    elif result.status is RunStatus.INCONCLUSIVE:
        unfinished = result.inconclusive_requirements
        console.print(
            Text.assemble(
                ("INCONCLUSIVE", "bold yellow"),
                f": {_shown(result.driver)}: nothing failed, but "
                f"{count(len(unfinished), 'requirement')} could not finish in time "
                f"({_shown(', '.join(r.id for r in unfinished))}); not a certification. "
                f"{INCONCLUSIVE_HINT} (exit 4)",
            ),
            soft_wrap=_unwrapped(),
        )
    elif result.status is RunStatus.PARTIAL:
        failed = len(result.failed_requirements)
        if failed:
            outcome = f"{count(failed, 'requirement')} failed or did not run"
        elif result.inconclusive_requirements:
            outcome = (
                f"nothing failed, but {count(len(result.inconclusive_requirements), 'requirement')} "
                f"could not finish in time (inconclusive: {INCONCLUSIVE_HINT})"
            )
        elif result.problems:
            outcome = f"everything that ran passed, but {count(len(result.problems), 'run problem')}"
        else:
            outcome = "everything that ran passed"
        console.print(
            Text.assemble(
                ("PARTIAL RUN", "bold yellow"),
                f" ({_scope_of(result)}): {_shown(result.driver)}: {outcome}; "
                "a partial run is not a certification",
            ),
            soft_wrap=_unwrapped(),
        )
    elif result.certified:
        console.print(
            Text.assemble(("CERTIFIED", "bold green"), f": {_shown(result.driver)} at level {result.level}"),
            soft_wrap=_unwrapped(),
        )
    else:
        reasons = [f"{count(len(result.must_failures), 'MUST requirement')} failed or did not run"]
        if result.inconclusive_requirements:
            reasons.append(f"{count(len(result.inconclusive_requirements), 'requirement')} inconclusive")
        known = sum(r.known_failure for r in result.must_failures)
        if known:
            reasons[0] += f" ({known} of them {'a known failure' if known == 1 else 'known failures'})"
        if result.problems:
            reasons.append(count(len(result.problems), "run problem"))
        console.print(
            Text.assemble(("NOT CERTIFIED", "bold red"), f": {_shown(result.driver)}: {', '.join(reasons)}"),
            soft_wrap=_unwrapped(),
        )
    if should:
        console.print(Text(f"SHOULD requirements failed (not blocking): {', '.join(r.id for r in should)}"))
    if result.unexpected_passes:
        ids = ", ".join(r.id for r in result.unexpected_passes)
        console.print(
            Text.assemble(
                ("NOT CLEAN", "bold yellow"),
                f": declared known failures passed ({_shown(ids)}): remove their --expect-fail (exit 1)",
            ),
            soft_wrap=_unwrapped(),
        )
    ran = sum(t.outcome is not Outcome.NOT_RUN for t in result.tests)
    checks = count(len(result.tests), "check")
    summary = f"{ran} of {checks} run in {result.duration:.1f}s; seed {result.seed}"
    console.print(Text(summary, style="dim"), soft_wrap=_unwrapped())


def _exit_code(result: RunResult) -> ExitCode:
    from ..run.model import RunStatus

    if result.status is RunStatus.INTERRUPTED:
        return ExitCode.INTERRUPTED
    if result.status is RunStatus.STOPPED or result.unexpected_passes:
        # A declared known failure that passed is a stale declaration: like pytest's strict xfail,
        # the run is not clean until it is removed (the certification itself is unaffected).
        return ExitCode.REQUIREMENT_FAILED
    if result.failed_requirements or result.problems:
        return ExitCode.REQUIREMENT_FAILED
    if result.inconclusive_requirements:
        # Nothing failed, but not everything finished: no verdict, partial run or not.
        return ExitCode.INCONCLUSIVE
    if result.status is RunStatus.PARTIAL:
        return ExitCode.CERTIFIED
    return ExitCode.CERTIFIED if result.certified else ExitCode.REQUIREMENT_FAILED


def _expected_failures(declarations: Sequence[str]) -> tuple[ExpectedFailure, ...]:
    """``--expect-fail`` values parsed against the catalogue the run uses; a bad one exits 2."""
    from ..expected_failures import ExpectedFailureError, parse_expected_failures

    if not declarations:
        return ()
    from ..run import certify

    try:
        return parse_expected_failures(declarations, known=certify.SUITE_CATALOG().keys())
    except ExpectedFailureError as error:
        _stop(ExitCode.USAGE, error)


def _allow_local_modules(driver: str) -> None:
    if ":" in driver and os.getcwd() not in sys.path:
        # Like ``python -m``, let ``module:factory`` name a module in the current directory.
        sys.path.insert(0, os.getcwd())


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (a cancelled CI job) like Ctrl-C, so the run is wound down the same way."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (an embedding caller): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _execute(
    driver: str,
    option: Sequence[str] | None,
    areas: Sequence[str],
    profile: str,
    seed: int | None,
    workers: int | Literal["auto"],
    listener: Callable[[RunEvent], None] | None,
    *,
    requirements: Sequence[str] = (),
    check_timeout: float | None = None,
    max_failures: int | None = None,
    expected_failures: Sequence[ExpectedFailure] = (),
    examples: Path | None = None,
    isolation: Isolation = DEFAULT_ISOLATION,
    sandbox_network: SandboxNetwork = SandboxNetwork.NONE,
    backend_python: str | None = None,
) -> RunResult:
    """Run the suites, turning every way the run can go wrong into the right exit code."""
    from ..harness import HarnessError, parse_driver_options
    from ..run.certify import RunBrokenError, RunUsageError, certify_driver

    _allow_local_modules(driver)
    options: dict[str, str] = {}
    try:
        options = parse_driver_options(option or [])
        with _terminate_as_interrupt():
            return certify_driver(
                driver,
                options,
                areas=areas,
                requirements=requirements,
                hypothesis_profile=profile,
                seed=seed,
                workers=workers,
                check_timeout=check_timeout,
                listener=listener,
                max_failures=max_failures,
                expected_failures=expected_failures,
                examples=examples,
                isolation=isolation,
                sandbox_network=sandbox_network,
                backend_python=backend_python,
            )
    except (HarnessError, RunUsageError) as error:
        _stop(ExitCode.USAGE, error, options)
    except RunBrokenError as error:
        tail = [line for line in error.output.splitlines() if line.strip()][-15:]
        if tail:
            typer.echo("\n".join(_shown(line, options, 500) for line in tail), err=True)
        _stop(ExitCode.BROKEN, f"the run broke: {safe_str(error)}", options)
    except (KeyboardInterrupt, typer.Exit):
        raise
    except Exception as error:
        _stop(ExitCode.BROKEN, f"internal error: {describe_exception(error)}", options)


def _report_for(result: RunResult, kind: str) -> dict[str, Any]:
    from .report import ReportError, build_report

    try:
        return build_report(result, kind=kind)
    except ReportError as error:
        _stop(ExitCode.BROKEN, f"internal error: the report would not match its schema: {error}")


def _workers_flag(value: str | None) -> int | Literal["auto"] | None:
    """``--workers`` as given: a count from 1 to ``MAX_WORKERS`` or ``auto``; ``ValueError`` otherwise."""
    return None if value is None else parse_workers(value)


def _run_settings(
    config: Path | None,
    driver: str | None,
    option: Sequence[str] | None,
    profile: str | None,
    workers: int | Literal["auto"] | None,
    expect_fail: Sequence[str] | None,
) -> RunSettings:
    """``run``'s flags combined with ``[tool.runlane]`` (flags win); a bad file or no driver exits 2."""
    try:
        loaded = load_run_config(config, Path.cwd())
        return resolve_run(
            loaded,
            driver=driver,
            options=option or (),
            profile=profile,
            workers=workers,
            expect_fail=expect_fail or (),
        )
    except ConfigError as error:
        _stop(ExitCode.USAGE, error)


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


@app.command()
def run(
    driver: DriverOption = None,
    option: OptionsOption = None,
    area: Annotated[
        list[str] | None,
        typer.Option(
            "--area",
            "-a",
            metavar="AREA",
            help=f"Run only this contract area (repeatable; makes the run partial, never a "
            f"certification). Areas: {', '.join(AREAS)}.",
            show_default=False,
            autocompletion=_complete_area,
        ),
    ] = None,
    requirement: Annotated[
        list[str] | None,
        typer.Option(
            "--requirement",
            "-r",
            metavar="ID",
            help="Run only the checks of this requirement id, e.g. sealing.reads-refused-after-now "
            "(repeatable; makes the run partial, never a certification).",
            show_default=False,
            autocompletion=_complete_requirement,
        ),
    ] = None,
    profile: RunProfileOption = None,
    seed: SeedOption = None,
    report: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH|-",
            help="Write the JSON certification report here, atomically; - writes it to standard output.",
            show_default=False,
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH|-",
            help="Write JUnit XML (one testcase per requirement) here; - writes it to standard output.",
            show_default=False,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="Write one self-contained HTML page of the verdict here: each failure with its reproduce "
            "lines, each history anomaly's cycle drawn (needs the html extra; Graphviz's dot draws).",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        str | None,
        typer.Option(
            metavar="N|auto",
            help="Run checks in N supervised processes at once (default 1). auto starts one per "
            "processor and adds more while the processors sit idle, as they do while a driver waits "
            "on its database or on locks (up to 4 per processor).",
            show_default=False,
        ),
    ] = None,
    check_timeout: Annotated[
        float | None,
        typer.Option(
            "--check-timeout",
            min=0.001,
            metavar="SECONDS",
            help="Fail any single check still running after this many seconds (its stack is reported "
            "and the run goes on). Default: the profile's budget ("
            + ", ".join(f"{name} {budget:g}s" for name, budget in CHECK_BUDGET_SECONDS.items())
            + ").",
            show_default=False,
        ),
    ] = None,
    tb: Annotated[
        TracebackStyle,
        typer.Option(
            "--tb",
            help="How each failure is shown: short (its whole message and the driver frame), "
            "long (the full traceback) or no (one line per requirement).",
            case_sensitive=False,
        ),
    ] = TracebackStyle.SHORT,
    maxfail: Annotated[
        int | None,
        typer.Option(
            "--maxfail",
            min=1,
            metavar="N",
            help="Stop after N failed checks. A stopped run is never a certification.",
            show_default=False,
        ),
    ] = None,
    exitfirst: Annotated[
        bool,
        typer.Option("--exitfirst", "-x", help="Stop at the first failed check (--maxfail 1)."),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print each check's outcome as it ends.")
    ] = False,
    expect_fail: Annotated[
        list[str] | None,
        typer.Option(
            "--expect-fail",
            metavar="ID=REASON",
            help="Declare a requirement a known failure, with the reason (repeatable). It is reported "
            "as known and still denies certification; if it passes, the run says so and exits 1.",
            show_default=False,
        ),
    ] = None,
    examples: Annotated[
        str | None,
        typer.Option(
            "--examples",
            metavar="PATH|none",
            help=f"Hypothesis example database: failing examples are saved here and replayed first, so "
            f"the printed reproduce lines replay a failure at once. Default: {DEFAULT_EXAMPLES_DIR} under "
            "the current directory (created only when a failure is saved); none keeps nothing.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="Read \\[tool.runlane] (driver, options, profile, workers, expect-fail) from this TOML "
            "file instead of ./pyproject.toml. Command-line flags win over it.",
            show_default=False,
        ),
    ] = None,
    isolation: IsolationOption = DEFAULT_ISOLATION,
    sandbox_network: Annotated[
        SandboxNetwork,
        typer.Option(
            "--sandbox-network",
            help="The network an isolated driver's sandbox sees: none (a private loopback only) or "
            "host (the machine's network, for a driver that talks to a database server).",
            case_sensitive=False,
        ),
    ] = SandboxNetwork.NONE,
    backend_python: Annotated[
        str | None,
        typer.Option(
            "--backend-python",
            metavar="PYTHON",
            help="With --isolation process: the interpreter of the driver's own virtual environment, "
            "which serves it; install the toolkit alone where runlane-certify runs, so nothing "
            "installed with the driver runs in the judge (docs/trust.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the conformance suites against a driver and print a verdict.

    The checks run in supervised child processes: a driver that exits, crashes
    or hangs fails the check it was in, and the run goes on. Shows progress per
    contract area, then a verdict table and, for each failed requirement, its
    message and the exact command that reproduces it. Exit 0 only when every
    required check ran and every MUST requirement passed (or was gated off by
    the driver's profile).
    """
    _begin()
    started_at = datetime.now(UTC)
    # Nothing that can fail comes before the running marker: each output target is checked on its
    # own, so a refused --junit still replaces an earlier report at --report (and vice versa).
    targets: dict[str, OutputTarget | None] = {}
    refused: list[str] = []
    for given, what in ((report, "report"), (junit, "JUnit file"), (html, "HTML report")):
        try:
            targets[what] = None if given is None else output_target(given, what)
        except OutputFileError as error:
            targets[what], refused = None, [*refused, str(error)]
    report_target, junit_target, html_target = (
        targets["report"],
        targets["JUnit file"],
        targets["HTML report"],
    )
    if html_target is not None:
        refused += _html_refusal(html_target, (report_target, junit_target))
    if report_target is not None and junit_target is not None:
        if report_target.is_stdout and junit_target.is_stdout:
            refused.append("--report and --junit cannot both write to standard output")
        elif report_target.path is not None and report_target.path == junit_target.path:
            refused.append(f"--report and --junit name the same file {str(report_target.given)!r}")
    if refused:
        # Refused before the run: nothing is created, and nothing an earlier run left there survives.
        for target in (report_target, junit_target, html_target):
            if target is not None and target.path is not None:
                invalidate(target.path)
        _stop(ExitCode.USAGE, refused[0])
    seed = secrets.randbelow(2**32) if seed is None else seed
    outputs = _RunOutputs(
        report_target,
        junit_target,
        driver=driver or "?",
        seed=seed,
        profile=profile if profile in HYPOTHESIS_PROFILES else "quick",
        areas=tuple(area or ()),
        requirements=tuple(requirement or ()),
        workers=1,
        started_at=started_at,
        html=html_target,
    )
    _adopt_orphans()
    outputs.start()
    try:
        release_termination()  # a SIGTERM held since the program's first line is an interrupt from here on
        if any(target is not None and target.is_stdout for target in (report_target, junit_target)):
            console.file = sys.stderr  # standard output carries the machine output alone
        try:
            workers_given = _workers_flag(workers)
        except ValueError as error:
            _stop(ExitCode.USAGE, f"Invalid value for '--workers': {error}")
        settings = _run_settings(config, driver, option, profile, workers_given, expect_fail)
        driver, option, profile = settings.driver, list(settings.options), settings.profile
        worker_count, expect_fail = settings.workers, list(settings.expect_fail)
        outputs.driver, outputs.profile, outputs.workers = driver, profile, worker_count
    except _Stopped as stopped:
        outputs.abandon(int(stopped.exit_code), stopped.message)
        raise
    except KeyboardInterrupt:
        outputs.abandon(int(ExitCode.INTERRUPTED), "Ctrl-C or SIGTERM")
        typer.echo("runlane-certify: interrupted before the run had a verdict", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BaseException as error:
        outputs.abandon(int(ExitCode.BROKEN), f"internal error: {describe_exception(error)}")
        raise
    try:
        _run_and_judge(
            outputs,
            driver=driver,
            option=option,
            examples=examples,
            expect_fail=expect_fail,
            exitfirst=exitfirst,
            maxfail=maxfail,
            check_timeout=check_timeout,
            verbose=verbose,
            tb=tb,
            isolation=isolation,
            sandbox_network=sandbox_network,
            backend_python=backend_python,
        )
    except _Stopped as stopped:
        outputs.abandon(int(stopped.exit_code), stopped.message)
        raise
    except typer.Exit as exited:
        # After the verdict's files were written this is the run's own exit; before, there is no verdict.
        outputs.abandon(int(exited.exit_code), f"the run ended with exit status {exited.exit_code}")
        raise
    except KeyboardInterrupt:
        outputs.abandon(int(ExitCode.INTERRUPTED), "Ctrl-C or SIGTERM")
        typer.echo("runlane-certify: interrupted before the run had a verdict", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BaseException as error:
        outputs.abandon(int(ExitCode.BROKEN), f"internal error: {describe_exception(error)}")
        raise


def _html_refusal(target: OutputTarget, others: Sequence[OutputTarget | None]) -> list[str]:
    """Why ``--html`` cannot be written (standard output, another target's file, Jinja2 missing)."""
    if target.is_stdout:
        return ["--html writes a file; give it a path"]
    for other in others:
        if other is not None and other.path is not None and other.path == target.path:
            return [f"--html and --{other.what.split()[0].lower()} name the same file {str(target.given)!r}"]
    from ..html_report import HtmlUnavailable, require

    try:
        require()
    except HtmlUnavailable as error:
        return [str(error)]
    return []


def _run_and_judge(
    outputs: _RunOutputs,
    *,
    driver: str,
    option: list[str] | None,
    examples: str | None,
    expect_fail: list[str] | None,
    exitfirst: bool,
    maxfail: int | None,
    check_timeout: float | None,
    verbose: bool,
    tb: TracebackStyle,
    isolation: Isolation = DEFAULT_ISOLATION,
    sandbox_network: SandboxNetwork = SandboxNetwork.NONE,
    backend_python: str | None = None,
) -> NoReturn:
    """``run`` once its outputs are marked running: load, run, judge, print, write, exit."""
    from ..fixtures.driver_frame import path_from_here
    from ..harness import HarnessError, parse_driver_options
    from .badge import isolation_note

    seed, profile, areas, requirements = outputs.seed, outputs.profile, outputs.areas, outputs.requirements
    workers = outputs.workers
    database = _examples_dir(examples)
    try:
        options = parse_driver_options(option or [])
    except HarnessError as error:
        _stop(ExitCode.USAGE, error)
    outputs.options = options
    expected = _expected_failures(expect_fail or [])
    scope = (f", areas {', '.join(areas)}" if areas else "") + (
        f", requirements {', '.join(requirements)}" if requirements else ""
    )

    def header() -> None:
        console.print(
            Text(
                f"Certifying driver {_shown(driver, options)}"
                + (f" with options {_shown(_options_text(options), options)}" if options else "")
                + f" (Hypothesis profile {profile}, seed {seed}{_shown(scope)})",
                style="bold",
            ),
            soft_wrap=_unwrapped(),
        )
        console.print(
            Text(
                f"examples: {_shown(path_from_here(str(database)))} (a failure saved here replays first)"
                if database is not None
                else "examples: none (failures are not kept; reproduce lines search afresh)",
                style="dim",
            ),
            soft_wrap=_unwrapped(),
        )

    usable = os.cpu_count() or 1
    if workers != AUTO and workers > usable:
        console.print(
            Text(
                f"note: {workers} workers on {usable} processor(s): more workers than processors pays "
                "off only while checks wait (on a database, on locks); --workers auto decides by load"
            )
        )
    live = _LiveProgress(header, verbose=verbose, options=options, expected=[e.requirement for e in expected])
    max_failures = 1 if exitfirst else maxfail
    # A progress display off a terminal is disabled; not entering it at all keeps rich releases before
    # 15 from printing a blank line to stdout when it stops (stdout may carry a report).
    with live.progress if console.is_terminal else contextlib.nullcontext():
        result = _execute(
            driver,
            option,
            areas,
            profile,
            seed,
            workers,
            live,
            requirements=requirements,
            check_timeout=check_timeout,
            max_failures=max_failures,
            expected_failures=expected,
            examples=database,
            isolation=isolation,
            sandbox_network=sandbox_network,
            backend_python=backend_python,
        )
    # Nothing the driver started may outlive the run, nor see (or rewrite) what is written next.
    _end_driver_processes()
    console.print(Text(f"Advertised profile: {_describe_profile(result.profile)}"), soft_wrap=_unwrapped())
    console.print()
    console.print(_verdict_table(result))
    _print_failures(result, tb)
    _print_verdict(result)
    document = _report_for(result, "certification")
    console.print(Text(isolation_note(document), style="dim"), soft_wrap=_unwrapped())
    outputs.finish(document)
    raise typer.Exit(int(_exit_code(result)))


# --- report ----------------------------------------------------------------------------------------

_STATUS_STYLE = {
    "passed": "green",
    "failed": "red",
    "gated": "yellow",
    "not_run": "dim",
    "inconclusive": "yellow",
}


def _status(status: str) -> Text:
    return Text(status.replace("_", " "), style=_STATUS_STYLE.get(status, ""))


def _report_table(title: str) -> Table:
    # A light box leaves more of an 80-column terminal to the values; the title stays on its own line.
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)


def _print_evidence(rows: list[tuple[str, list[str]]]) -> None:
    """Which checks measured each entry, one line per entry, folded (never cut) on a narrow terminal."""
    from rich.table import Table

    console.print(Text("evidence (the requirements whose checks measured it):", style="dim"))
    grid = Table.grid(padding=(0, 1), pad_edge=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, requirements in rows:
        grid.add_row(f" {_shown(name)}:", Text(_shown(", ".join(requirements)) or "no check found"))
    console.print(grid)


def _print_capabilities(document: dict[str, Any]) -> None:
    """The report command's three tables, laid out to stay readable at 80 columns.

    Names (limits, properties, checks) are never wrapped or cut, so two limits can never shrink to the
    same text; long lists of requirement IDs go under each table instead of into a narrow column.
    """
    from ..fixtures.gating import CAPABILITIES

    profile = document["profile"]
    table = _report_table("Advertised profile")
    table.add_column("property", no_wrap=True)
    table.add_column("value", no_wrap=True)
    table.add_column("what it means", overflow="fold")
    for name in ("durability", "clock_authority", "index_consistency"):
        table.add_row(name, _shown(profile[name]), "")
    for name, entry in document["capabilities"].items():
        table.add_row(
            _shown(name), "offered" if entry["offered"] else "not offered", Text(CAPABILITIES.get(name, ""))
        )
    console.print(table)

    console.print()
    table = _report_table("Limits: advertised vs verified")
    table.add_column("limit", no_wrap=True)
    for column in ("advertised", "verified", "accepted at", "rejected at"):
        table.add_column(column, justify="right" if column != "verified" else "left", overflow="fold")
    for entry in document["limits"]:
        table.add_row(
            _shown(entry["name"]),
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
    table = _report_table("Profile checks")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for entry in document["checks"]:
        table.add_row(
            _shown(entry["name"]),
            _status(entry["status"]),
            Text(_shown(entry.get("reason") or "", limit=200)),
        )
    console.print(table)
    _print_evidence([(entry["name"], entry["requirements"]) for entry in document["checks"]])


@app.command("report")
def report_command(
    driver: Annotated[
        str | None,
        typer.Option(
            "--driver",
            "-d",
            metavar="NAME|MODULE:FACTORY",
            help="Driver to examine: an installed name or module:factory.",
            show_default=False,
            autocompletion=_complete_driver,
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
    from .badge import isolation_note
    from .report import ReportError, is_unfinished, read_report

    _begin()
    if (driver is None) == (show is None):
        _stop(ExitCode.USAGE, "give exactly one of --driver (run the checks) or --from (show a saved report)")
    target: OutputTarget | None = None
    if show is not None:
        try:
            document = read_report(show)
        except ReportError as error:
            _stop(ExitCode.USAGE, error)
        if is_unfinished(document):
            status = document["run"]["status"]
            _stop(ExitCode.USAGE, f"report {str(show)!r} holds no results: the run is marked {status}")
    else:
        assert driver is not None
        target = _output_target(output, "report")
        if target is not None and target.is_stdout:
            if as_json:
                _stop(ExitCode.USAGE, "--json and --report - would both print the report to standard output")
            console.file = sys.stderr  # standard output carries the report alone
        seed = secrets.randbelow(2**32) if seed is None else seed
        _adopt_orphans()
        try:
            result = _execute(
                driver, option, ("limits", "profile"), profile, seed, 1, None, isolation=isolation
            )
        except KeyboardInterrupt:
            typer.echo("runlane-certify: interrupted", err=True)
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        finally:
            _end_driver_processes()
        document = _report_for(result, "capabilities")
        if target is not None:
            try:
                write_output(target, json_text(document, indent=2) + "\n")
            except OutputFileError as error:
                _stop(ExitCode.USAGE, error)
    if as_json:
        typer.echo(json_text(document, indent=2))
    else:
        console.print(
            Text(f"Capabilities and limits of driver {_shown(document['driver']['spec'])}", style="bold"),
            soft_wrap=True,
        )
        _print_capabilities(document)
        console.print(Text(isolation_note(document)), soft_wrap=_unwrapped())
        if target is not None and not target.is_stdout:
            console.print(Text(f"report: {_shown(output)}"), soft_wrap=True)
    must_failed = document["certification"]["must_failed"]
    raise typer.Exit(int(ExitCode.REQUIREMENT_FAILED if must_failed else ExitCode.CERTIFIED))


# --- list, schema, badge ---------------------------------------------------------------------------


@app.command("list")
def list_drivers() -> None:
    """List the drivers installed under the runlane.storage_drivers entry point group."""
    from ..harness import available_drivers

    _begin()
    drivers = available_drivers()
    if not drivers:
        console.print(
            "No drivers installed. A driver registers an entry point in group runlane.storage_drivers."
        )
        return
    table = _report_table("Installed drivers")
    table.pad_edge = True
    table.add_column("name", no_wrap=True)
    table.add_column("factory", overflow="fold")  # folded, never cut: it is what --driver accepts too
    table.add_column("distribution", overflow="fold")
    table.add_column("version", no_wrap=True)
    for info in drivers:
        table.add_row(
            Text(_shown(info.name)),
            Text(_shown(info.target)),
            Text(_shown(info.distribution or "?")),
            Text(_shown(info.version or "?")),
        )
    console.print(table)


@app.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) every report is validated against."""
    from .report import REPORT_SCHEMA

    typer.echo(json.dumps(REPORT_SCHEMA, indent=2))


@app.command()
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
    from .badge import badge_for, endpoint_json, isolation_note, render_svg
    from .report import ReportError, check_claim, read_report

    _begin()
    if svg is None and endpoint is None:
        _stop(ExitCode.USAGE, "give --svg PATH and/or --endpoint PATH")
    for path, what in ((svg, "SVG badge"), (endpoint, "endpoint JSON")):
        if path is not None and same_file(path, report):
            # Writing the badge would destroy the very report it vouches for.
            _stop(ExitCode.USAGE, f"the {what} {str(path)!r} is the report being read; choose another path")
        _check_output_path(path, what)
    if svg is not None and endpoint is not None and same_file(svg, endpoint):
        _stop(ExitCode.USAGE, f"--svg and --endpoint name the same file {str(svg)!r}")
    try:
        document = read_report(report)
        check_claim(document)
    except ReportError as error:
        _stop(ExitCode.USAGE, f"refusing report {str(report)!r}: {error}")
    made = badge_for(document)
    if svg is not None:
        _write(svg, render_svg(made), "SVG badge")
    if endpoint is not None:
        _write(endpoint, json_text(endpoint_json(made), indent=2) + "\n", "endpoint JSON")
    console.print(
        Text(f"badge: {_shown(made.label)} | {_shown(made.message)} ({made.color})"), soft_wrap=True
    )
    console.print(Text(isolation_note(document)), soft_wrap=_unwrapped())


@app.command("html")
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
    from .report import ReportError, read_report

    _begin()
    if same_file(output, report):
        _stop(ExitCode.USAGE, f"the HTML page {str(output)!r} is the report being read; choose another path")
    _check_output_path(output, "HTML report")
    try:
        document = read_report(report)
    except ReportError as error:
        _stop(ExitCode.USAGE, f"refusing report {str(report)!r}: {error}")
    try:
        page = render_html(document, report_name=report.name)
    except HtmlUnavailable as error:
        _stop(ExitCode.USAGE, error)
    _write(output, page, "HTML report")
    console.print(Text(f"html:   {_shown(str(output))}"), soft_wrap=True)


@app.command("requirements")
def requirements_command(
    area: Annotated[
        list[str] | None,
        typer.Option(
            "--area",
            "-a",
            metavar="AREA",
            help="List only this contract area's requirements (repeatable).",
            show_default=False,
            autocompletion=_complete_area,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON array (id, area, level, summary, ...).")
    ] = False,
) -> None:
    """List the requirement IDs, with level and summary: what --requirement and --expect-fail take."""
    from .requirements_cmd import UnknownAreaError, print_requirements, requirements_json, select_requirements

    _begin()
    try:
        chosen = select_requirements(area or ())
    except UnknownAreaError as error:
        _stop(ExitCode.USAGE, error)
    if as_json:
        typer.echo(requirements_json(chosen), nl=False)
    else:
        print_requirements(console, chosen)


@app.command("check-history")
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

    _begin()
    try:
        recorded = load(history)
    except (OSError, HistoryFormatError, ValueError, RecursionError) as error:
        _stop(ExitCode.USAGE, f"cannot read history {str(history)!r}: {error}")
    verdict = check_history(recorded)
    for line in verdict.render(recorded).splitlines():
        console.print(Text(_shown(line, limit=None)), soft_wrap=True)
    raise typer.Exit(int(ExitCode.CERTIFIED if verdict.ok else ExitCode.REQUIREMENT_FAILED))


app.command("init")(init_cmd.init)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: like the typer app, but command-line mistakes are one line too.

    The process it runs in is the CLI's own, so ``run`` and ``report`` may adopt and end every
    process the driver leaves behind (see ``_OWNS_PROCESS``).
    """
    global _OWNS_PROCESS
    _OWNS_PROCESS = True
    interrupt_on_termination()
    command = typer.main.get_command(app)
    try:
        code = command.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except Exception as error:
        # typer may vendor click, so its usage errors are recognised by shape: exit_code 2 and a message.
        show = getattr(error, "show", None)
        format_message = getattr(error, "format_message", None)
        if type(error).__name__ == "NoArgsIsHelpError" and callable(show):
            show()
            sys.exit(int(ExitCode.USAGE))
        if getattr(error, "exit_code", None) == 2 and callable(format_message):
            context = getattr(error, "ctx", None)
            path = str(getattr(context, "command_path", "") or "runlane-certify")
            message = " ".join(_shown(format_message()).split())
            typer.echo(f"runlane-certify: error: {message} (see: {_shown(path)} --help)", err=True)
            sys.exit(int(ExitCode.USAGE))
        if isinstance(error, typer.Abort) or type(error).__name__ == "Abort":
            typer.echo("runlane-certify: interrupted", err=True)
            sys.exit(130)
        raise
    sys.exit(code if isinstance(code, int) else 0)
