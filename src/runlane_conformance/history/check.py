"""Judge a recorded history: build its dependency graph, find cycles, name them by Adya's classes.

Edges (between committed attempts ``T`` and ``U``), all exact because every
written value is unique and every replace/delete names what it superseded:

* ``ww``: ``U`` replaced or deleted the version ``T`` wrote;
* ``wr``: ``U`` read (point read or index entry) the version ``T`` wrote;
* ``rw`` (item anti-dependency): ``T`` point-read a version (or the key's
  absence) that ``U`` then superseded (or created);
* ``prw`` (predicate anti-dependency): an exact index page of ``T`` would
  have come back different with ``U``'s write: ``U`` superseded an entry
  ``T`` listed, or put an entry inside the range ``T`` looked at where ``T``
  listed none, and no later version of that key could explain ``T``'s page.

Where the history cannot say which state a read saw (a key read as absent
after it was deleted, or a key created more than once), no edge is drawn:
the checker only reports cycles it can prove, never guesses.

Classes, most severe first, each with the *shortest* cycle of its kind:
``G0`` (only ``ww``), ``G1c`` (``ww``/``wr`` with at least one ``wr``),
``G-single`` (exactly one anti-dependency), ``G2-item`` (two or more item
anti-dependencies, no predicate one), ``G2`` (at least one predicate
anti-dependency, two or more in all). Non-cycle findings: ``G1a`` (a committed
attempt observed a value only an aborted attempt wrote, or that no attempt
wrote), ``G1b`` (it observed a value its writer later overwrote in the same
attempt) and ``lost-update`` (two committed attempts superseded the same
version, or both created a key that was never deleted).

Cycle search uses networkx (strongly connected components; only a
component with more than one attempt can hold a cycle) and a breadth-first
search over (attempt, edge-count) states inside each component, so the
witness is a shortest cycle with the required edge kinds. Output is
deterministic: attempts are visited in history order, edges in sorted order.
"""

from __future__ import annotations

import bisect
import gc
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

from .model import Attempt, History, Outcome, Read, Scan, Seen, Write, WriteKind

__all__ = ["Anomaly", "Edge", "EdgeKind", "Finding", "Report", "Step", "check_history"]

#: At most this many start attempts per component and class are searched (a healthy history has no
#: component at all; a broken one needs one witness, not every cycle).
MAX_STARTS = 64


class Anomaly(StrEnum):
    G0 = "G0"
    G1A = "G1a"
    G1B = "G1b"
    G1C = "G1c"
    G_SINGLE = "G-single"
    G2_ITEM = "G2-item"
    G2 = "G2"
    LOST_UPDATE = "lost-update"


#: What each class means, for messages.
MEANING: dict[Anomaly, str] = {
    Anomaly.G0: "write cycle (dirty write): transactions overwrote each other's versions in a cycle",
    Anomaly.G1A: "aborted read: a committed transaction observed a value only an aborted attempt wrote",
    Anomaly.G1B: "intermediate read: a committed transaction observed a value its writer overwrote itself",
    Anomaly.G1C: "circular information flow: transactions read or overwrote each other's writes in a cycle",
    Anomaly.G_SINGLE: "read skew: a cycle with exactly one anti-dependency (a read overtaken by a write)",
    Anomaly.G2_ITEM: "write skew: a cycle with two or more item anti-dependencies",
    Anomaly.G2: "predicate skew (phantom): a cycle through a predicate anti-dependency of an index scan",
    Anomaly.LOST_UPDATE: "lost update: two committed transactions superseded the same version of a key",
}


class EdgeKind(StrEnum):
    WW = "ww"
    WR = "wr"
    RW = "rw"
    PRW = "prw"


@dataclass(frozen=True, order=True)
class Edge:
    """One dependency between two attempts: its kind, the key it is about, and what happened."""

    kind: EdgeKind
    key: str
    detail: str


@dataclass(frozen=True)
class Step:
    """``source`` -[edge]-> ``target`` in a witness cycle (attempt ids)."""

    source: str
    edge: Edge
    target: str


@dataclass(frozen=True)
class Finding:
    """One named anomaly: the attempts involved and, for a cycle, its steps in order."""

    anomaly: Anomaly
    attempts: tuple[str, ...]
    steps: tuple[Step, ...]
    explanation: str


