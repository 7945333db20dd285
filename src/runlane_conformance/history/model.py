"""A recorded history: every attempt a workload made, what it observed and what it staged.

The checker never talks to a driver; it judges one of these records. Each
value a workload writes is unique (the ``value`` of a write names it, and the
written document carries that name), so a read that returns a document says
exactly which write it saw. Versions come from the driver and are kept as the
driver returned them: a replace or delete names the version it superseded,
which is what gives the write-write order without guessing.

Everything here is a frozen dataclass, so a loaded history cannot change
while it is checked, and ``to_json``/``from_json`` round-trip it exactly
(schema-versioned, see ``history.store``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "Append",
    "Attempt",
    "Bound",
    "History",
    "IndexEntry",
    "Operation",
    "Outcome",
    "Read",
    "Scan",
    "ScanItem",
    "Seen",
    "Span",
    "Write",
    "WriteKind",
]


class Outcome(StrEnum):
    """How an attempt ended, as the client knows it.

    ``unknown`` is an attempt whose commit may or may not have happened (the
    connection broke while committing); the checker counts it as committed
    exactly when some committed attempt observed one of its writes.
    """

    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


class WriteKind(StrEnum):
    CREATE = "create"
    REPLACE = "replace"
    DELETE = "delete"


@dataclass(frozen=True, order=True)
class Seen:
    """One committed (or claimed) version of a key: the driver's version and the write that made it."""

    version: str
    value: str


@dataclass(frozen=True, order=True)
class IndexEntry:
    """The entry a write puts in the one index the workload scans (``None`` on a write means no entry)."""

    index: str
    partition: str
    sort: str


@dataclass(frozen=True)
class Read:
    """A point read of ``key``: the version seen, or ``None`` when the key was read as absent."""

    key: str
    seen: Seen | None


@dataclass(frozen=True, order=True)
class ScanItem:
    """One index reference a scan returned, with the write whose entry it is (``None``: no known write)."""

    sort: str
    key: str
    value: str | None


@dataclass(frozen=True, order=True)
class Bound:
    value: str
    inclusive: bool


@dataclass(frozen=True)
class Scan:
    """An index page: its whole scope, and what it returned in order.

    ``exact`` says whether the driver promised a current index (strong
    consistency); only an exact, non-exclusive page is evidence about what was
    *not* in the range, so only such pages give predicate anti-dependencies.
    An exclusive page legitimately skips rows other attempts hold. ``more``
    says the page came with a cursor: a driver may end a page early, so a
    continued page looked only as far as its last item, however short it is.
    """

    index: str
    partition: str
    lower: Bound | None
    upper: Bound | None
    descending: bool
    limit: int
    exclusive: bool
    exact: bool
    items: tuple[ScanItem, ...]
    more: bool = False

    def in_range(self, sort: str) -> bool:
        """Whether ``sort`` lies inside the scan's range bounds (ignoring the page limit)."""
        if self.lower is not None and (
            sort < self.lower.value or (sort == self.lower.value and not self.lower.inclusive)
        ):
            return False
        return not (
            self.upper is not None
            and (sort > self.upper.value or (sort == self.upper.value and not self.upper.inclusive))
        )

    def covers(self, sort: str, key: str) -> bool:
        """Whether an entry ``(sort, key)`` was inside what this page looked at.

        A full or continued page looked only up to its last item (in its
        direction); a short page without a cursor looked at the whole range.
        """
        if not self.in_range(sort):
            return False
        if not self.items:
            return not self.more
        if len(self.items) < self.limit and not self.more:
            return True
        last = (self.items[-1].sort, self.items[-1].key)
        return (sort, key) >= last if self.descending else (sort, key) <= last


@dataclass(frozen=True)
class Write:
    """A staged mutation: ``supersedes`` is the version replaced or deleted (``None`` for a create).

    ``value`` names the new document (``None`` for a delete); ``entry`` the
    index entry it carries; ``version`` the version the driver gave it, when
    some read revealed it (a write's own attempt never learns it).
    """

    key: str
    kind: WriteKind
    supersedes: Seen | None
    value: str | None
    entry: IndexEntry | None = None
    version: str | None = None


@dataclass(frozen=True)
class Append:
    """An ordered append batch; its values are recorded, positions are allocated at commit."""

    stream: str
    partition: str
    values: tuple[str, ...]


Operation = Read | Scan | Write | Append


@dataclass(frozen=True, order=True)
class Span:
    """When an attempt ran, as logical ticks of one clock: it began after ``start``, ended before ``end``.

    Ticks are not wall-clock times: the workload counts them from what it arranged itself (its rounds
    run one after another in each process), so the same seed gives the same spans on any machine.
    Two attempts are ordered in real time only on the same ``clock``: ``a`` ended before ``b`` began
    when ``a.end < b.start``. Ticks of different clocks (different processes) say nothing about each
    other, and equal or overlapping spans mean the attempts may have run at the same time.
    """

    clock: str
    start: int
    end: int

    def before(self, other: Span) -> bool:
        """Whether this attempt ended before ``other`` began (known only on the same clock)."""
        return self.clock == other.clock and self.end < other.start


@dataclass(frozen=True)
class Attempt:
    """One call of a transaction callback: who ran it, what it did in order, and how it ended.

    ``transaction`` groups the attempts of one ``driver.transaction(...)``
    call; ``process``, ``client`` and ``instance`` say where it ran; ``span`` when, where the workload
    knows it (``None``: unknown, e.g. a commit whose outcome is unknown may land later).
    """

    id: str
    transaction: str
    process: int
    client: int
    instance: int
    ops: tuple[Operation, ...]
    outcome: Outcome
    span: Span | None = None

    @property
    def reads(self) -> tuple[Read, ...]:
        return tuple(op for op in self.ops if isinstance(op, Read))

    @property
    def scans(self) -> tuple[Scan, ...]:
        return tuple(op for op in self.ops if isinstance(op, Scan))

    @property
    def writes(self) -> tuple[Write, ...]:
        return tuple(op for op in self.ops if isinstance(op, Write))


@dataclass(frozen=True)
class History:
    """Every attempt of one workload run, plus free-form facts about the run (driver, seed, profile)."""

    attempts: tuple[Attempt, ...]
    meta: tuple[tuple[str, str], ...] = field(default=())

    def committed(self) -> tuple[Attempt, ...]:
        return tuple(a for a in self.attempts if a.outcome is Outcome.COMMITTED)

    def transactions(self) -> int:
        return len({a.transaction for a in self.attempts})
