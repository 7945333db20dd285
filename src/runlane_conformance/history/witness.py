"""A checker verdict as plain data: each finding's attempts, edges and operations, and what it rules out.

``Report.render`` gives a person the text; this gives a program (the HTML
report, a CI tool) the same witness as a JSON-ready mapping, so nothing has to
parse text back. It only reads what ``check_history`` found; it searches
nothing and changes no verdict.

Each finding carries its consequence in the terms of the isolation-level
lattice ``check.PROSCRIBED_BY`` defines: ``violates`` is the weakest levels
that rule out its class, ``allowed_by`` the strongest levels that permit it.
The whole history's line (``consistent_with``, ``violated``) folds every
finding and every undecided class together, as ``Report.levels`` does.

Real-time order is context (``realtime``): ``realtime`` is the report's line
about it (how many rt edges the recorded spans give, or that none were
recorded), each finding lists under ``realtime`` the rt edges between its own
attempts (one ended before the other began), and ``realtime_cycle``, when
present, is the shortest cycle through real-time order, shaped like a finding.
None of it changes a verdict: the contract asks for some serial order, not one
that follows when transactions ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..in_words import decoded_tuple
from .findings import (
    LEVELS,
    MEANING,
    PROSCRIBED_BY,
    REALTIME_MEANING,
    Anomaly,
    Level,
    Report,
    Step,
    ran_before,
    realtime_pairs,
)
from .model import Append, Attempt, Bound, History, Read, Scan, Seen, Write, WriteKind

__all__ = ["allowed_by", "operation_text", "violates", "witness"]


def _strongest(levels: Iterable[Level]) -> list[Level]:
    chosen = list(levels)
    return [a for a in chosen if not any(PROSCRIBED_BY[b] > PROSCRIBED_BY[a] for b in chosen)]


def _weakest(levels: Iterable[Level]) -> list[Level]:
    chosen = list(levels)
    return [a for a in chosen if not any(PROSCRIBED_BY[b] < PROSCRIBED_BY[a] for b in chosen)]


def violates(anomaly: Anomaly) -> list[str]:
    """The weakest isolation levels that forbid ``anomaly`` (every stronger level forbids it too)."""
    return [level.value for level in _weakest(level for level in LEVELS if anomaly in PROSCRIBED_BY[level])]


def allowed_by(anomaly: Anomaly) -> list[str]:
    """The strongest isolation levels that still permit ``anomaly`` (empty: every level forbids it)."""
    return [
        level.value for level in _strongest(level for level in LEVELS if anomaly not in PROSCRIBED_BY[level])
    ]


def _value(text: str) -> str:
    """An encoded sort value decoded for reading (``<2030-01-02T00:00:00Z>``), else as recorded."""
    return decoded_tuple(text) or text


def _seen(seen: Seen | None) -> str:
    return "absent" if seen is None else f"v{seen.version}({seen.value})"


def _bound(bound: Bound | None, lower: bool) -> str:
    if bound is None:
        return "-inf" if lower else "+inf"
    if lower:
        return ("[" if bound.inclusive else "(") + _value(bound.value)
    return _value(bound.value) + ("]" if bound.inclusive else ")")


def operation_text(op: Read | Scan | Write | Append) -> str:
    """One operation in words, with versions and values, scan bounds and sorts decoded."""
    if isinstance(op, Read):
        return f"read {op.key} = {_seen(op.seen)}"
    if isinstance(op, Scan):
        listed = ", ".join(f"{i.key}@{i.value}" for i in op.items) or "nothing"
        mode = "exclusive " if op.exclusive else ""
        return (
            f"scan {mode}{op.index}/{op.partition} {_bound(op.lower, True)} .. {_bound(op.upper, False)} "
            f"{'desc' if op.descending else 'asc'} limit {op.limit} -> {listed}"
        )
    if isinstance(op, Write):
        if op.kind is WriteKind.CREATE:
            return f"create {op.key} = {op.value}"
        if op.kind is WriteKind.REPLACE:
            return f"replace {op.key} {_seen(op.supersedes)} -> {op.value}"
        return f"delete {op.key} {_seen(op.supersedes)}"
    return f"append {op.stream}/{op.partition} {len(op.values)} value(s)"


def _node(attempt: Attempt) -> dict[str, Any]:
    return {
        "id": attempt.id,
        "transaction": attempt.transaction,
        "outcome": attempt.outcome.value,
        "where": f"client {attempt.client}, instance {attempt.instance}, process {attempt.process}",
        "ops": [operation_text(op) for op in attempt.ops],
    }


def _edges(steps: Iterable[Step]) -> list[dict[str, Any]]:
    return [
        {
            "source": step.source,
            "target": step.target,
            "kind": step.edge.kind.value,
            "key": step.edge.key,
            "detail": step.edge.detail,
        }
        for step in steps
    ]


def _realtime(by_id: dict[str, Attempt], ids: Iterable[str]) -> list[dict[str, Any]]:
    """The rt edges between the given attempts (context beside a finding's cycle)."""
    return [
        {
            "source": a.id,
            "target": b.id,
            "kind": "rt",
            "key": a.span.clock if a.span is not None else "",
            "detail": ran_before(a, b),
        }
        for a, b in realtime_pairs(by_id, ids)
    ]


def witness(
    report: Report, history: History, only: Iterable[Anomaly] | None = None, per_class: int = 3
) -> dict[str, Any]:
    """The findings of ``report`` (of the classes ``only``) as data: nodes, edges, operations, levels.

    At most ``per_class`` findings of one class are given (the first in history order, as the text
    does); ``omitted`` counts the rest per class. Every value is a string, an integer, a boolean or
    a list or mapping of those, so the result is ready for JSON.
    """
    wanted = set(Anomaly) if only is None else set(only)
    by_id = {a.id: a for a in history.attempts}
    findings: list[dict[str, Any]] = []
    shown: dict[str, int] = {}
    for finding in report.findings:
        if finding.anomaly not in wanted:
            continue
        count = shown[finding.anomaly.value] = shown.get(finding.anomaly.value, 0) + 1
        if count > per_class:
            continue
        findings.append(
            {
                "anomaly": finding.anomaly.value,
                "meaning": MEANING[finding.anomaly],
                "explanation": finding.explanation,
                "violates": violates(finding.anomaly),
                "allowed_by": allowed_by(finding.anomaly),
                "cycle": bool(finding.steps),
                "nodes": [_node(by_id[a]) for a in dict.fromkeys(finding.attempts) if a in by_id],
                "edges": _edges(finding.steps),
                "realtime": _realtime(by_id, finding.attempts),
            }
        )
    result: dict[str, Any] = {
        "attempts": report.attempts,
        "committed": report.committed,
        "edges": report.edges,
        "levels": report.levels(),
        "consistent_with": [level.value for level in report.consistent_with()],
        "violated": [level.value for level in report.violated()],
        "undecided": sorted(a.value for a in report.inconclusive),
        "realtime": report.realtime_line(),
        "findings": findings,
        "omitted": {name: count - per_class for name, count in sorted(shown.items()) if count > per_class},
    }
    cycle = report.realtime
    if cycle is not None:
        result["realtime_cycle"] = {
            "anomaly": cycle.name,
            "meaning": REALTIME_MEANING,
            "explanation": cycle.explanation,
            "violates": ["strict serializable"],
            "allowed_by": [],
            "cycle": True,
            "nodes": [_node(by_id[a]) for a in dict.fromkeys(cycle.attempts) if a in by_id],
            "edges": _edges(cycle.steps),
        }
    return result