@dataclass(frozen=True)
class Report:
    """The verdict on a history: every anomaly class found, each with its witness."""

    findings: tuple[Finding, ...]
    attempts: int
    committed: int
    edges: int

    @property
    def anomalies(self) -> frozenset[Anomaly]:
        return frozenset(f.anomaly for f in self.findings)

    @property
    def ok(self) -> bool:
        return not self.findings

    def of(self, *anomalies: Anomaly) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.anomaly in anomalies)

    def render(self, history: History, only: Iterable[Anomaly] | None = None, per_class: int = 3) -> str:
        """A deterministic text account: each finding, each attempt in it with its reads and writes.

        At most ``per_class`` findings of one class are spelled out (the first, in history order;
        a cycle class has only its shortest witness); the rest are counted.
        """
        chosen = self.findings if only is None else self.of(*only)
        by_id = {a.id: a for a in history.attempts}
        lines = [f"{self.attempts} attempts, {self.committed} committed, {self.edges} dependency edges"]
        if not chosen:
            lines.append("no anomaly found")
        shown: dict[Anomaly, int] = {}
        for finding in chosen:
            count = shown[finding.anomaly] = shown.get(finding.anomaly, 0) + 1
            if count > per_class:
                continue
            lines.append(f"{finding.anomaly.value}: {MEANING[finding.anomaly]}")
            lines.append(f"  {finding.explanation}")
            for attempt_id in finding.attempts:
                lines.append(f"  {describe_attempt(by_id[attempt_id])}")
            for step in finding.steps:
                arrow = f"-{step.edge.kind.value}({step.edge.key})->"
                lines.append(f"  {step.source} {arrow} {step.target}: {step.edge.detail}")
        for anomaly, count in shown.items():
            if count > per_class:
                lines.append(f"... and {count - per_class} more {anomaly.value} finding(s) of the same kind")
        return "\n".join(lines)


def _seen_text(seen: Seen | None) -> str:
    return "absent" if seen is None else f"v{seen.version}({seen.value})"


def describe_attempt(attempt: Attempt) -> str:
    """One line: where the attempt ran, how it ended, and every operation with versions and values."""
    parts: list[str] = []
    for op in attempt.ops:
        if isinstance(op, Read):
            parts.append(f"read {op.key}={_seen_text(op.seen)}")
        elif isinstance(op, Scan):
            lo = "-inf" if op.lower is None else ("[" if op.lower.inclusive else "(") + op.lower.value
            hi = "+inf" if op.upper is None else op.upper.value + ("]" if op.upper.inclusive else ")")
            listed = ", ".join(f"{i.key}@{i.value}" for i in op.items) or "nothing"
            mode = " exclusive" if op.exclusive else ""
            parts.append(
                f"scan{mode} {op.index}/{op.partition} {lo}..{hi} {'desc' if op.descending else 'asc'} "
                f"limit {op.limit} -> {listed}"
            )
        elif isinstance(op, Write):
            if op.kind is WriteKind.CREATE:
                parts.append(f"create {op.key}={op.value}")
            elif op.kind is WriteKind.REPLACE:
                parts.append(f"replace {op.key} {_seen_text(op.supersedes)}->{op.value}")
            else:
                parts.append(f"delete {op.key} {_seen_text(op.supersedes)}")
        else:
            parts.append(f"append {op.stream}/{op.partition} {len(op.values)} value(s)")
    where = f"client {attempt.client}, instance {attempt.instance}, process {attempt.process}"
    return f"{attempt.id} [{attempt.outcome.value}; {where}]: " + "; ".join(parts)


@dataclass(frozen=True)
class _Written:
    attempt: int  # index into history.attempts
    write: Write
    position: int  # position among the attempt's ops


@dataclass(frozen=True)
class _Need:
    allowed: frozenset[EdgeKind]
    done: Callable[[int, int, int], bool]  # (item rw, predicate rw, wr) counts, capped at 2 -> satisfied
    alive: Callable[[int, int, int], bool]  # whether a partial path can still become a witness


_ALL = frozenset(EdgeKind)
_NEEDS: tuple[tuple[Anomaly, _Need], ...] = (
    (Anomaly.G0, _Need(frozenset({EdgeKind.WW}), lambda r, p, d: True, lambda r, p, d: True)),
    (Anomaly.G1C, _Need(frozenset({EdgeKind.WW, EdgeKind.WR}), lambda r, p, d: d >= 1, lambda r, p, d: True)),
    (Anomaly.G_SINGLE, _Need(_ALL, lambda r, p, d: r + p == 1, lambda r, p, d: r + p <= 1)),
    (
        Anomaly.G2_ITEM,
        _Need(
            frozenset({EdgeKind.WW, EdgeKind.WR, EdgeKind.RW}), lambda r, p, d: r >= 2, lambda r, p, d: True
        ),
    ),
    (Anomaly.G2, _Need(_ALL, lambda r, p, d: p >= 1 and r + p >= 2, lambda r, p, d: True)),
)


