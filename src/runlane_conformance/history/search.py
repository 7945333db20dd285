"""The cycle search: for each class, whether the graph holds a cycle of it, and its shortest witness.

Two questions are kept apart, as Elle keeps them apart:

* **Does a cycle of the class exist?** Decided completely, for the whole
  graph, by a test that looks at every edge once or a few times: strongly
  connected components of the subgraph the class may use (G0, G1c, G2-item,
  G2), of a two-layer product graph (G-nonadjacent: an anti-dependency may
  not follow an anti-dependency), or reachability over the ``ww``/``wr``
  subgraph from the target of each anti-dependency back to its source
  (G-single), with the reachability sets held as bit sets over the
  condensation. No start is skipped and nothing depends on history order.
* **Which cycle is the witness?** A breadth-first search from the sources of
  the edges the class needs, over (attempt, counters) states, so the first
  completion found from a start is the shortest closed walk through it; a
  witness must be a simple cycle (no attempt twice), so a closed walk that
  repeats an attempt is never reported. Starts known to lie on a cycle of the
  class come first, then every other candidate, each search cut at the
  length of the best witness so far.

The witness search has one bound, a number of edge relaxations per class that
grows with the size of the graph (``SEARCH_STEPS_PER_EDGE`` per edge, at
least ``SEARCH_STEPS_FLOOR``), never the clock. Stopped by it with a witness
in hand, the class is still found; the report says the witness is the
shortest among the starts searched and names the bound. Stopped before any
simple witness turned up, the class is *inconclusive* (``Search.bounded``
names why); never absent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ANTI",
    "READS",
    "SEARCH_STEPS_FLOOR",
    "SEARCH_STEPS_PER_EDGE",
    "Edge",
    "EdgeKind",
    "Search",
    "reachable",
    "search_cycles",
]

#: Edge relaxations the witness search may spend per class, per edge of the graph (and at least the floor).
SEARCH_STEPS_PER_EDGE = 64
SEARCH_STEPS_FLOOR = 1_000_000


class EdgeKind(StrEnum):
    """``pwr``/``prw`` are the predicate forms of ``wr``/``rw``: what an index page implies by omission.

    ``rt`` is real-time order (one attempt ended before another began, see ``realtime``): never part
    of the dependency graph these classes are searched in, only of the real-time context.
    """

    WW = "ww"
    WR = "wr"
    PWR = "pwr"
    RW = "rw"
    PRW = "prw"
    RT = "rt"


ANTI = frozenset({EdgeKind.RW, EdgeKind.PRW})
READS = frozenset({EdgeKind.WR, EdgeKind.PWR})
_DEPENDS = frozenset({EdgeKind.WW}) | READS
_ALL = frozenset(EdgeKind) - {EdgeKind.RT}


@dataclass(frozen=True, order=True)
class Edge:
    """One dependency between two attempts: its kind, the key it is about, and what happened.

    ``inferred``: the edge holds only if an absence the reader saw was a delete (or a move out of a
    range) rather than the key before its create; the other reading closes a G-single through the
    key's creator instead (see ``check``). A cycle through such an edge proves G-single or worse, so
    G0 and G1c never use one, and G-single counts a cycle of reads through one.
    """

    kind: EdgeKind
    key: str
    detail: str
    inferred: bool = False


Graph = dict[int, dict[int, set[Edge]]]
Steps = tuple[tuple[int, Edge, int], ...]
Extra = tuple[int, ...]


@dataclass(frozen=True)
class _Spec:
    """A cycle class: the edges it may use, the edges a witness must contain, and its counters."""

    name: str
    allowed: frozenset[EdgeKind]
    required: frozenset[EdgeKind]
    step: Callable[[Extra, Edge], Extra | None]  # counters after one more edge; None: may not take it
    done: Callable[[Extra], bool]
    initial: Extra
    certain: bool = False  # uses no inferred edge


def _g0(extra: Extra, edge: Edge) -> Extra:
    return extra


def _g1c(extra: Extra, edge: Edge) -> Extra:
    return (1,) if edge.kind in READS else extra


def _single(extra: Extra, edge: Edge) -> Extra | None:
    # (anti-dependencies so far, inferred reads so far (capped at 1))
    anti, guessed = extra
    if edge.kind in ANTI:
        return None if anti else (1, guessed)
    if edge.inferred:
        return (anti, 1)
    return extra


def _nonadjacent(extra: Extra, edge: Edge) -> Extra | None:
    # (anti-dependencies so far capped at 2, last edge anti, first edge anti (-1: no edge yet))
    count, last, first = extra
    anti = edge.kind in ANTI
    if anti and last:
        return None
    return (min(2, count + anti), int(anti), int(anti) if first < 0 else first)


def _item(extra: Extra, edge: Edge) -> Extra:
    return (min(2, extra[0] + 1),) if edge.kind is EdgeKind.RW else extra


def _predicate(extra: Extra, edge: Edge) -> Extra:
    return (max(extra[0], int(edge.kind is EdgeKind.PRW)), min(2, extra[1] + (edge.kind in ANTI)))


SPECS: tuple[_Spec, ...] = (
    _Spec("G0", frozenset({EdgeKind.WW}), frozenset({EdgeKind.WW}), _g0, lambda e: True, (), certain=True),
    _Spec("G1c", _DEPENDS, READS, _g1c, lambda e: e[0] == 1, (0,), certain=True),
    _Spec("G-single", _ALL, ANTI | READS, _single, lambda e: e[0] == 1 or e[1] == 1, (0, 0)),
    _Spec(
        "G-nonadjacent",
        _ALL,
        ANTI,
        _nonadjacent,
        lambda e: e[0] >= 2 and not (e[1] and e[2] == 1),
        (0, 0, -1),
    ),
    _Spec(
        "G2-item",
        _DEPENDS | {EdgeKind.RW},
        frozenset({EdgeKind.RW}),
        _item,
        lambda e: e[0] >= 2,
        (0,),
    ),
    _Spec("G2", _ALL, frozenset({EdgeKind.PRW}), _predicate, lambda e: e[0] >= 1 and e[1] >= 2, (0, 0)),
)


@dataclass(frozen=True)
class Search:
    """What the search established for one class.

    ``steps`` is the witness (``None``: no cycle of the class, or none found
    within the bound). ``bounded`` is ``None`` when the search was complete;
    otherwise it says which bound stopped it: with a witness, that a shorter
    one may exist; without, that the class is inconclusive.
    """

    name: str
    steps: Steps | None
    bounded: str | None


def _restricted(
    graph: Graph, allowed: frozenset[EdgeKind], certain: bool = False
) -> dict[int, list[tuple[int, Edge]]]:
    """Each attempt's out-edges of the allowed kinds: one label per kind and target (a proven one first).

    ``certain``: inferred edges are left out.
    """
    out: dict[int, list[tuple[int, Edge]]] = {}
    for source in sorted(graph):
        targets = graph[source]
        chosen: list[tuple[int, Edge]] = []
        for target in sorted(targets):
            kinds: set[EdgeKind] = set()
            for label in sorted(targets[target], key=lambda e: (e.inferred, e)):
                if certain and label.inferred:
                    continue
                if label.kind in allowed and label.kind not in kinds:
                    kinds.add(label.kind)
                    chosen.append((target, label))
        if chosen:
            out[source] = chosen
    return out


def _within_components(graph: Graph) -> Graph:
    """Only the edges inside a strongly connected component of the whole graph: every cycle lies in one.

    A serializable history has none, so its search ends here.
    """
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    component = _components(nodes, lambda n: graph.get(n, {}).keys())
    kept: Graph = {}
    for source, targets in graph.items():
        inside = {t: labels for t, labels in targets.items() if component[t] == component[source]}
        if inside:
            kept[source] = inside
    return kept


def _components(nodes: Iterable[int], out: Callable[[int], Iterable[int]]) -> dict[int, int]:
    """Strongly connected components (iterative Tarjan): node -> component number."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    component: dict[int, int] = {}
    counter = 0
    components = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[int, Iterator[int]]] = [(root, iter(out(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for target in successors:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(out(target))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component


def _qualifying_starts(spec: _Spec, edges: dict[int, list[tuple[int, Edge]]]) -> list[int]:
    """Sources of required edges that provably lie on a closed walk of the class (complete test)."""
    nodes = sorted(set(edges) | {t for out in edges.values() for t, _ in out})
    if spec.name == "G-single":
        return _single_starts(edges, nodes)
    if spec.name == "G-nonadjacent":
        return _nonadjacent_starts(edges, nodes)
    component = _components(nodes, lambda n: (t for t, _ in edges.get(n, ())))
    required: dict[int, set[tuple[int, int]]] = {}
    predicate: dict[int, int] = {}
    anti: dict[int, set[tuple[int, int]]] = {}
    sizes: dict[int, int] = {}
    for node in nodes:
        sizes[component[node]] = sizes.get(component[node], 0) + 1
    for source, out in edges.items():
        for target, label in out:
            c = component[source]
            if c != component[target]:
                continue
            if label.kind in spec.required:
                required.setdefault(c, set()).add((source, target))
            if label.kind in ANTI:
                anti.setdefault(c, set()).add((source, target))
            if label.kind is EdgeKind.PRW:
                predicate[c] = predicate.get(c, 0) + 1

    def qualifies(c: int) -> bool:
        if spec.name == "G2-item":
            return len(required.get(c, ())) >= 2
        if spec.name == "G2":
            return predicate.get(c, 0) >= 1 and len(anti.get(c, ())) >= 2
        return sizes[c] > 1 and bool(required.get(c))

    return sorted({s for c, pairs in required.items() if qualifies(c) for s, _ in pairs})


def _single_starts(edges: dict[int, list[tuple[int, Edge]]], nodes: list[int]) -> list[int]:
    """Sources ``u`` of anti-dependencies (or inferred reads) ``u -> v`` where ``v`` reaches ``u`` over
    ``ww``/``wr`` edges."""
    depends = {s: [t for t, label in out if label.kind in _DEPENDS] for s, out in edges.items()}
    component = _components(nodes, lambda n: depends.get(n, ()))
    queries = sorted(
        {
            (source, target)
            for source, out in edges.items()
            for target, label in out
            if label.kind in ANTI or (label.inferred and label.kind in READS)
        }
    )
    if not queries:
        return []
    # Condensation in reverse topological order: Tarjan numbers components so that every edge between
    # components goes from a higher number to a lower one, so ascending numbers are sinks first.
    count = max(component.values()) + 1
    successors: list[set[int]] = [set() for _ in range(count)]
    for source, targets in depends.items():
        for target in targets:
            if component[source] != component[target]:
                successors[component[source]].add(component[target])
    wanted = sorted({component[u] for u, _ in queries})
    found: set[int] = set()
    chunk = 4096
    for begin in range(0, len(wanted), chunk):
        bit = {c: 1 << i for i, c in enumerate(wanted[begin : begin + chunk])}
        reach = [0] * count
        for c in range(count):
            mask = bit.get(c, 0)
            for s in successors[c]:
                mask |= reach[s]
            reach[c] = mask
        for u, v in queries:
            target_bit = bit.get(component[u])
            if target_bit is not None and reach[component[v]] & target_bit:
                found.add(u)
    return sorted(found)


def reachable(
    nodes: Iterable[int], out: Callable[[int], Iterable[int]], pairs: Iterable[tuple[int, int]]
) -> set[tuple[int, int]]:
    """The pairs ``(a, b)`` with a path from ``a`` to ``b`` (``a == b`` only through a cycle).

    Bit sets over the condensation, 4,096 targets at a time: every edge is looked at once per chunk.
    """
    wanted = sorted(set(pairs))
    if not wanted:
        return set()
    ordered = sorted(set(nodes) | {n for pair in wanted for n in pair})
    component = _components(ordered, out)
    count = max(component.values()) + 1
    successors: list[set[int]] = [set() for _ in range(count)]
    cyclic = [False] * count
    for source in ordered:
        for target in out(source):
            if component[source] != component[target]:
                successors[component[source]].add(component[target])
            else:
                cyclic[component[source]] = True
    targets = sorted({component[b] for _, b in wanted})
    found: set[tuple[int, int]] = set()
    chunk = 4096
    for begin in range(0, len(targets), chunk):
        bit = {c: 1 << i for i, c in enumerate(targets[begin : begin + chunk])}
        reach = [0] * count  # components reachable by a path of one edge or more
        for c in range(count):  # sinks first (Tarjan numbers a component after all it reaches)
            mask = bit.get(c, 0) if cyclic[c] else 0
            for s in successors[c]:
                mask |= reach[s] | bit.get(s, 0)
            reach[c] = mask
        for a, b in wanted:
            target_bit = bit.get(component[b])
            if target_bit is not None and reach[component[a]] & target_bit:
                found.add((a, b))
    return found


def _nonadjacent_starts(edges: dict[int, list[tuple[int, Edge]]], nodes: list[int]) -> list[int]:
    """Sources of anti-dependencies in a component of the two-layer graph holding two of them.

    Layer 0 is "the last edge was a dependency", layer 1 "it was an anti-dependency"; a dependency
    leads into layer 0 from either, an anti-dependency only from layer 0 into layer 1. A closed walk
    through ``(x, 0)`` is exactly one whose anti-dependencies are never adjacent, around the end too.
    """

    def out(state: int) -> Iterable[int]:
        node, layer = divmod(state, 2)
        for target, label in edges.get(node, ()):
            if label.kind in ANTI:
                if layer == 0:
                    yield target * 2 + 1
            else:
                yield target * 2

    states = [n * 2 + layer for n in nodes for layer in (0, 1)]
    component = _components(states, out)
    pairs: dict[int, set[tuple[int, int]]] = {}
    for source, targets in edges.items():
        for target, label in targets:
            if label.kind in ANTI and component[source * 2] == component[target * 2 + 1]:
                pairs.setdefault(component[source * 2], set()).add((source, target))
    return sorted({s for found in pairs.values() if len(found) >= 2 for s, _ in found})


class _Budget:
    def __init__(self, steps: int) -> None:
        self.left = steps
        self.limit = steps


def _bfs(
    start: int, edges: dict[int, list[tuple[int, Edge]]], spec: _Spec, bound: int | None, budget: _Budget
) -> Steps | None:
    """The shortest simple cycle of the class through ``start`` that BFS over states meets first.

    ``bound``: only cycles shorter than this are of interest. Spends the budget per relaxation (it may
    go negative inside one search: a search once begun is finished, so its result is never partial).
    """
    origin = (start, spec.initial)
    parent: dict[tuple[int, Extra], tuple[tuple[int, Extra], Edge] | None] = {origin: None}
    queue: deque[tuple[tuple[int, Extra], int]] = deque([(origin, 0)])
    while queue:
        state, depth = queue.popleft()
        if bound is not None and depth + 1 >= bound:
            return None
        node, extra = state
        for target, label in edges.get(node, ()):
            budget.left -= 1
            after = spec.step(extra, label)
            if after is None:
                continue
            nxt = (target, after)
            if target == start:
                if spec.done(after):
                    path = [(node, label, target)]
                    current = state
                    back = parent[state]
                    while back is not None:
                        previous, edge = back
                        path.append((previous[0], edge, current[0]))
                        current = previous
                        back = parent[previous]
                    path.reverse()
                    if len({s for s, _, _ in path}) == len(path):
                        return tuple(path)
                continue
            if nxt not in parent:
                parent[nxt] = (state, label)
                queue.append((nxt, depth + 1))
    return None


def search_cycles(graph: Graph) -> list[Search]:
    """Per class, in ``SPECS`` order: its shortest simple witness or none, and any bound that stopped it.

    ``graph`` maps source -> target -> labels. The answer depends on the graph alone (starts in
    ascending node order), so one history always gives the same witnesses.
    """
    size = sum(len(targets) for targets in graph.values()) + len(graph)
    steps = max(SEARCH_STEPS_FLOOR, SEARCH_STEPS_PER_EDGE * size)
    cyclic = _within_components(graph)
    results: list[Search] = []
    for spec in SPECS:
        edges = _restricted(cyclic, spec.allowed, spec.certain)
        qualifying = _qualifying_starts(spec, edges)
        if not qualifying:
            results.append(Search(spec.name, None, None))
            continue
        budget = _Budget(steps)
        best: Steps | None = None
        searched = 0
        for start in qualifying:
            if budget.left <= 0:
                break
            found = _bfs(start, edges, spec, None if best is None else len(best), budget)
            searched += 1
            if found is not None and (best is None or len(found) < len(best)):
                best = found
                if len(best) == 2:
                    searched = len(qualifying)  # nothing is shorter than two attempts
                    break
        bounded = None
        if searched < len(qualifying):
            bounded = (
                f"the witness search stopped at its bound of {budget.limit:,} edge steps "
                f"({SEARCH_STEPS_PER_EDGE} per edge of the graph, at least {SEARCH_STEPS_FLOOR:,}) after "
                f"{searched} of {len(qualifying)} start attempts"
            )
        elif best is None:
            bounded = (
                "a closed walk of this class exists, but every one the search met repeats an attempt, "
                "so no simple cycle could be named"
            )
        results.append(Search(spec.name, best, bounded))
    return results
