"""The verdict by contract area, laid out for the terminal it is printed on.

Nothing in it is ever cut: an area name, a status word or a count shortened to ``poi…`` would make
the verdict unreadable exactly where it matters. When the whole table fits it is a table whose
columns never wrap; when it does not (a 60-column pane), each area becomes a short block whose
counts are packed whole onto lines. Gate reasons are long prose, so they go under the counts as
word-wrapped lines instead of squeezing a column. A zero is dim, never coloured like a failure:
colour marks only what happened.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..run.model import INCONCLUSIVE_HINT, AreaSummary, Outcome, RunResult, Verdict
from ..safe_text import redact_options
from .choices import TracebackStyle
from .common import console, exit_code_for, shown, unwrapped
from .wording import count

__all__ = ["COUNT_COLUMNS", "HEADLINES", "print_failures", "print_verdict", "verdict_table", "verdict_view"]

TITLE = "Verdict by contract area (requirements)"

#: The count columns in order, with the colour a non-zero count of each gets.
COUNT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("passed", "green"),
    ("failed", "red"),
    ("not run", "red"),
    ("inconclusive", "yellow"),
    ("gated", "yellow"),
)


def _counts(summary: AreaSummary) -> tuple[int, ...]:
    return (summary.passed, summary.failed, summary.not_run, summary.inconclusive, summary.gated)


def _checks(summary: AreaSummary) -> int:
    return summary.tests_passed + summary.tests_failed + summary.tests_gated + summary.tests_inconclusive


def _count(value: int, style: str) -> Text:
    return Text(str(value), style=style if value else "dim")


def _count_cells(summary: AreaSummary) -> list[Text]:
    return [_count(value, style) for value, (_, style) in zip(_counts(summary), COUNT_COLUMNS, strict=True)]


def _table(summaries: Sequence[AreaSummary], shown: Callable[[str], str]) -> Table:
    table = Table(title=TITLE, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("area", no_wrap=True)
    for name, _ in COUNT_COLUMNS:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("checks", justify="right", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    for summary in summaries:
        table.add_row(
            Text(shown(summary.area)),
            *(
                _count(value, style)
                for value, (_, style) in zip(_counts(summary), COUNT_COLUMNS, strict=True)
            ),
            str(_checks(summary)),
            f"{summary.duration:.2f}s",
        )
    return table


def _packed(pieces: Sequence[Text], width: int, indent: int) -> list[Text]:
    """``pieces`` joined by two spaces, a new line started before a piece that would not fit whole."""
    lines: list[Text] = []
    line = Text(" " * indent)
    for piece in pieces:
        if line.cell_len > indent and line.cell_len + 2 + piece.cell_len > width:
            lines.append(line)
            line = Text(" " * indent)
        if line.cell_len > indent:
            line.append("  ")
        line.append_text(piece)
    lines.append(line)
    return lines


def _stacked(summaries: Sequence[AreaSummary], shown: Callable[[str], str], width: int) -> Group:
    lines: list[RenderableType] = [Text(TITLE, style="italic")]
    for summary in summaries:
        lines.append(
            Text.assemble(
                (shown(summary.area), "bold"),
                f"  {count(_checks(summary), 'check')}, {summary.duration:.2f}s",
            )
        )
        pieces = [
            Text.assemble(_count(value, style), f" {name}")
            for value, (name, style) in zip(_counts(summary), COUNT_COLUMNS, strict=True)
        ]
        lines.extend(_packed(pieces, width, indent=2))
    return Group(*lines)


def _gate_reasons(summaries: Sequence[AreaSummary], shown: Callable[[str], str]) -> list[RenderableType]:
    reasons: list[RenderableType] = [
        Padding(
            Text(f"{shown(summary.area)} ({number}): {shown(reason)}", overflow="fold"),
            (0, 0, 0, 2),
            expand=False,
        )
        for summary in summaries
        for reason, number in summary.gate_reasons
    ]
    if not reasons:
        return []
    return [Text("gate reasons (what the driver's profile does not offer):", style="dim"), *reasons]


def _natural_width(table: Table) -> int:
    """The width ``table`` takes when nothing squeezes it (rich would shrink no_wrap columns to fit)."""
    wide = Console(width=10_000, file=io.StringIO(), color_system=None, legacy_windows=False)
    with wide.capture() as captured:
        wide.print(table)
    return max((cell_len(line.rstrip()) for line in captured.get().splitlines()), default=0)


def verdict_view(
    summaries: Sequence[AreaSummary], console: Console, shown: Callable[[str], str] = str
) -> RenderableType:
    """The verdict for ``console``'s width: the table if it fits unwrapped, else stacked blocks.

    ``shown`` cleans driver-influenced text (gate reasons quote the profile) for the terminal.
    """
    table = _table(summaries, shown)
    fits = _natural_width(table) <= console.width
    body: RenderableType = table if fits else _stacked(summaries, shown, console.width)
    return Group(body, *_gate_reasons(summaries, shown))


# --- the run's closing lines ------------------------------------------------------------------------


def verdict_table(result: RunResult) -> RenderableType:
    """The verdict by area for ``result``, its driver-supplied text cleaned."""
    return verdict_view(result.area_summaries(), console, lambda text: shown(text, result.options, 200))


def print_failures(result: RunResult, style: TracebackStyle) -> None:
    from .failures import failure_lines, unexpected_pass_lines

    options = result.options

    def clean(text: object, limit: int | None) -> str:
        return shown(text, options, limit)

    lines = failure_lines(result, style, clean)
    unexpected = unexpected_pass_lines(result, clean)
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
    return shown("; ".join(parts))


def _interrupted(result: RunResult, code: int) -> Text:
    return Text.assemble(("INTERRUPTED", "bold red"), f": {shown(result.driver)}: not a certification")


def _stopped(result: RunResult, code: int) -> Text:
    not_run = sum(t.outcome is Outcome.NOT_RUN for t in result.tests)
    return Text.assemble(
        ("STOPPED", "bold red"),
        f" after {count(result.max_failures or 0, 'failed check')} (--maxfail "
        f"{result.max_failures}): {shown(result.driver)}: {count(not_run, 'check')} not run; "
        "a stopped run is not a certification",
    )


def _inconclusive(result: RunResult, code: int) -> Text:
    unfinished = result.inconclusive_requirements
    return Text.assemble(
        ("INCONCLUSIVE", "bold yellow"),
        f": {shown(result.driver)}: nothing failed, but "
        f"{count(len(unfinished), 'requirement')} could not finish in time "
        f"({shown(', '.join(r.id for r in unfinished))}); not a certification. "
        f"{INCONCLUSIVE_HINT} (exit {code})",
    )


def _partial(outcome: Callable[[RunResult], str]) -> Callable[[RunResult, int], Text]:
    def line(result: RunResult, code: int) -> Text:
        return Text.assemble(
            ("PARTIAL RUN", "bold yellow"),
            f" ({_scope_of(result)}): {shown(result.driver)}: {outcome(result)}; "
            "a partial run is not a certification",
        )

    return line


def _partial_failed(result: RunResult) -> str:
    failed = len(result.failed_requirements)
    if failed:
        return f"{count(failed, 'requirement')} failed or did not run"
    problems = count(len(result.problems), "run problem")
    unfinished = result.inconclusive_requirements
    if unfinished:
        return f"nothing failed, but {problems} and {count(len(unfinished), 'requirement')} inconclusive"
    return f"everything that ran passed, but {problems}"


def _partial_inconclusive(result: RunResult) -> str:
    unfinished = count(len(result.inconclusive_requirements), "requirement")
    return f"nothing failed, but {unfinished} could not finish in time (inconclusive: {INCONCLUSIVE_HINT})"


def _certified(result: RunResult, code: int) -> Text:
    return Text.assemble(("CERTIFIED", "bold green"), f": {shown(result.driver)} at level {result.level}")


def _not_certified(result: RunResult, code: int) -> Text:
    reasons = [f"{count(len(result.must_failures), 'MUST requirement')} failed or did not run"]
    if result.inconclusive_requirements:
        reasons.append(f"{count(len(result.inconclusive_requirements), 'requirement')} inconclusive")
    known = sum(r.known_failure for r in result.must_failures)
    if known:
        reasons[0] += f" ({known} of them {'a known failure' if known == 1 else 'known failures'})"
    if result.problems:
        reasons.append(count(len(result.problems), "run problem"))
    return Text.assemble(("NOT CERTIFIED", "bold red"), f": {shown(result.driver)}: {', '.join(reasons)}")


#: The headline of each verdict. ``NOT_CLEAN`` has none of its own: its run says what the checks came
#: to (``RunResult.checks_verdict``), then names the stale declarations.
HEADLINES: Mapping[Verdict, Callable[[RunResult, int], Text]] = {
    Verdict.INTERRUPTED: _interrupted,
    Verdict.STOPPED: _stopped,
    Verdict.INCONCLUSIVE: _inconclusive,
    Verdict.PARTIAL_PASSED: _partial(lambda result: "everything that ran passed"),
    Verdict.PARTIAL_FAILED: _partial(_partial_failed),
    Verdict.PARTIAL_INCONCLUSIVE: _partial(_partial_inconclusive),
    Verdict.CERTIFIED: _certified,
    Verdict.CERTIFIED_SHOULD_FAILED: _certified,
    Verdict.NOT_CERTIFIED: _not_certified,
}


def print_verdict(result: RunResult, verdict: Verdict) -> None:
    """The run's closing lines, all chosen by ``verdict`` (the run's one ``RunResult.verdict``): the
    run problems, the headline, the SHOULD failures, the stale declarations and the summary."""
    code = int(exit_code_for(verdict))
    should = [r for r in result.failed_requirements if r not in result.must_failures]
    console.print()
    for problem in result.problems:
        console.print(Text.assemble(("RUN PROBLEM", "bold red"), f": {problem}"), soft_wrap=unwrapped())
    shown_verdict = result.checks_verdict if verdict is Verdict.NOT_CLEAN else verdict
    console.print(HEADLINES[shown_verdict](result, code), soft_wrap=unwrapped())
    if should:
        console.print(Text(f"SHOULD requirements failed (not blocking): {', '.join(r.id for r in should)}"))
    if result.unexpected_passes:
        # An interrupted or stopped run keeps its own verdict (and exit code): the note then only
        # names the stale declarations.
        ids = ", ".join(r.id for r in result.unexpected_passes)
        exits = f" (exit {code})" if verdict is Verdict.NOT_CLEAN else ""
        console.print(
            Text.assemble(
                ("NOT CLEAN", "bold yellow"),
                f": declared known failures passed ({shown(ids)}): remove their --expect-fail{exits}",
            ),
            soft_wrap=unwrapped(),
        )
    ran = sum(t.outcome is not Outcome.NOT_RUN for t in result.tests)
    checks = count(len(result.tests), "check")
    summary = f"{ran} of {checks} run in {result.duration:.1f}s; seed {result.seed}"
    console.print(Text(summary, style="dim"), soft_wrap=unwrapped())
