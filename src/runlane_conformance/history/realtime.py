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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .model import Attempt
from .search import ANTI, SEARCH_STEPS_FLOOR, SEARCH_STEPS_PER_EDGE, Edge, EdgeKind, Graph, _components

__all__ = ["RealtimeGraph", "RealtimeSearch", "realtime_cycle", "realtime_edge", "realtime_edges"]

Steps = tuple[tuple[int, Edge, int], ...]
#: source -> the attempts that began after it ended with none wholly between (history indexes).
RealtimeGraph = dict[int, list[int]]


def realtime_edges(attempts: Sequence[Attempt], committed: Iterable[int]) -> RealtimeGraph:
    """``source -> [targets]`` between committed attempts with spans, transitively reduced.

    ``target`` is a direct successor of ``source`` when it began after ``source`` ended and no other
    committed attempt of the clock fits wholly between them: its start is at most the earliest end
    among the attempts that began after ``source`` ended. Plain indexes, not labelled edges: a history
    has tens of thousands of these and only a cycle's few are ever put in words (``realtime_edge``).
    """
    by_clock: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for index in sorted(committed):
        span = attempts[index].span
        if span is not None:
            by_clock[span.clock].append((span.start, index, span.end))
    graph: RealtimeGraph = {}
    for _, members in sorted(by_clock.items()):
        members.sort()
        starts = [start for start, _, _ in members]
        earliest_end = [0] * len(members)
        low: int | None = None
        for position in range(len(members) - 1, -1, -1):
            end = members[position][2]
            low = end if low is None else min(low, end)
            earliest_end[position] = low
        for _, source, end in members:
            first = bisect.bisect_right(starts, end)
            if first == len(members):
                continue
            limit = earliest_end[first]
            stop = bisect.bisect_right(starts, limit, lo=first)
            graph[source] = [index for _, index, _ in members[first:stop]]
    return graph


def realtime_edge(attempts: Sequence[Attempt], source: int, target: int) -> Edge:
    """The labelled ``rt`` edge ``source -> target``, in words."""
    before, after = attempts[source].span, attempts[target].span
    assert before is not None and after is not None
    return Edge(
        EdgeKind.RT,
        before.clock,
        f"{attempts[source].id} ended before {attempts[target].id} began (on clock {before.clock}: "
        f"tick {before.end} < tick {after.start})",
    )


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


_Label = Edge | None  # None: a real-time edge, labelled only once it is part of the witness


def _bfs(
    start: int,
    goal: int,
    out: Callable[[int], list[tuple[int, _Label]]],
    bound: int | None,
    budget: list[int],
) -> tuple[tuple[int, _Label, int], ...] | None:
    """The shortest path ``start`` -> ``goal`` (shorter than ``bound`` edges), spending ``budget``."""
    parent: dict[int, tuple[int, _Label] | None] = {start: None}
    queue: deque[tuple[int, int]] = deque([(start, 0)])
    while queue:
        node, depth = queue.popleft()
        if bound is not None and depth + 1 >= bound:
            return None
        for target, label in out(node):
            budget[0] -= 1
            if target in parent:
                continue
            parent[target] = (node, label)
            if target == goal:
                path: list[tuple[int, _Label, int]] = []
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


def realtime_cycle(
    attempts: Sequence[Attempt], dependencies: Graph, realtime: RealtimeGraph
) -> RealtimeSearch:
    """The shortest simple cycle of dependency (not inferred) and real-time edges using at least one
    real-time edge, searched from each real-time edge in ascending order; the answer depends on the
    graphs alone.

    The components are taken over every edge (an inferred one included, which can only join more
    attempts); the breadth-first search then walks proven edges only, a dependency edge before a
    real-time one to the same attempt.
    """
    if not realtime:
        return RealtimeSearch(None, None, None)
    nodes: set[int] = set(dependencies) | set(realtime)
    for targets in dependencies.values():
        nodes.update(targets)
    for listed in realtime.values():
        nodes.update(listed)

    def successors(node: int) -> Iterable[int]:
        yield from dependencies.get(node, ())
        yield from realtime.get(node, ())

    component = _components(sorted(nodes), successors)
    starts = sorted(
        (source, target)
        for source, targets in realtime.items()
        for target in targets
        if component[source] == component[target]
    )
    if not starts:
        return RealtimeSearch(None, None, None)
    cache: dict[int, list[tuple[int, _Label]]] = {}

    def out(node: int) -> list[tuple[int, _Label]]:
        found = cache.get(node)
        if found is None:
            here = component[node]
            found = []
            for target, labels in sorted(dependencies.get(node, {}).items()):
                if component[target] == here:
                    proven = [label for label in labels if not label.inferred]
                    if proven:
                        found.append((target, min(proven)))
            seen = {target for target, _ in found}
            found.extend((t, None) for t in realtime.get(node, ()) if component[t] == here and t not in seen)
            cache[node] = found
        return found

    size = sum(len(targets) for targets in dependencies.values()) + sum(map(len, realtime.values()))
    limit = max(SEARCH_STEPS_FLOOR, SEARCH_STEPS_PER_EDGE * (size + len(nodes)))
    budget = [limit]
    best: tuple[tuple[int, _Label, int], ...] | None = None
    searched = 0
    for source, target in starts:
        if budget[0] <= 0:
            break
        searched += 1
        path = _bfs(target, source, out, None if best is None else len(best) - 1, budget)
        if path is None:
            continue
        cycle = ((source, None, target), *path)
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
    if best is None:
        return RealtimeSearch(None, None, bounded)
    steps = tuple((s, realtime_edge(attempts, s, t) if e is None else e, t) for s, e, t in best)
    return RealtimeSearch(steps, _name(steps), bounded)
