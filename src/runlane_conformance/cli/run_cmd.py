"""``runlane-certify run``: certify a driver, print the verdict, write its report and JUnit files.

Exit codes are the table ``common.EXIT_CODES`` applied to the run's one verdict
(``RunResult.verdict``); without a verdict: 2 for a usage or driver-loading problem, 3 when the run
itself broke, 130 when interrupted.

From the moment ``run`` starts, its ``--report`` and ``--junit`` files say "running" (an
earlier file there is replaced at once), and a run that ends without a verdict leaves them
marked broken (exit 2 or 3) or interrupted (130): a file at those paths is never an earlier
run's (``report.states``). ``-`` (or ``/dev/stdout``) writes a machine output to standard output;
all human output then goes to standard error. Before any output is written, every process the driver
left behind is ended (``run.reaper``).

A run restricted with ``--area`` or ``--requirement`` is never a certification: it exits 0 when
everything that ran passed, 1 otherwise, and its report is marked partial (``badge`` refuses it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn

import typer
from rich.text import Text

from ..catalogue import AREAS
from ..fixtures.defaults import CHECK_BUDGET_SECONDS, DEFAULT_EXAMPLES, HYPOTHESIS_PROFILES
from ..protocol.isolation import DEFAULT_ISOLATION, Isolation
from ..report.files import OutputFileError, OutputTarget, check_output_directory, invalidate, output_target
from ..run.sandbox import SandboxNetwork
from ..run.scaling import AUTO, parse_workers
from ..safe_text import describe_exception
from .choices import TracebackStyle
from .common import (
    DriverOption,
    ExitCode,
    IsolationOption,
    OptionsOption,
    RunProfileOption,
    SeedOption,
    Stopped,
    adopt_orphans,
    begin,
    complete_area,
    complete_requirement,
    console,
    describe_profile,
    end_driver_processes,
    exit_code_for,
    options_text,
    shown,
    stop,
    unwrapped,
)
from .config import ConfigError, RunSettings, load_run_config, resolve_run
from .execute import allow_local_modules, execute, expected_failures_of, report_for
from .termination import release_termination

if TYPE_CHECKING:
    from ..report.model import ResultsReport
    from ..report.states import RunFiles

__all__ = ["DEFAULT_EXAMPLES_DIR", "run"]


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
        stop(ExitCode.USAGE, error)


def _finish(outputs: RunFiles, document: ResultsReport) -> None:
    """Write the verdict's files (a failure to write is exit 2) and say where they went."""
    try:
        written = outputs.finish(document)
    except OutputFileError as error:
        stop(ExitCode.USAGE, error)
    for target, label in (
        (outputs.report, "report: "),
        (outputs.junit, "junit:  "),
        (outputs.html, "html:   "),
    ):
        if target is not None and target in written:
            console.print(Text(f"{label}{shown(target.given)}"), soft_wrap=True)


