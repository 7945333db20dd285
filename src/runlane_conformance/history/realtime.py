"""Real-time order: which committed attempts ended before others began, and what that order adds.

An attempt's ``span`` (``model.Span``) places it on a logical clock the workload keeps: in each
process, every attempt of one round ends before any attempt of the next round begins, because the
workload waits for the whole round. ``realtime_edges`` draws ``a -rt-> b`` for every committed ``a``
that ended before committed ``b`` began on the same clock, keeping only the edges that no third
attempt already implies (``a`` ended before ``c`` began and ``c`` ended before ``b`` began): the order
is an interval order, so the rest follow by transitivity.

A cycle through the dependency edges and at least one real-time edge means no serial order of the
committed transactions agrees with when they ran: the history is not *strictly* serializable.
``realtime_cycle`` finds the shortest such cycle (breadth-first from each real-time edge inside a
strongly connected component of the combined graph, with the same kind of step bound as the
dependency search, never the clock) and names it the way Elle does: the dependency class it would be
with the real-time edges read as dependencies, plus ``-realtime``. Inferred edges are left out, so a
named cycle is proved.

This is context, not a verdict: the contract asks that every committed history equal *some* serial
order of its transactions and says nothing of when they ran, so no requirement fails on a real-time
cycle (see ``docs/histories.md``).
"""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .model import Attempt
from .search import ANTI, SEARCH_STEPS_FLOOR, SEARCH_STEPS_PER_EDGE, Edge, EdgeKind, Graph, _components

__all__ = ["RealtimeSearch", "realtime_cycle", "realtime_edges"]

Steps = tuple[tuple[int, Edge, int], ...]


def realtime_edges(attempts: Sequence[Attempt], committed: Iterable[int]) -> Graph:
    """``source -> target -> {rt edge}`` between committed attempts with spans, transitively reduced.

    ``target`` is a direct successor of ``source`` when it began after ``source`` ended and no other
    committed attempt of the clock fits wholly between them: its start is at most the earliest end
    among the attempts that began after ``source`` ended.
    """
    by_clock: dict[str, list[int]] = defaultdict(list)
    for index in sorted(committed):
        if attempts[index].span is not None:
            by_clock[attempts[index].span.clock].append(index)  # type: ignore[union-attr]
    graph: Graph = {}
    for clock, members in sorted(by_clock.items()):
        spans = {i: attempts[i].span for i in members}
        ordered = sorted(members, key=lambda i: (spans[i].start, i))  # type: ignore[union-attr]
        starts = [spans[i].start for i in ordered]  # type: ignore[union-attr]
        earliest_end = [0] * len(ordered)
        low: int | None = None
        for position in range(len(ordered) - 1, -1, -1):
            end = spans[ordered[position]].end  # type: ignore[union-attr]
            low = end if low is None else min(low, end)
            earliest_end[position] = low
        for source in members:
            span = spans[source]
            assert span is not None
            first = bisect.bisect_right(starts, span.end)
            if first == len(ordered):
                continue
            limit = earliest_end[first]
            for target in ordered[first:]:
                target_span = spans[target]
                assert target_span is not None
                if target_span.start > limit:
                    break
                graph.setdefault(source, {})[target] = {
                    Edge(
                        EdgeKind.RT,
                        clock,
                        f"{attempts[source].id} ended before {attempts[target].id} began (on clock {clock}: "
                        f"tick {span.end} < tick {target_span.start})",
                    )
                }
    return graph


@dataclass(frozen=True)
class RealtimeSearch:
    """The shortest cycle through a real-time edge found (``None``: none), its class, and any bound hit."""

    steps: Steps | None
    name: str | None
    bounded: str | None


def _name(steps: Steps) -> str:
    kinds = [edge.kind for _, edge, _ in steps if edge.kind is not EdgeKind.RT]
    anti = sum(kind in ANTI for kind in kinds)
    if anti == 0:
        base = "G0" if all(kind is EdgeKind.WW for kind in kinds) else "G1c"
    elif anti == 1:
        base = "G-single"
    else:
        base = "G2" if EdgeKind.PRW in kinds else "G2-item"
    return f"{base}-realtime"


def _bfs(
    start: int, goal: int, out: dict[int, list[tuple[int, Edge]]], bound: int | None, budget: list[int]
) -> Steps | None:
    """The shortest path ``start`` -> ``goal`` (shorter than ``bound`` edges), spending ``budget``."""
    parent: dict[int, tuple[int, Edge] | None] = {start: None}
    queue: deque[tuple[int, int]] = deque([(start, 0)])
    while queue:
        node, depth = queue.popleft()
        if bound is not None and depth + 1 >= bound:
            return None
        for target, label in out.get(node, ()):
            budget[0] -= 1
            if target in parent:
                continue
            parent[target] = (node, label)
            if target == goal:
                path: list[tuple[int, Edge, int]] = []
                current = target
                back = parent[current]
                while back is not None:
                    previous, edge = back
                    path.append((previous, edge, current))
                    current = previous
                    back = parent[current]
                path.reverse()
                return tuple(path)
            queue.append((target, depth + 1))
    return None


def realtime_cycle(dependencies: Graph, realtime: Graph) -> RealtimeSearch:
    """The shortest simple cycle of dependency (not inferred) and real-time edges using at least one
    real-time edge, searched from each real-time edge in ascending order; the answer depends on the
    graphs alone."""
    combined: dict[int, dict[int, Edge]] = defaultdict(dict)
    for graph in (dependencies, realtime):
        for source, targets in graph.items():
            for target, labels in targets.items():
                proven = sorted(label for label in labels if not label.inferred)
                if not proven:
                    continue
                kept = combined[source].get(target)
                # One label per pair: a dependency edge rather than a real-time one, then the first.
                chosen = min(proven, key=lambda e: (e.kind is EdgeKind.RT, e))
                if kept is None or (kept.kind is EdgeKind.RT, kept) > (chosen.kind is EdgeKind.RT, chosen):
                    combined[source][target] = chosen
    if not realtime:
        return RealtimeSearch(None, None, None)
    nodes = sorted(set(combined) | {t for targets in combined.values() for t in targets})
    component = _components(nodes, lambda n: combined.get(n, {}).keys())
    out = {
        source: sorted((t, e) for t, e in targets.items() if component[t] == component[source])
        for source, targets in combined.items()
    }
    starts = sorted(
        (source, target)
        for source, targets in realtime.items()
        for target in targets
        if component[source] == component[target]
    )
    if not starts:
        return RealtimeSearch(None, None, None)
    size = sum(len(targets) for targets in combined.values()) + len(combined)
    limit = max(SEARCH_STEPS_FLOOR, SEARCH_STEPS_PER_EDGE * size)
    budget = [limit]
    best: Steps | None = None
    searched = 0
    for source, target in starts:
        if budget[0] <= 0:
            break
        searched += 1
        path = _bfs(target, source, out, None if best is None else len(best) - 1, budget)
        if path is None:
            continue
        (label,) = realtime[source][target]
        cycle = ((source, label, target), *path)
        if best is None or len(cycle) < len(best):
            best = cycle
            if len(best) == 2:
                searched = len(starts)
                break
    bounded = None
    if searched < len(starts):
        bounded = (
            f"the real-time cycle search stopped at its bound of {limit:,} edge steps after {searched} of "
            f"{len(starts)} real-time edges"
        )
    return RealtimeSearch(best, None if best is None else _name(best), bounded)
