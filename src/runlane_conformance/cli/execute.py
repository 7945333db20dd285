"""Carrying out a ``RunRequest`` for a command: every way a run can go wrong becomes its exit code.

``run`` and ``report`` both end up here with a request built once from their options
(``run.request.RunRequest``); this module runs it and turns the run's errors into one clean line
and the right exit status (``common.stop``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from ..safe_text import describe_exception, safe_str
from .common import ExitCode, shown, stop

if TYPE_CHECKING:
    from ..expected_failures import ExpectedFailure
    from ..report.model import ResultsReport
    from ..run.certify import RunEvent, RunResult
    from ..run.request import RunRequest

__all__ = ["allow_local_modules", "execute", "expected_failures_of", "report_for"]


def expected_failures_of(declarations: Sequence[str]) -> tuple[ExpectedFailure, ...]:
    """``--expect-fail`` values parsed against the catalogue the run uses; a bad one exits 2."""
    from ..expected_failures import ExpectedFailureError, parse_expected_failures

    if not declarations:
        return ()
    from ..run import certify

    try:
        return parse_expected_failures(declarations, known=certify.SUITE_CATALOG().keys())
    except ExpectedFailureError as error:
        stop(ExitCode.USAGE, error)


def allow_local_modules(driver: str) -> None:
    """Let ``module:factory`` name a module in the current directory (as ``python -m`` does)."""
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


def execute(request: RunRequest, listener: Callable[[RunEvent], None] | None = None) -> RunResult:
    """Run ``request``, turning every way the run can go wrong into the right exit code."""
    from ..harness import HarnessError
    from ..run.certify import RunBrokenError, RunUsageError, certify

    options = request.options
    try:
        with _terminate_as_interrupt():
            return certify(request, listener)
    except (HarnessError, RunUsageError) as error:
        stop(ExitCode.USAGE, error, options)
    except RunBrokenError as error:
        tail = [line for line in error.output.splitlines() if line.strip()][-15:]
        if tail:
            typer.echo("\n".join(shown(line, options, 500) for line in tail), err=True)
        stop(ExitCode.BROKEN, f"the run broke: {safe_str(error)}", options)
    except (KeyboardInterrupt, typer.Exit):
        raise
    except Exception as error:
        stop(ExitCode.BROKEN, f"internal error: {describe_exception(error)}", options)


def report_for(result: RunResult, kind: str) -> ResultsReport:
    """The report document of ``result`` (exit 3 if it would not match its schema)."""
    from ..report.builder import build_report
    from ..report.schema import ReportError

    try:
        return build_report(result, kind=kind)
    except ReportError as error:
        stop(ExitCode.BROKEN, f"internal error: the report would not match its schema: {error}")