class _Builder:
    """Collects findings and edges from one history; ``report()`` runs the cycle search."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.attempts = history.attempts
        self.findings: list[Finding] = []
        # source -> target -> labels; networkx gets the bare pairs once, for the components.
        self.adjacency: dict[int, dict[int, set[Edge]]] = defaultdict(dict)
        self.edge_count = 0
        self.by_value: dict[str, _Written] = {}
        for index, attempt in enumerate(self.attempts):
            for position, op in enumerate(attempt.ops):
                if isinstance(op, Write) and op.value is not None:
                    self.by_value[op.value] = _Written(index, op, position)
        self.committed = self._committed()

    def _committed(self) -> set[int]:
        committed = {i for i, a in enumerate(self.attempts) if a.outcome is Outcome.COMMITTED}
        unknown = {i for i, a in enumerate(self.attempts) if a.outcome is Outcome.UNKNOWN}
        if unknown:
            for i in sorted(committed):
                for value in self._observed_values(self.attempts[i]):
                    written = self.by_value.get(value)
                    if written is not None and written.attempt in unknown:
                        committed.add(written.attempt)
        return committed

    @staticmethod
    def _observed_values(attempt: Attempt) -> Iterable[str]:
        for op in attempt.ops:
            if isinstance(op, Read) and op.seen is not None:
                yield op.seen.value
            elif isinstance(op, Scan):
                yield from (item.value for item in op.items if item.value is not None)
            elif isinstance(op, Write) and op.supersedes is not None:
                yield op.supersedes.value

    def edge(self, source: int, target: int, edge: Edge) -> None:
        if source == target:
            return
        labels = self.adjacency[source].get(target)
        if labels is None:
            self.adjacency[source][target] = {edge}
        elif edge not in labels:
            labels.add(edge)
        else:
            return
        self.edge_count += 1

    def name(self, index: int) -> str:
        return self.attempts[index].id

    # -- observations: wr edges, G1a, G1b ---------------------------------------------------------

    def observations(self) -> None:
        aborted: dict[tuple[int, int], Finding] = {}
        intermediate: dict[tuple[int, int], Finding] = {}
        for reader in sorted(self.committed):
            attempt = self.attempts[reader]
            for key, value, how in self._observed(attempt):
                written = self.by_value.get(value)
                if written is None:
                    aborted.setdefault(
                        (reader, -1),
                        Finding(
                            Anomaly.G1A,
                            (attempt.id,),
                            (),
                            f"{attempt.id} {how} {key} with value {value}, which no recorded attempt wrote",
                        ),
                    )
                    continue
                writer = written.attempt
                if writer == reader:
                    continue
                if writer not in self.committed:
                    aborted.setdefault(
                        (reader, writer),
                        Finding(
                            Anomaly.G1A,
                            (self.name(writer), attempt.id),
                            (),
                            f"{attempt.id} {how} {key}={value}, written by {self.name(writer)}, which "
                            f"{self.attempts[writer].outcome.value} (never committed)",
                        ),
                    )
                    continue
                later = [
                    op
                    for op in self.attempts[writer].ops[written.position + 1 :]
                    if isinstance(op, Write) and op.key == written.write.key
                ]
                if later:
                    intermediate.setdefault(
                        (reader, writer),
                        Finding(
                            Anomaly.G1B,
                            (self.name(writer), attempt.id),
                            (),
                            f"{attempt.id} {how} {key}={value}, which {self.name(writer)} overwrote itself "
                            f"before committing ({later[-1].value})",
                        ),
                    )
                self.edge(
                    writer,
                    reader,
                    Edge(EdgeKind.WR, key, f"{attempt.id} {how} {value} that {self.name(writer)} wrote"),
                )
        self.findings.extend(aborted[k] for k in sorted(aborted))
        self.findings.extend(intermediate[k] for k in sorted(intermediate))

    @staticmethod
    def _observed(attempt: Attempt) -> Iterable[tuple[str, str, str]]:
        for op in attempt.ops:
            if isinstance(op, Read) and op.seen is not None:
                yield op.key, op.seen.value, "read"
            elif isinstance(op, Scan):
                for item in op.items:
                    if item.value is not None:
                        yield item.key, item.value, "listed (index scan)"
            elif isinstance(op, Write) and op.supersedes is not None:
                yield op.key, op.supersedes.value, f"{op.kind.value}d"

    # -- version order: ww edges, lost updates, chains --------------------------------------------

    def versions(self) -> None:
        self.successors: dict[str, list[int]] = defaultdict(
            list
        )  # value -> committed attempts superseding it
        self.creates: dict[str, list[int]] = defaultdict(list)
        self.deleted: set[str] = set()
        self.create_value: dict[str, str] = {}
        self.next_value: dict[str, str | None] = {}
        for writer in sorted(self.committed):
            attempt = self.attempts[writer]
            for op in attempt.writes:
                if op.kind is WriteKind.DELETE:
                    self.deleted.add(op.key)
                if op.supersedes is None:
                    self.creates[op.key].append(writer)
                    if op.value is not None:
                        self.create_value[op.key] = op.value
                    continue
                previous = op.supersedes.value
                self.successors[previous].append(writer)
                self.next_value[previous] = op.value
                source = self.by_value.get(previous)
                if source is not None and source.attempt in self.committed:
                    self.edge(
                        source.attempt,
                        writer,
                        Edge(
                            EdgeKind.WW,
                            op.key,
                            f"{attempt.id} {op.kind.value}d {_seen_text(op.supersedes)} "
                            f"that {self.name(source.attempt)} wrote",
                        ),
                    )
        for value in sorted(self.successors):
            writers = self.successors[value]
            if len(writers) > 1:
                key = self.by_value[value].write.key if value in self.by_value else "?"
                names = tuple(self.name(w) for w in writers)
                self.findings.append(
                    Finding(
                        Anomaly.LOST_UPDATE,
                        names,
                        (),
                        f"{', '.join(names)} all committed a write superseding {key}={value}: only one can "
                        "follow it, the others' updates were lost",
                    )
                )
        for key in sorted(self.creates):
            writers = self.creates[key]
            if len(writers) > 1 and key not in self.deleted:
                names = tuple(self.name(w) for w in writers)
                self.findings.append(
                    Finding(
                        Anomaly.LOST_UPDATE,
                        names,
                        (),
                        f"{', '.join(names)} all committed a create of {key}, which was never deleted: "
                        "only one create can find it absent",
                    )
                )

    def _linear_chain(self, key: str) -> list[str] | None:
        """The committed values of ``key`` in version order, when the history fixes that order exactly."""
        if key in self.deleted or len(self.creates.get(key, ())) != 1 or key not in self.create_value:
            return None
        chain = [self.create_value[key]]
        while True:
            after = self.successors.get(chain[-1])
            if not after:
                return chain
            if len(after) > 1:
                return None
            following = self.next_value.get(chain[-1])
            if following is None:
                return None
            chain.append(following)

    # -- anti-dependencies ------------------------------------------------------------------------

    def anti_dependencies(self) -> None:
        chains: dict[tuple[str, str], list[tuple[str, str, list[str]]]] = defaultdict(list)
        for key in sorted(self.create_value):
            chain = self._linear_chain(key)
            if chain is None:
                continue
            last = self.by_value[chain[-1]].write.entry
            if last is not None:
                chains[(last.index, last.partition)].append((last.sort, key, chain))
        for entries in chains.values():
            entries.sort()
        for reader in sorted(self.committed):
            attempt = self.attempts[reader]
            for op in attempt.ops:
                if isinstance(op, Read):
                    self._item_anti(reader, op)
                elif isinstance(op, Scan) and op.exact and not op.exclusive:
                    self._predicate_anti(reader, op, chains.get((op.index, op.partition), []))

    def _item_anti(self, reader: int, op: Read) -> None:
        name = self.name(reader)
        if op.seen is None:
            if op.key in self.deleted:
                return  # which absence it saw (before the create or after a delete) is unknown
            for creator in self.creates.get(op.key, ()):
                self.edge(
                    reader,
                    creator,
                    Edge(
                        EdgeKind.RW, op.key, f"{name} read {op.key} absent, {self.name(creator)} created it"
                    ),
                )
            return
        for writer in self.successors.get(op.seen.value, ()):
            self.edge(
                reader,
                writer,
                Edge(
                    EdgeKind.RW,
                    op.key,
                    f"{name} read {_seen_text(op.seen)}, {self.name(writer)} superseded it",
                ),
            )

    def _predicate_anti(self, reader: int, scan: Scan, chains: list[tuple[str, str, list[str]]]) -> None:
        name = self.name(reader)
        listed = {item.key: item.value for item in scan.items}
        for item in scan.items:
            if item.value is None:
                continue
            for writer in self.successors.get(item.value, ()):
                self.edge(
                    reader,
                    writer,
                    Edge(
                        EdgeKind.PRW,
                        item.key,
                        f"{name}'s scan listed {item.key}={item.value}, {self.name(writer)} superseded it",
                    ),
                )
        lo = 0 if scan.lower is None else bisect.bisect_left(chains, (scan.lower.value,))
        for sort, key, chain in chains[lo:]:
            if scan.upper is not None and sort > scan.upper.value:
                break
            if key in listed:
                continue
            # The latest version lies inside the page; find where the run of inside versions begins.
            start = len(chain)
            while start > 0:
                entry = self.by_value[chain[start - 1]].write.entry
                if entry is None or (entry.index, entry.partition) != (scan.index, scan.partition):
                    break
                if not scan.covers(entry.sort, key):
                    break
                start -= 1
            if start == len(chain):
                continue
            writer = self.by_value[chain[start]].attempt
            self.edge(
                reader,
                writer,
                Edge(
                    EdgeKind.PRW,
                    key,
                    f"{name}'s scan saw no entry of {key}, "
                    f"{self.name(writer)} put {chain[start]} inside its range",
                ),
            )

    # -- cycles -----------------------------------------------------------------------------------

    def cycles(self) -> None:
        import networkx  # imported on first use: the facade need not pay for it

        graph: nx.DiGraph[int] = networkx.DiGraph()
        graph.add_edges_from((s, t) for s, targets in self.adjacency.items() for t in targets)
        components = [sorted(c) for c in networkx.strongly_connected_components(graph) if len(c) > 1]
        components.sort()
        for anomaly, need in _NEEDS:
            best: list[tuple[int, Edge, int]] | None = None
            for component in components:
                found = self._shortest(component, need)
                if found is not None and (best is None or len(found) < len(best)):
                    best = found
            if best is not None:
                steps = tuple(Step(self.name(s), e, self.name(t)) for s, e, t in best)
                kinds = ", ".join(f"{s.edge.kind.value}" for s in steps)
                self.findings.append(
                    Finding(
                        anomaly,
                        tuple(self.name(s) for s, _, _ in best),
                        steps,
                        f"shortest such cycle: {len(steps)} transactions, edges {kinds}",
                    )
                )

    def _shortest(self, component: list[int], need: _Need) -> list[tuple[int, Edge, int]] | None:
        members = set(component)
        adjacency: dict[int, list[tuple[int, Edge]]] = {}
        starts: list[int] = []
        for node in component:
            targets = self.adjacency.get(node, {})
            out = [
                (target, label)
                for target in sorted(targets)
                if target in members
                for label in sorted(targets[target])
                if label.kind in need.allowed
            ]
            adjacency[node] = out
            if out:
                starts.append(node)
        best: list[tuple[int, Edge, int]] | None = None
        for start in starts[:MAX_STARTS]:
            found = self._bfs(start, adjacency, need, None if best is None else len(best))
            if found is not None and (best is None or len(found) < len(best)):
                best = found
                if len(best) == 2:
                    break
        return best

    @staticmethod
    def _bfs(
        start: int, adjacency: dict[int, list[tuple[int, Edge]]], need: _Need, bound: int | None
    ) -> list[tuple[int, Edge, int]] | None:
        State = tuple[int, int, int, int]
        origin: State = (start, 0, 0, 0)
        parent: dict[State, tuple[State, Edge] | None] = {origin: None}
        queue: deque[tuple[State, int]] = deque([(origin, 0)])
        while queue:
            state, depth = queue.popleft()
            if bound is not None and depth + 1 >= bound:
                return None
            node, r, p, d = state
            for target, label in adjacency[node]:
                nr = min(2, r + (label.kind is EdgeKind.RW))
                np_ = min(2, p + (label.kind is EdgeKind.PRW))
                nd = min(1, d + (label.kind is EdgeKind.WR))
                if not need.alive(nr, np_, nd):
                    continue
                nxt: State = (target, nr, np_, nd)
                if target == start:
                    if need.done(nr, np_, nd):
                        path = [(node, label, target)]
                        back = parent[state]
                        current = state
                        while back is not None:
                            previous, edge = back
                            path.append((previous[0], edge, current[0]))
                            current = previous
                            back = parent[previous]
                        path.reverse()
                        return path
                    continue
                if nxt not in parent:
                    parent[nxt] = (state, label)
                    queue.append((nxt, depth + 1))
        return None

    def report(self) -> Report:
        self.observations()
        self.versions()
        self.anti_dependencies()
        self.cycles()
        return Report(tuple(self.findings), len(self.attempts), len(self.committed), self.edge_count)


def check_history(history: History) -> Report:
    """Every anomaly the history proves, each with its shortest witness; an empty report if none.

    The cyclic garbage collector is paused meanwhile: the graph is hundreds of thousands of small
    objects that all stay alive until the report is made, and repeated full collections over them
    would otherwise cost more than building them.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _Builder(history).report()
    finally:
        if paused:
            gc.enable()
