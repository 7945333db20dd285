"""The vocabulary of a history verdict: anomaly classes, isolation levels, findings and the report.

``Anomaly`` names every class the checker reports (``MEANING`` says each in
words), ``Level`` the isolation levels, and ``PROSCRIBED_BY`` which classes
each level rules out. A ``Report`` holds the findings of one history and says
which levels it is still consistent with and the weakest it violates;
``describe_attempt`` puts one recorded attempt in a single line of words.

Guarantees: nothing here judges a history (that is ``check``); every text is a
pure function of the recorded data, so the same history always reads the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ..in_words import decoded_tuple
from .model import Attempt, History, Read, Scan, Seen, Write, WriteKind
from .search import Edge


class Anomaly(StrEnum):
    G0 = "G0"
    G1A = "G1a"
    G1B = "G1b"
    G1C = "G1c"
    G_SINGLE = "G-single"
    G_NONADJACENT = "G-nonadjacent"
    G2_ITEM = "G2-item"
    G2 = "G2"
    LOST_UPDATE = "lost-update"
    DIRTY_UPDATE = "dirty-update"
    INTERNAL = "internal"
    FUTURE_READ = "future-read"
    GARBAGE_READ = "garbage-read"
    VERSION_REUSED = "version-reused"


#: What each class means, for messages.
MEANING: dict[Anomaly, str] = {
    Anomaly.G0: "write cycle (dirty write): transactions overwrote each other's versions in a cycle",
    Anomaly.G1A: "aborted read: a committed transaction observed a value only an aborted attempt wrote",
    Anomaly.G1B: "intermediate read: a committed transaction observed a value its writer overwrote itself",
    Anomaly.G1C: "circular information flow: transactions read or overwrote each other's writes in a cycle",
    Anomaly.G_SINGLE: "read skew: a cycle with exactly one anti-dependency (a read overtaken by a write)",
    Anomaly.G_NONADJACENT: "a cycle whose anti-dependencies never follow one another (snapshot isolation "
    "forbids it)",
    Anomaly.G2_ITEM: "write skew: a cycle with two or more item anti-dependencies",
    Anomaly.G2: "predicate skew (phantom): a cycle through a predicate anti-dependency of an index scan",
    Anomaly.LOST_UPDATE: "lost update: two committed transactions superseded the same version of a key",
    Anomaly.DIRTY_UPDATE: "dirty update: a committed write superseded a value only an aborted attempt wrote",
    Anomaly.INTERNAL: "internal inconsistency: a read disagrees with what the same attempt read or wrote "
    "before it",
    Anomaly.FUTURE_READ: "future read: a read saw a value its own attempt writes only later",
    Anomaly.GARBAGE_READ: "garbage read: a committed transaction observed a value no recorded attempt wrote",
    Anomaly.VERSION_REUSED: "version reused: one version of a key was seen with two different values",
}


class Level(StrEnum):
    """Isolation levels, as Adya's thesis and Elle name them (PL-1, PL-2, PL-2.99, PL-SI, PL-3)."""

    READ_UNCOMMITTED = "read uncommitted"
    READ_COMMITTED = "read committed"
    REPEATABLE_READ = "repeatable read"
    SNAPSHOT_ISOLATION = "snapshot isolation"
    SERIALIZABLE = "serializable"