def _abandon(outputs: RunFiles, code: int, problem: str) -> None:
    """Leave the files marked interrupted (exit 130) or broken (any other exit without a verdict)."""
    from ..report.schema import ReportError
    from ..run.outcomes import RunStatus

    status = RunStatus.INTERRUPTED if code == ExitCode.INTERRUPTED else RunStatus.BROKEN
    try:
        outputs.abandon(status, code, problem)
    except (OutputFileError, ReportError) as error:
        typer.echo(f"runlane-certify: error: {shown(error)}", err=True)


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
        stop(ExitCode.USAGE, error)


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
            autocompletion=complete_area,
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
            autocompletion=complete_requirement,
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
    begin()
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
        stop(ExitCode.USAGE, refused[0])
    seed = secrets.randbelow(2**32) if seed is None else seed
    from ..report.states import RunFiles

    outputs = RunFiles(
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
        before_final=end_driver_processes,
    )
    adopt_orphans()
    try:
        outputs.start()
    except OutputFileError as error:
        stop(ExitCode.USAGE, error)
    try:
        release_termination()  # a SIGTERM held since the program's first line is an interrupt from here on
        if any(target is not None and target.is_stdout for target in (report_target, junit_target)):
            console.file = sys.stderr  # standard output carries the machine output alone
        try:
            workers_given = _workers_flag(workers)
        except ValueError as error:
            stop(ExitCode.USAGE, f"Invalid value for '--workers': {error}")
        settings = _run_settings(config, driver, option, profile, workers_given, expect_fail)
        driver, option, profile = settings.driver, list(settings.options), settings.profile
        worker_count, expect_fail = settings.workers, list(settings.expect_fail)
        outputs.driver, outputs.profile, outputs.workers = driver, profile, worker_count
    except Stopped as stopped:
        _abandon(outputs, int(stopped.exit_code), stopped.message)
        raise
    except KeyboardInterrupt:
        _abandon(outputs, int(ExitCode.INTERRUPTED), "Ctrl-C or SIGTERM")
        typer.echo("runlane-certify: interrupted before the run had a verdict", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BaseException as error:
        _abandon(outputs, int(ExitCode.BROKEN), f"internal error: {describe_exception(error)}")
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
    except Stopped as stopped:
        _abandon(outputs, int(stopped.exit_code), stopped.message)
        raise
    except typer.Exit as exited:
        # After the verdict's files were written this is the run's own exit; before, there is no verdict.
        _abandon(outputs, int(exited.exit_code), f"the run ended with exit status {exited.exit_code}")
        raise
    except KeyboardInterrupt:
        _abandon(outputs, int(ExitCode.INTERRUPTED), "Ctrl-C or SIGTERM")
        typer.echo("runlane-certify: interrupted before the run had a verdict", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BaseException as error:
        _abandon(outputs, int(ExitCode.BROKEN), f"internal error: {describe_exception(error)}")
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
    outputs: RunFiles,
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
    from ..report.badge import isolation_note
    from ..run.request import RunRequest
    from .progress_view import LiveProgress
    from .verdict_view import print_failures, print_verdict, verdict_table

    seed, profile, areas, requirements = outputs.seed, outputs.profile, outputs.areas, outputs.requirements
    workers = outputs.workers
    database = _examples_dir(examples)
    allow_local_modules(driver)
    try:
        options = parse_driver_options(option or [])
    except HarnessError as error:
        stop(ExitCode.USAGE, error)
    outputs.options = options
    expected = expected_failures_of(expect_fail or [])
    scope = (f", areas {', '.join(areas)}" if areas else "") + (
        f", requirements {', '.join(requirements)}" if requirements else ""
    )

    def header() -> None:
        console.print(
            Text(
                f"Certifying driver {shown(driver, options)}"
                + (f" with options {shown(options_text(options), options)}" if options else "")
                + f" (Hypothesis profile {profile}, seed {seed}{shown(scope)})",
                style="bold",
            ),
            soft_wrap=unwrapped(),
        )
        console.print(
            Text(
                f"examples: {shown(path_from_here(str(database)))} (a failure saved here replays first)"
                if database is not None
                else "examples: none (failures are not kept; reproduce lines search afresh)",
                style="dim",
            ),
            soft_wrap=unwrapped(),
        )

    usable = os.cpu_count() or 1
    if workers != AUTO and workers > usable:
        console.print(
            Text(
                f"note: {workers} workers on {usable} processor(s): more workers than processors pays "
                "off only while checks wait (on a database, on locks); --workers auto decides by load"
            )
        )
    live = LiveProgress(header, verbose=verbose, options=options, expected=[e.requirement for e in expected])
    # The run's one request: flags and configuration resolved, driver options parsed once.
    request = RunRequest(
        driver,
        options,
        areas=areas,
        requirements=requirements,
        hypothesis_profile=profile,
        seed=seed,
        workers=workers,
        check_timeout=check_timeout,
        max_failures=1 if exitfirst else maxfail,
        expected_failures=expected,
        examples=database,
        isolation=isolation,
        sandbox_network=sandbox_network,
        backend_python=backend_python,
    )
    # A progress display off a terminal is disabled; not entering it at all keeps rich releases before
    # 15 from printing a blank line to stdout when it stops (stdout may carry a report).
    with live.progress if console.is_terminal else contextlib.nullcontext():
        result = execute(request, live)
    # Nothing the driver started may outlive the run, nor see (or rewrite) what is written next.
    end_driver_processes()
    console.print(Text(f"Advertised profile: {describe_profile(result.profile)}"), soft_wrap=unwrapped())
    console.print()
    console.print(verdict_table(result))
    print_failures(result, tb)
    verdict = result.verdict  # decided once: the headline and the exit code both follow it
    print_verdict(result, verdict)
    document = report_for(result, "certification")
    console.print(Text(isolation_note(document), style="dim"), soft_wrap=unwrapped())
    _finish(outputs, document)
    raise typer.Exit(int(exit_code_for(verdict)))
