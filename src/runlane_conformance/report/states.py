"""A run's report and JUnit files from its first moment to its exit: running, then finished or abandoned.

``start`` replaces whatever the file targets hold with a report marked ``running`` (and a JUnit
file whose one testcase says so), so nothing an earlier run left there can pass for this run, even
if the process is killed outright. Then exactly one of ``finish`` (the verdict) or ``abandon``
(broken or interrupted: no verdict) writes the final files; standard output gets only that final
document. Both first call ``before_final`` (the CLI ends every process the driver left behind
there), so nothing the driver started can rewrite a file after it was written.

Every document written is validated first; every write is atomic (``report.files``). Nothing here
prints: failures are raised (``OutputFileError``, ``ReportError``) for the CLI to word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ..run.outcomes import RunStatus
from ..run.scaling import WorkerCount
from ..safe_text import json_text
from .files import OutputFileError, OutputTarget, invalidate, write_output
from .model import Report, UnfinishedReport

__all__ = ["RunFiles"]


@dataclass
class RunFiles:
    """The ``--report`` and ``--junit`` targets of one run (see the module docstring).

    ``driver``, ``profile``, ``workers`` and ``options`` start as the command line gave them and
    are updated once the configuration is resolved, so an unfinished report names what was asked.
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
    before_final: Callable[[], None] = lambda: None
    done: bool = False

    def _unfinished(self, status: RunStatus, code: int | None, problems: Sequence[str]) -> UnfinishedReport:
        from .builder import unfinished_report

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

    def _write(self, document: Report, *, files_only: bool = False) -> None:
        targets = [
            target
            for target in (self.report, self.junit, self.html)
            if target is not None and not (files_only and target.is_stdout)
        ]
        if not targets:
            return  # nothing is written, so there is nothing to validate (a run without --report)
        from .junit import junit_xml
        from .schema import validate_report

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
        """Mark the file targets ``running`` before anything else happens.

        Raises ``OutputFileError`` if the marker cannot be written; whatever an earlier run left at
        the targets is then emptied (or removed), and the message says which could not be.
        """
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
            raise OutputFileError(f"{error}{note}") from None

    def finish(self, document: Report) -> list[OutputTarget]:
        """Write the verdict's report and JUnit; returns the file targets written (not standard output).

        Raises ``OutputFileError`` if one cannot be written: a target that cannot take the verdict
        keeps saying ``running``, so there is no verdict there.
        """
        self.before_final()
        self.done = True
        self._write(document)
        return [
            target
            for target in (self.report, self.junit, self.html)
            if target is not None and not target.is_stdout
        ]

    def abandon(self, status: RunStatus, code: int, problem: str) -> None:
        """Leave the targets marked ``status`` (interrupted or broken): the run has no verdict.

        Does nothing once ``finish`` or ``abandon`` ran. Raises ``OutputFileError`` or
        ``ReportError`` if the mark cannot be written.
        """
        if self.done:
            return
        self.done = True
        self.before_final()
        self._write(self._unfinished(status, code, [problem] if problem else []))
