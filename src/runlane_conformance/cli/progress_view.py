"""The live per-area progress display, kept whole on a narrow terminal.

rich lays a progress bar out as one grid row; with a long description (the check in flight) and a
fixed 40-cell bar, a 60-column pane has no room left for the bar, the count and the timer, and they
vanish. Here the description column alone gives way: it keeps at least the mark and the longest area
name, and only the check's name is cut with an ellipsis (it changes every moment anyway; the
verdict afterwards is never cut). The bar narrows with the terminal.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from ..catalogue import AREAS
from .common import FAIL_MARK, PASS_MARK, SKIP_MARK, console, shown
from .wording import count

if TYPE_CHECKING:
    from rich.progress import TaskID

    from ..run.certify import RunEvent
    from ..run.model import CheckResult

__all__ = ["LiveProgress", "area_progress"]

#: Room the mark, a space and the longest area name need, so no area name is ever cut.
_AREA_CELLS = 2 + max(len(area) for area in AREAS)
#: The count (``146/146``) and the timer (``0:00:12``), which must always show.
_FIXED_CELLS = 7 + 7


def _bar_width(width: int) -> int:
    """Up to rich's usual 40 cells, less on a narrow terminal, never under 5."""
    return max(5, min(40, width - _AREA_CELLS - _FIXED_CELLS - 12))


def area_progress(console: Console) -> Progress:
    """A progress display for ``console`` (disabled off a terminal) whose bars fit its width."""
    return Progress(
        TextColumn(
            "{task.description}",
            table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis", min_width=_AREA_CELLS),
        ),
        BarColumn(bar_width=_bar_width(console.width)),
        MofNCompleteColumn(table_column=Column(no_wrap=True, justify="right")),
        TimeElapsedColumn(table_column=Column(no_wrap=True)),
        console=console,
        disable=not console.is_terminal,
        expand=True,
    )


class LiveProgress:
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
            return FAIL_MARK
        if self.unfinished[area] and self.done[area] >= self.totals[area]:
            return "?"
        if self.done[area] >= self.totals[area]:
            return SKIP_MARK if self.gated[area] == self.done[area] else PASS_MARK
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
                description=f"{FAIL_MARK} {event.area}: shrinking a failure in {name[:48]}",
            )
            if not console.is_terminal and self._verbose:
                console.print(f"  shrinking a failure in {shown(name, self._options)}", markup=False)
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

        label = shown(test.requirement_id or test.area, self._options)
        if self._verbose:
            outcome = test.outcome.value.replace("_", " ").upper()
            console.print(
                Text(f"  {outcome:<8} {label}  {shown(test.name, self._options)} ({test.duration:.2f}s)"),
                soft_wrap=True,
            )
        if test.inconclusive:
            first = test.text.strip().splitlines()[0] if test.text.strip() else "inconclusive"
            console.print(
                Text.assemble(("? " + label, "bold yellow"), f": {shown(first, self._options, LINE_CHARS)}"),
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
            Text.assemble(
                (f"{FAIL_MARK} {label}", "bold red"), f": {shown(first, self._options, LINE_CHARS)}"
            ),
            soft_wrap=True,
        )
        if test.driver_frame:
            console.print(
                Text(f"    driver frame: {shown(test.driver_frame, self._options, LINE_CHARS)}"),
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