_RU = frozenset({Anomaly.G0, Anomaly.GARBAGE_READ, Anomaly.VERSION_REUSED})
_RC = _RU | {Anomaly.G1A, Anomaly.G1B, Anomaly.G1C, Anomaly.DIRTY_UPDATE, Anomaly.FUTURE_READ}
#: The classes each level rules out (a level rules out everything a weaker one does). Repeatable read
#: (PL-2.99) forbids item cycles with any anti-dependency and lost updates, but allows phantoms; snapshot
#: isolation forbids G-single, G-nonadjacent, lost updates and internal inconsistency, but allows write
#: skew. Our G-single may run through a predicate anti-dependency, which PL-2.99 alone would allow: it
#: is counted against repeatable read all the same (the stricter reading).
PROSCRIBED_BY: dict[Level, frozenset[Anomaly]] = {
    Level.READ_UNCOMMITTED: _RU,
    Level.READ_COMMITTED: _RC,
    Level.REPEATABLE_READ: _RC | {Anomaly.LOST_UPDATE, Anomaly.G2_ITEM, Anomaly.G_SINGLE, Anomaly.INTERNAL},
    Level.SNAPSHOT_ISOLATION: _RC
    | {Anomaly.LOST_UPDATE, Anomaly.G_SINGLE, Anomaly.G_NONADJACENT, Anomaly.INTERNAL},
    Level.SERIALIZABLE: frozenset(Anomaly),
}
#: Weakest first.
LEVELS: tuple[Level, ...] = tuple(Level)


def _stronger(level: Level, other: Level) -> bool:
    return PROSCRIBED_BY[level] > PROSCRIBED_BY[other]


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
class RealtimeCycle:
    """A cycle through real-time order (context, see ``realtime``): its Elle-style name and steps."""

    name: str
    steps: tuple[Step, ...]
    explanation: str

    @property
    def attempts(self) -> tuple[str, ...]:
        return tuple(step.source for step in self.steps)


#: What a real-time cycle means, and why it fails no requirement.
REALTIME_MEANING = (
    "no serial order of the committed transactions agrees with when they ran: not strict serializable "
    "(context only: the contract asks for some serial order, not one that follows real time, so no "
    "requirement fails on it)"
)


@dataclass(frozen=True)
class Report:
    """The verdict on a history: every anomaly class found, each with its witness.

    ``bounds`` names, per cycle class, the bound that stopped its witness search: with a finding of
    that class, a shorter witness may exist; without one, the class is *inconclusive* (neither found
    nor ruled out), and ``inconclusive`` lists it.
    """

    findings: tuple[Finding, ...]
    attempts: int
    committed: int
    edges: int
    bounds: tuple[tuple[Anomaly, str], ...] = field(default=())
    #: Committed attempts with a span, the real-time edges between them, the shortest cycle through
    #: one (context, never a finding) and the bound that stopped that search, if any.
    timed: int = 0
    realtime_edges: int = 0
    realtime: RealtimeCycle | None = None
    realtime_bounded: str | None = None

    @property
    def anomalies(self) -> frozenset[Anomaly]:
        return frozenset(f.anomaly for f in self.findings)

    @property
    def inconclusive(self) -> frozenset[Anomaly]:
        return frozenset(a for a, _ in self.bounds) - self.anomalies

    @property
    def ok(self) -> bool:
        return not self.findings

    def of(self, *anomalies: Anomaly) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.anomaly in anomalies)

    def violated(self) -> tuple[Level, ...]:
        """The weakest levels the history violates (none of them stronger than another)."""
        broken = [level for level in LEVELS if PROSCRIBED_BY[level] & self.anomalies]
        return tuple(level for level in broken if not any(_stronger(level, other) for other in broken))

    def consistent_with(self) -> tuple[Level, ...]:
        """The strongest levels none of whose classes was found or left undecided."""
        unknown = self.anomalies | self.inconclusive
        kept = [level for level in LEVELS if not PROSCRIBED_BY[level] & unknown]
        return tuple(level for level in kept if not any(_stronger(other, level) for other in kept))

    def levels(self) -> str:
        """One line: the strongest levels the history is consistent with, the weakest it violates."""
        consistent = " and ".join(level.value for level in self.consistent_with()) or "no level"
        text = f"consistent with {consistent}"
        violated = self.violated()
        if violated:
            text += f"; violates {' and '.join(level.value for level in violated)}"
        undecided = sorted(a.value for a in self.inconclusive)
        if undecided:
            text += f"; undecided: {', '.join(undecided)}"
        return text

    def realtime_line(self) -> str:
        """One line: what real-time order the history records and what it adds (context only)."""
        if not self.timed:
            return (
                "real-time order: not recorded (no attempt has a start and end order), so strict "
                "serializability is not judged"
            )
        text = (
            f"real-time order: {self.realtime_edges} rt edges among {self.timed} committed attempts "
            "(an attempt is ordered before those that began after it ended, in the same process)"
        )
        if self.realtime is not None:
            return (
                f"{text}; {self.realtime.name}: not strict serializable (context only, no requirement fails)"
            )
        if self.realtime_bounded is not None:
            return f"{text}; undecided whether they close a cycle: {self.realtime_bounded}"
        text += "; no cycle runs through them"
        if Level.SERIALIZABLE in self.consistent_with():
            text += ", so consistent with strict serializable as far as the recorded order goes"
        return text

    def render(self, history: History, only: Iterable[Anomaly] | None = None, per_class: int = 3) -> str:
        """A deterministic text account: each finding, each attempt in it with its reads and writes.

        At most ``per_class`` findings of one class are spelled out (the first, in history order;
        a cycle class has only its shortest witness); the rest are counted.
        """
        chosen = self.findings if only is None else self.of(*only)
        by_id = {a.id: a for a in history.attempts}
        lines = [
            f"{self.attempts} attempts, {self.committed} committed, {self.edges} dependency edges; "
            + self.levels(),
            self.realtime_line(),
        ]
        if not chosen:
            lines.append("no anomaly found")
        wanted = set(Anomaly) if only is None else set(only)
        for anomaly, bound in self.bounds:
            if anomaly in wanted:
                lines.append(f"{anomaly.value}: {bound}")
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
            for source, target in realtime_pairs(by_id, finding.attempts):
                lines.append(
                    f"  real-time (context): {source.id} -rt-> {target.id}: {ran_before(source, target)}"
                )
        for anomaly, count in shown.items():
            if count > per_class:
                lines.append(f"... and {count - per_class} more {anomaly.value} finding(s) of the same kind")
        if only is None and self.realtime is not None:
            lines.append(f"{self.realtime.name}: {REALTIME_MEANING}")
            lines.append(f"  {self.realtime.explanation}")
            for attempt_id in self.realtime.attempts:
                lines.append(f"  {describe_attempt(by_id[attempt_id])}")
            for step in self.realtime.steps:
                arrow = f"-{step.edge.kind.value}({step.edge.key})->"
                lines.append(f"  {step.source} {arrow} {step.target}: {step.edge.detail}")
        return "\n".join(lines)


