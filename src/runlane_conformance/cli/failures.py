"""How failed requirements are shown on the terminal: what failed, where, and how to replay it.

A driver author should be able to act on the screen without opening the report:

* each failure shows its whole message (the state, return values and history a
  suite put into it), capped at ``MESSAGE_LINES`` lines with a visible count of
  the lines left out, and the frame of the driver's own code it escaped from
  when the plugin recorded one;
* each requirement gets one ``reproduce:`` line (the ``runlane-certify`` run of
  that requirement) and one ``pytest:`` line (the first failing check alone);
* one failure repeated across checks is shown once: within a requirement as
  "same error in N checks", across requirements as a block naming every
  requirement it hit, once. A typo that breaks every call is one block, not
  one per check;
* requirements that did not run are counted per reason, not listed one by one;
* a known failure (declared with ``--expect-fail``) is one line with its reason and
  first message line, kept out of the blocks so new failures stand out; a declared
  failure that passed gets its own line asking for the stale declaration to go.

``TracebackStyle`` mirrors pytest's ``--tb``: ``short`` (the message and driver
frame), ``long`` (the whole traceback text), ``no`` (one line per requirement).
Every driver-supplied string goes through ``safe_text`` (via the ``shown``
function the caller passes), so nothing here can garble the terminal or leak
a secret option.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rich.text import Text

from ..run.model import CheckResult, Outcome, RequirementResult, RunResult
from ..run.root_cause import in_root_cause_order
from .choices import TracebackStyle
from .wording import count

__all__ = [
    "LONG_LINES",
    "MESSAGE_LINES",
    "FailureGroup",
    "TracebackStyle",
    "error_text",
    "failure_key",
    "failure_lines",
    "group_failures",
    "unexpected_pass_lines",
]

#: Most lines of one failure message shown with ``--tb short`` (the rest are counted).
MESSAGE_LINES = 30
#: Most lines of one traceback shown with ``--tb long``.
LONG_LINES = 400
#: Most lines of a stuck check's stack shown with ``--tb short``.
STACK_LINES = 40
#: Longest single line shown (a message line may hold a whole serialised state).
LINE_CHARS = 600
#: Requirements named one by one under "did not run" at most; beyond that only their number.
NOT_RUN_NAMED = 10

_FAIL = "\u2717"
_KNOWN = "\u25cb"
_UNEXPECTED = "!"
_INDENT = "    "

#: ``shown(text, limit)``: driver text made terminal-safe and redacted, capped at ``limit`` characters.
Shown = Callable[[object, int | None], str]


#: Two failures are the same when their error (the message without Hypothesis's example) and their
#: driver frame are.
FailureKey = tuple[str, str | None]

#: Where Hypothesis's account of the example begins in a message: the lines from here on describe the
#: input that failed, which differs from check to check even when the error is one and the same.
#: Hypothesis 6.155 says "Falsifying example", later releases "Failing test case"; both are known.
_EXAMPLE_START = re.compile(
    r"^\s*(Falsifying (explicit )?example|Failing (test case|explicit example)"
    r"|\(note: |Trying example|Draw \d+)",
    re.M,
)


def error_text(check: CheckResult) -> str:
    """The failure's message up to Hypothesis's description of the failing example."""
    text = check.text
    match = _EXAMPLE_START.search(text)
    return (text[: match.start()] if match else text).rstrip() or text


def failure_key(check: CheckResult) -> FailureKey:
    """What makes two failed checks "the same error"."""
    return (error_text(check), check.driver_frame)


@dataclass(frozen=True)
class FailureGroup:
    """One distinct failure and every (requirement, check) it was seen in, in run order."""

    key: FailureKey
    members: tuple[tuple[RequirementResult, CheckResult], ...]

    @property
    def first(self) -> CheckResult:
        return self.members[0][1]

    @property
    def requirement_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(requirement.id for requirement, _ in self.members))

    @property
    def shared(self) -> bool:
        """Seen in more than one requirement (shown once, as its own block)."""
        return len(self.requirement_ids) > 1


def group_failures(requirements: Iterable[RequirementResult]) -> tuple[FailureGroup, ...]:
    """The distinct failures of checks that ran, in the order they first appear (known failures,
    shown on their own line, are left out)."""
    groups: dict[FailureKey, list[tuple[RequirementResult, CheckResult]]] = {}
    for requirement in requirements:
        if requirement.known_failure:
            continue
        for check in requirement.failures:
            if check.outcome is not Outcome.NOT_RUN:
                groups.setdefault(failure_key(check), []).append((requirement, check))
    return tuple(FailureGroup(key, tuple(members)) for key, members in groups.items())


def _capped(lines: Sequence[str], most: int) -> tuple[Sequence[str], int]:
    if len(lines) <= most:
        return lines, 0
    return lines[:most], len(lines) - most


def _block(check: CheckResult, style: TracebackStyle, shown: Shown, *, example: bool = True) -> list[Text]:
    """The message (or traceback) of one failure, its driver frame and its stack, indented.

    ``example``: include Hypothesis's failing example (left out where one block stands for
    several checks, each with its own example)."""
    if style is TracebackStyle.LONG:
        source, most = (check.longrepr or check.text), LONG_LINES
    else:
        source, most = (check.text if example else error_text(check)), MESSAGE_LINES
    lines = [line for line in source.splitlines() if line.strip()] or ["failed"]
    kept, left = _capped(lines, most)
    out = [Text(f"{_INDENT}{shown(line, LINE_CHARS)}") for line in kept]
    if left:
        out.append(Text(f"{_INDENT}... ({count(left, 'more line')}; the report has them all)", style="dim"))
    if check.driver_frame:
        out.append(Text(f"{_INDENT}driver frame: {shown(check.driver_frame, LINE_CHARS)}"))
    if check.shrink_note:
        out.append(Text(f"{_INDENT}note:         {shown(check.shrink_note, LINE_CHARS)}"))
    if check.stack and style is not TracebackStyle.LONG:  # the long form's traceback already has it
        stack_lines, stack_left = _capped(check.stack.splitlines(), STACK_LINES)
        stack = f"\n{_INDENT}{' ' * 14}".join(shown(line, 500) for line in stack_lines)
        out.append(Text(f"{_INDENT}stack:        {stack}"))
        if stack_left:
            out.append(Text(f"{_INDENT}{' ' * 14}... ({count(stack_left, 'more line')})", style="dim"))
    return out


def _where(checks: Sequence[CheckResult], shown: Shown) -> Text:
    if len(checks) == 1:
        return Text(f"{_INDENT}check:        {shown(checks[0].nodeid, None)}")
    names = ", ".join(check.name for check in checks)
    return Text(f"{_INDENT}same error in {count(len(checks), 'check')}: {shown(names, None)}")


def _reproduce(result: RunResult, check: CheckResult, shown: Shown) -> list[Text]:
    # Terminals end up in CI logs: reproduce lines hide secrets just as the report does.
    return [
        Text(f"{_INDENT}reproduce:    {shown(result.reproduce_command(check, redact=True), None)}"),
        Text(f"{_INDENT}pytest:       {shown(result.reproduce_pytest(check, redact=True), None)}"),
    ]


def _shared_block(result: RunResult, group: FailureGroup, style: TracebackStyle, shown: Shown) -> list[Text]:
    checks = [check for _, check in group.members]
    ids = group.requirement_ids
    out = [
        Text.assemble(
            (f"{_FAIL} same error in {count(len(checks), 'check')}", "bold red"),
            f" of {count(len(ids), 'requirement')}:",
        )
    ]
    out += _block(group.first, style, shown, example=False)
    out.append(Text(f"{_INDENT}requirements: {shown(', '.join(ids), None)}"))
    return out + _reproduce(result, group.first, shown)


def _header(requirement: RequirementResult) -> Text:
    return Text.assemble((f"{_FAIL} {requirement.id}", "bold red"), f" ({requirement.level.value})")


def _one_line_each(requirements: Sequence[RequirementResult], shown: Shown) -> list[Text]:
    out = []
    for requirement in requirements:
        if requirement.known_failure:
            out.append(_known(requirement, shown))
            continue
        out.append(Text.assemble(_header(requirement), f": {shown(requirement.reason or 'failed', 300)}"))
    return out


def _known(requirement: RequirementResult, shown: Shown) -> Text:
    first = (requirement.reason or "failed").strip().splitlines() or ["failed"]
    return Text.assemble(
        (f"{_KNOWN} {requirement.id}", "bold yellow"),
        f" ({requirement.level.value}): known failure: {shown(requirement.expected, 300)}; "
        f"it failed with: {shown(first[0], 300)}",
    )


def unexpected_pass_lines(result: RunResult, shown: Shown) -> list[Text]:
    """One line per requirement declared as an expected failure that passed (empty when none did)."""
    passed = result.unexpected_passes
    if not passed:
        return []
    out = [Text(f"Expected failures that passed ({len(passed)}):", style="bold yellow")]
    for requirement in passed:
        out.append(
            Text.assemble(
                (f"{_UNEXPECTED} {requirement.id}", "bold yellow"),
                f" passed although declared a known failure ({shown(requirement.expected, 300)}): "
                f"remove --expect-fail {requirement.id}",
            )
        )
    return out


def failure_lines(result: RunResult, style: TracebackStyle, shown: Shown) -> list[Text]:
    """Every line of the "Failed requirements" section for ``result`` (empty when none failed).

    Failures come in root-cause order (``run/root_cause.py``): the most basic failed rule first, and
    under it, marked as such, the failures that probably follow from it. A block shared by several
    requirements is shown where the first of them comes.
    """
    failed = result.failed_requirements
    if not failed:
        return []
    unrun = [
        r for r in failed if not r.known_failure and all(c.outcome is Outcome.NOT_RUN for c in r.failures)
    ]
    ordered = in_root_cause_order([r for r in failed if r not in unrun])
    # A requirement that never ran was not judged: it is counted apart, so an interrupted run does not
    # read as a hundred failures.
    out = [Text(f"Failed requirements ({len(ordered)}):", style="bold red")] if ordered else []
    roots = [item.requirement.id for item in ordered if item.consequence_of is None]
    if len(ordered) > 1 and len(roots) < len(ordered):
        out.append(
            Text(
                f"{_INDENT}read first: {shown(', '.join(roots), None)}; the others are listed under the "
                "failure they probably follow from",
                style="dim",
            )
        )
    if style is TracebackStyle.NO:
        out += _one_line_each([item.requirement for item in ordered], shown)
        if unrun:
            out.append(Text(f"Did not run ({len(unrun)}):", style="bold red"))
        return out + _one_line_each(unrun, shown)
    groups = group_failures(item.requirement for item in ordered)
    shared = {group.key: group for group in groups if group.shared}
    shown_groups: set[FailureKey] = set()
    not_run: dict[str, list[str]] = {}
    for item in ordered:
        requirement = item.requirement
        if requirement.known_failure:
            out.append(_known(requirement, shown))
            continue
        ran = [check for check in requirement.failures if check.outcome is not Outcome.NOT_RUN]
        for check in ran:
            key = failure_key(check)
            if key in shared and key not in shown_groups:
                shown_groups.add(key)
                out += _shared_block(result, shared[key], style, shown)
        own = [check for check in ran if failure_key(check) not in shared]
        if not own:
            continue  # every failure of it is in a shared block, which names it
        out.append(_header(requirement))
        if item.consequence_of is not None:
            out.append(
                Text(
                    f"{_INDENT}probably a consequence of {item.consequence_of.id} (above): fix that first",
                    style="dim",
                )
            )
        by_key: dict[FailureKey, list[CheckResult]] = {}
        for check in own:
            by_key.setdefault(failure_key(check), []).append(check)
        for checks in by_key.values():
            out += _block(checks[0], style, shown)
            out.append(_where(checks, shown))
        also = len(ran) - len(own)
        if also:
            out.append(Text(f"{_INDENT}and {count(also, 'check')} with an error shown above", style="dim"))
        out += _reproduce(result, own[0], shown)
    for requirement in unrun:
        not_run.setdefault(requirement.reason or "did not run", []).append(requirement.id)
    if not_run:
        out.append(Text(f"Did not run ({len(unrun)}):", style="bold red"))
    for reason, names in not_run.items():
        ids = tuple(names)
        out.append(
            Text.assemble(
                (f"{_FAIL} {count(len(ids), 'requirement')} did not run", "bold red"),
                f": {shown(reason.removeprefix('did not run: '), 300)}",
            )
        )
        if len(ids) <= NOT_RUN_NAMED:
            out.append(Text(f"{_INDENT}requirements: {shown(', '.join(ids), None)}"))
    return out