def realtime_pairs(by_id: dict[str, Attempt], ids: Iterable[str]) -> list[tuple[Attempt, Attempt]]:
    """Every pair of the given attempts where the first ended before the second began (their spans)."""
    chosen = [by_id[i] for i in dict.fromkeys(ids) if i in by_id]
    return [
        (a, b)
        for a in chosen
        for b in chosen
        if a is not b and a.span is not None and b.span is not None and a.span.before(b.span)
    ]


def ran_before(first: Attempt, second: Attempt) -> str:
    """Why ``first`` precedes ``second`` in real time, in words."""
    assert first.span is not None and second.span is not None
    return (
        f"{first.id} ended before {second.id} began (on clock {first.span.clock}: tick {first.span.end} "
        f"< tick {second.span.start})"
    )


def _seen_text(seen: Seen | None) -> str:
    return "absent" if seen is None else f"v{seen.version}({seen.value})"


def _sort(encoded: str) -> str:
    """A recorded sort value in words (``<2030-01-02T00:00:00.000000Z>``), else as recorded."""
    return decoded_tuple(encoded) or encoded


def describe_attempt(attempt: Attempt) -> str:
    """One line: where the attempt ran, how it ended, and every operation with versions and values."""
    parts: list[str] = []
    for op in attempt.ops:
        if isinstance(op, Read):
            parts.append(f"read {op.key}={_seen_text(op.seen)}")
        elif isinstance(op, Scan):
            lo = "-inf" if op.lower is None else ("[" if op.lower.inclusive else "(") + _sort(op.lower.value)
            hi = "+inf" if op.upper is None else _sort(op.upper.value) + ("]" if op.upper.inclusive else ")")
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
