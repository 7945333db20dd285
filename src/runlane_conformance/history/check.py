"""Judge a recorded history: build its dependency graph, find cycles, name them by Adya's classes.

Edges (between committed attempts ``T`` and ``U``), all exact because every
written value is unique and every replace/delete names what it superseded:

* ``ww``: ``U`` replaced or deleted the version ``T`` wrote;
* ``wr``: ``U`` read (point read or index entry) the version ``T`` wrote, or
  read a key absent that ``T`` had deleted;
* ``rw`` (item anti-dependency): ``T`` point-read a version (or the key's
  absence) that ``U`` then superseded (or created);
* ``pwr``/``prw`` (predicate dependencies, Elle's closed-predicate rules): an
  exact index page reads, for every key that ever had an entry where it
  looked, the version it listed or one that did not match. When only one
  committed version can be it (a delete or a move out of the range, say),
  its writer ``T`` gives ``T -pwr-> U``; every later version that changes
  whether the key matches gives ``U -prw->`` its writer (so does any write
  superseding a listed entry).

A key read as absent was either not yet created or deleted. The unborn state
is ruled out only when the key's creator reaches the reader over ``ww``/``wr``
edges, and then only as one of two readings: had the reader seen the key
unborn, its anti-dependency on the creator closes a G-single with that path.
Edges drawn on that ground are ``inferred``: a cycle through one proves a
G-single or worse and no more, so G0 and G1c never use one (see ``search``).
Otherwise,
and wherever the history cannot say which state a read saw (a key created
more than once; one written by an unobserved attempt of unknown outcome),
no edge is drawn: the checker only reports cycles it can prove.

Cycle classes, each with the *shortest* simple cycle of its kind (see
``search``: whether a class occurs is decided completely; only the choice of
the shortest witness has a bound, and the report names it when reached):
``G0`` (only ``ww``), ``G1c`` (``ww``/``wr``/``pwr`` with at least one read;
neither uses an inferred edge), ``G-single`` (exactly one anti-dependency, or
none and an inferred read), ``G-nonadjacent`` (two or more,
no two in a row), ``G2-item`` (two or more item anti-dependencies, no
predicate one), ``G2`` (at least one predicate anti-dependency, two or more
in all). Findings that are not cycles: ``G1a`` (a committed attempt observed
a value only an aborted attempt wrote), ``garbage-read`` (a value no attempt
wrote), ``G1b`` (a value its writer overwrote in the same attempt),
``dirty-update`` (a committed write superseded a value only an aborted attempt
wrote), ``internal`` (a read disagrees with the attempt's own earlier reads
or writes), ``future-read`` (a read saw a value the attempt itself writes only
later), ``lost-update`` (two committed attempts superseded the same version,
or both created a key that was never deleted) and ``version-reused`` (one
version of a key carried two different values).

Each class rules out the isolation levels in ``PROSCRIBED_BY``; the report
says which levels the history is still consistent with and the weakest it
violates. Output is deterministic: attempts are numbered in history order and
edges visited in sorted order.
"""

from __future__ import annotations

import bisect
import gc
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby

from .findings import (
    LEVELS,
    PROSCRIBED_BY,
    Anomaly,
    Finding,
    Level,
    RealtimeCycle,
    Report,
    Step,
    _seen_text,
)
from .model import Attempt, History, IndexEntry, Outcome, Read, Scan, Seen, Write, WriteKind
from .realtime import realtime_cycle, realtime_edges
from .search import READS, Edge, EdgeKind, reachable, search_cycles

__all__ = [
    "LEVELS",
    "PROSCRIBED_BY",
    "Anomaly",
    "Edge",
    "EdgeKind",
    "Finding",
    "Level",
    "Report",
    "Step",
    "check_history",
]


@dataclass(frozen=True)
class _Version:
    """One state of a key in its version order: the value (``None``: unborn or deleted), its writer."""

    value: str | None
    writer: int | None  # index into history.attempts; None for the unborn state
    entry: IndexEntry | None


#: Edges that hold once (creator, reader) is proven: creator reaches reader over ww/wr edges.
_Pending = list[tuple[int, int, int, int, Edge]]


@dataclass(frozen=True)
class _Written:
    attempt: int  # index into history.attempts
    write: Write
    position: int  # position among the attempt's ops


class _Builder:
    """Collects findings and edges from one history; ``report()`` runs the cycle search."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.attempts = history.attempts
        self.findings: list[Finding] = []
        self.bounds: list[tuple[Anomaly, str]] = []
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
        garbage: dict[int, Finding] = {}
        future: dict[int, Finding] = {}
        intermediate: dict[tuple[int, int], Finding] = {}
        dirty: dict[tuple[int, int], Finding] = {}
        for reader in sorted(self.committed):
            attempt = self.attempts[reader]
            for position, key, value, how in self._observed(attempt):
                written = self.by_value.get(value)
                updates = how.endswith("d") and not how.startswith("read")
                if written is None:
                    garbage.setdefault(
                        reader,
                        Finding(
                            Anomaly.GARBAGE_READ,
                            (attempt.id,),
                            (),
                            f"{attempt.id} {how} {key} with value {value}, which no recorded attempt wrote",
                        ),
                    )
                    continue
                writer = written.attempt
                if writer == reader:
                    if written.position > position:
                        future.setdefault(
                            reader,
                            Finding(
                                Anomaly.FUTURE_READ,
                                (attempt.id,),
                                (),
                                f"{attempt.id} {how} {key}={value}, which it writes itself only later",
                            ),
                        )
                    continue
                if writer not in self.committed:
                    if updates:
                        dirty.setdefault(
                            (reader, writer),
                            Finding(
                                Anomaly.DIRTY_UPDATE,
                                (self.name(writer), attempt.id),
                                (),
                                f"{attempt.id} {how} {key}={value}, written by {self.name(writer)}, which "
                                f"{self.attempts[writer].outcome.value} (never committed): its committed "
                                "write builds on data that was rolled back",
                            ),
                        )
                        continue
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
                if updates:
                    continue  # the write-write order is drawn by versions(), as ww
                self.edge(
                    writer,
                    reader,
                    Edge(EdgeKind.WR, key, f"{attempt.id} {how} {value} that {self.name(writer)} wrote"),
                )
        self.findings.extend(garbage[k] for k in sorted(garbage))
        self.findings.extend(aborted[k] for k in sorted(aborted))
        self.findings.extend(dirty[k] for k in sorted(dirty))
        self.findings.extend(intermediate[k] for k in sorted(intermediate))
        self.findings.extend(future[k] for k in sorted(future))

    @staticmethod
    def _observed(attempt: Attempt) -> Iterable[tuple[int, str, str, str]]:
        for position, op in enumerate(attempt.ops):
            if isinstance(op, Read) and op.seen is not None:
                yield position, op.key, op.seen.value, "read"
            elif isinstance(op, Scan):
                for item in op.items:
                    if item.value is not None:
                        yield position, item.key, item.value, "listed (index scan)"
            elif isinstance(op, Write) and op.supersedes is not None:
                yield position, op.key, op.supersedes.value, f"{op.kind.value}d"

    # -- inside one attempt -----------------------------------------------------------------------

    def internal(self) -> None:
        """Every read of a committed attempt against what the attempt itself read or wrote before it.

        After the attempt wrote a key, a read must show that write (a delete: absent); after it read a
        key without writing it, a later read must show the same version. A scan listing a key the
        attempt wrote must list that write's entry, and an exact page must list every key whose version
        the attempt read or wrote before has its entry where the page looked. A replace or delete must
        name the version the attempt last saw.
        """
        for index in sorted(self.committed):
            attempt = self.attempts[index]
            known: dict[str, tuple[str | None, str]] = {}  # key -> (value or None for absent, how known)
            for op in attempt.ops:
                observed: list[tuple[str, str | None, str]] = []
                if isinstance(op, Read):
                    observed.append((op.key, None if op.seen is None else op.seen.value, "read"))
                elif isinstance(op, Scan) and op.exact:
                    # A page of an eventual index lists candidates, which may lag what a point read of
                    # the same attempt saw: only a page the driver promised current is evidence here.
                    observed.extend((i.key, i.value, "listed") for i in op.items if i.value is not None)
                    if not op.exclusive:
                        missed = self._omitted(op, known)
                        if missed is not None:
                            self.findings.append(Finding(Anomaly.INTERNAL, (attempt.id,), (), missed))
                elif isinstance(op, Write) and op.supersedes is not None:
                    observed.append((op.key, op.supersedes.value, f"{op.kind.value}d"))
                elif isinstance(op, Write):
                    observed.append((op.key, None, "created"))
                for key, value, how in observed:
                    expected = known.get(key)
                    if (
                        expected is not None
                        and expected[0] != value
                        and not (how == "listed" and expected[0] is not None and self._unindexed(expected[0]))
                    ):
                        shown = "absent" if value is None else value
                        before = "absent" if expected[0] is None else expected[0]
                        self.findings.append(
                            Finding(
                                Anomaly.INTERNAL,
                                (attempt.id,),
                                (),
                                f"{attempt.id} {how} {key} as {shown} after it {expected[1]} {before}",
                            )
                        )
                        break
                    if how == "read" and expected is None:
                        known[key] = (value, "read")
                if isinstance(op, Write):
                    known[op.key] = (op.value, "wrote" if op.value is not None else "deleted it: expected")

    def _omitted(self, scan: Scan, known: dict[str, tuple[str | None, str]]) -> str | None:
        """How an exact page left out a key the attempt knows is in it (``None``: it left out none)."""
        listed = {item.key for item in scan.items}
        for key in sorted(known):
            value, how = known[key]
            written = None if value is None or key in listed else self.by_value.get(value)
            entry = None if written is None else written.write.entry
            if (
                entry is not None
                and (entry.index, entry.partition) == (scan.index, scan.partition)
                and scan.covers(entry.sort, key)
            ):
                return (
                    f"its scan of {scan.index}/{scan.partition} left out {key}, though it {how} {value}, "
                    f"whose entry {entry.sort} lies where the page looked"
                )
        return None

    def _unindexed(self, value: str) -> bool:
        written = self.by_value.get(value)
        return written is not None and written.write.entry is None

    def reused_versions(self) -> None:
        """A version of a key that two observations tie to different values: versions must not repeat."""
        values: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)  # (key, version) -> value -> who
        for attempt in self.attempts:
            for op in attempt.ops:
                pairs: list[tuple[str, Seen]] = []
                if isinstance(op, Read) and op.seen is not None:
                    pairs.append((op.key, op.seen))
                elif isinstance(op, Write):
                    if op.supersedes is not None:
                        pairs.append((op.key, op.supersedes))
                    if op.version is not None and op.value is not None:
                        pairs.append((op.key, Seen(op.version, op.value)))
                for key, seen in pairs:
                    values[(key, seen.version)].setdefault(seen.value, attempt.id)
        for (key, version), carried in sorted(values.items()):
            if len(carried) > 1:
                names = tuple(dict.fromkeys(carried[v] for v in sorted(carried)))
                listed = ", ".join(f"{v} (seen by {carried[v]})" for v in sorted(carried))
                self.findings.append(
                    Finding(
                        Anomaly.VERSION_REUSED,
                        names,
                        (),
                        f"version {version} of {key} carried {len(carried)} different values: {listed}",
                    )
                )

    # -- version order: ww edges, lost updates, chains --------------------------------------------

    def versions(self) -> None:
        self.successors: dict[str, list[int]] = defaultdict(
            list
        )  # value -> committed attempts superseding it
        self.creates: dict[str, list[int]] = defaultdict(list)
        self.deleted: set[str] = set()
        self.create_value: dict[str, str] = {}
        self.next_value: dict[str, str | None] = {}
        self.next_writer: dict[str, int] = {}
        # Keys an attempt of unknown outcome wrote without anyone observing it: it may have committed, so
        # the committed versions may not be all the versions, and an absence may be its delete.
        self.uncertain: set[str] = {
            op.key
            for index, attempt in enumerate(self.attempts)
            if attempt.outcome is Outcome.UNKNOWN and index not in self.committed
            for op in attempt.writes
        }
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
                self.next_writer[previous] = writer
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

    def _chain(self, key: str) -> list[_Version] | None:
        """Every committed version of ``key`` in order, the unborn state first and any delete last.

        ``None`` when the history does not fix that order exactly: the key was created more than once,
        two attempts superseded one version, or an attempt of unknown outcome wrote it unobserved.
        """
        if key in self.uncertain or len(self.creates.get(key, ())) != 1 or key not in self.create_value:
            return None
        first = self.create_value[key]
        chain = [
            _Version(None, None, None),
            _Version(first, self.by_value[first].attempt, self._entry(first)),
        ]
        while True:
            current = chain[-1].value
            assert current is not None
            after = self.successors.get(current)
            if not after:
                return chain
            if len(after) > 1:
                return None
            following = self.next_value.get(current)
            if following is None:  # a delete: the key is dead, and was never created again
                chain.append(_Version(None, self.next_writer[current], None))
                return chain
            chain.append(_Version(following, self.next_writer[current], self._entry(following)))

    def _entry(self, value: str) -> IndexEntry | None:
        return self.by_value[value].write.entry

    # -- anti-dependencies and what absences read ---------------------------------------------------

    def anti_dependencies(self) -> None:
        """Item and predicate edges from every read, Elle's closed-predicate rules for what a page omits.

        A point read of a version gives ``rw`` edges to the attempts that superseded it; a point read of
        an absent key read the state before its create (``rw`` to the creator) or, once deleted, the
        delete (``wr`` from the deleter). An exact page's version set holds, for every key that ever had
        an entry where the page looked, the version it listed or else one that did not match: when only
        one committed version could be it, that version was read (``pwr`` from its writer), and every
        later version that changes whether the key matches is a predicate anti-dependency (``prw``).

        The state before a key's create and the delete that ended it both read as absent. When the creator
        reaches the reader over ``ww``/``wr`` edges, the later state is drawn as an ``inferred`` edge: had
        the reader seen the key unborn instead, that path and its anti-dependency on the creator close a
        G-single, so a cycle through the edge proves a G-single or worse either way. Without such a path
        no edge is drawn: only provable cycles.
        """
        self.chains: dict[str, list[_Version] | None] = {}
        keys: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
        for key in sorted(self.create_value):
            chain = self.chains[key] = self._chain(key)
            for version in chain or ():
                if version.entry is not None:
                    keys[(version.entry.index, version.entry.partition)].add((version.entry.sort, key))
        ranges = {where: sorted(found) for where, found in keys.items()}
        depends: dict[int, list[int]] = {
            source: [
                t
                for t, labels in targets.items()
                if any(e.kind in READS or e.kind is EdgeKind.WW for e in labels)
            ]
            for source, targets in self.adjacency.items()
        }
        pending: _Pending = []
        for reader in sorted(self.committed):
            for op in self.attempts[reader].ops:
                if isinstance(op, Read):
                    self._item_anti(reader, op, pending)
                elif isinstance(op, Scan) and op.exact and not op.exclusive:
                    self._predicate(reader, op, ranges.get((op.index, op.partition), []), pending)
        if pending:
            proven = reachable(depends, lambda n: depends.get(n, ()), ((c, r) for c, r, _, _, _ in pending))
            for creator, reader, source, target, edge in pending:
                if (creator, reader) in proven:
                    self.edge(source, target, edge)

    def _item_anti(self, reader: int, op: Read, pending: _Pending) -> None:
        name = self.name(reader)
        if op.seen is None:
            if op.key in self.uncertain:
                return  # an unobserved attempt of unknown outcome may have deleted it
            if op.key in self.deleted:
                chain = self.chains.get(op.key)
                if chain is None or chain[-1].value is not None:
                    return  # deleted and created again: which absence it saw is unknown
                creator, deleter = chain[1].writer, chain[-1].writer
                assert creator is not None and deleter is not None
                if creator != reader and deleter != reader:
                    pending.append(
                        (
                            creator,
                            reader,
                            deleter,
                            reader,
                            Edge(
                                EdgeKind.WR,
                                op.key,
                                f"{name} read {op.key} absent after {self.name(deleter)} deleted it "
                                f"(inferred: {self.name(creator)}, which created it, precedes {name} by "
                                f"ww/wr edges; had {name} read it before its create, {name} -rw-> "
                                f"{self.name(creator)} would close a G-single)",
                                inferred=True,
                            ),
                        )
                    )
                return
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

    def _predicate(self, reader: int, scan: Scan, entries: list[tuple[str, str]], pending: _Pending) -> None:
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
        lo = 0 if scan.lower is None else bisect.bisect_left(entries, (scan.lower.value,))
        done: set[str] = set()
        for sort, key in entries[lo:]:
            if scan.upper is not None and sort > scan.upper.value:
                break
            if key in done or not scan.in_range(sort):
                continue
            done.add(key)
            chain = self.chains.get(key)
            if chain is None:
                continue
            matches = [self._matches(scan, key, version) for version in chain]
            if key in listed:
                value = listed[key]
                chosen = next(
                    (i for i, v in enumerate(chain) if value is not None and v.value == value), None
                )
                if chosen is not None:
                    for edge_source, edge_target, edge in self._read_edges(
                        reader, key, chain, matches, chosen
                    ):
                        if edge.kind is EdgeKind.PRW:
                            self.edge(edge_source, edge_target, edge)
                continue
            candidates = [i for i, match in enumerate(matches) if not match]
            for later in range(candidates[-1] + 1, len(chain)):  # after every candidate: a change whichever
                self.edge(reader, *self._prw(reader, key, chain[later], matches[later]))
            if len(candidates) == 1:
                for edge_source, edge_target, edge in self._read_edges(reader, key, chain, matches, 0):
                    self.edge(edge_source, edge_target, edge)
            elif len(candidates) == 2 and candidates[0] == 0:
                creator = chain[1].writer
                assert creator is not None
                if creator == reader:
                    continue
                for edge_source, edge_target, edge in self._read_edges(
                    reader, key, chain, matches, candidates[1], inferred=creator
                ):
                    pending.append((creator, reader, edge_source, edge_target, edge))

    def _read_edges(
        self,
        reader: int,
        key: str,
        chain: list[_Version],
        matches: list[bool],
        chosen: int,
        inferred: int | None = None,
    ) -> Iterable[tuple[int, int, Edge]]:
        """The edges of version ``chosen`` of ``key`` in a page's version set: who wrote it, who changed it.

        ``inferred``: the version is known only because ``inferred`` (the key's creator) precedes the
        reader; every edge says so.
        """
        name = self.name(reader)
        note = ""
        if inferred is not None:
            creator = self.name(inferred)
            note = (
                f" (inferred: {creator}, which created {key}, precedes {name} by ww/wr edges; had {name} "
                f"seen {key} before its create, {name} -prw-> {creator} would close a G-single)"
            )
        source = chain[chosen].writer
        if chosen > 0 and source is not None and source != reader:
            what = "deleted" if chain[chosen].value is None else f"wrote {chain[chosen].value} outside"
            yield (
                source,
                reader,
                Edge(
                    EdgeKind.PWR,
                    key,
                    f"{name}'s scan saw no entry of {key}: {self.name(source)} {what} its range{note}",
                    inferred=inferred is not None,
                ),
            )
        for later in range(chosen + 1, len(chain)):
            if matches[later] != matches[chosen]:
                target, edge = self._prw(reader, key, chain[later], matches[later], note)
                yield reader, target, edge

    def _prw(
        self, reader: int, key: str, version: _Version, inside: bool, note: str = ""
    ) -> tuple[int, Edge]:
        writer = version.writer
        assert writer is not None
        if version.value is None:
            change = "deleted it"
        else:
            change = f"put {version.value} {'inside' if inside else 'out of'} its range"
        return writer, Edge(
            EdgeKind.PRW,
            key,
            f"{self.name(reader)}'s scan read {key} before {self.name(writer)} {change}{note}",
            inferred=bool(note),
        )

    def _matches(self, scan: Scan, key: str, version: _Version) -> bool:
        entry = version.entry
        return (
            version.value is not None
            and entry is not None
            and (entry.index, entry.partition) == (scan.index, scan.partition)
            and scan.covers(entry.sort, key)
        )

    # -- cycles -----------------------------------------------------------------------------------

    def cycles(self) -> None:
        for result in search_cycles(self.adjacency):
            anomaly = Anomaly(result.name)
            if result.bounded is not None:
                self.bounds.append((anomaly, result.bounded))
            if result.steps is None:
                continue
            steps = tuple(Step(self.name(s), e, self.name(t)) for s, e, t in result.steps)
            counted = [(kind, len(list(run))) for kind, run in groupby(s.edge.kind.value for s in steps)]
            kinds = ", ".join(kind if count == 1 else f"{kind} x{count}" for kind, count in counted)
            shortest = (
                "shortest such cycle" if result.bounded is None else "shortest cycle found within the bound"
            )
            self.findings.append(
                Finding(
                    anomaly,
                    tuple(self.name(s) for s, _, _ in result.steps),
                    steps,
                    f"{shortest}: {len(steps)} transactions, edges {kinds}",
                )
            )

    def realtime(self) -> tuple[int, int, RealtimeCycle | None, str | None]:
        """Real-time context: timed committed attempts, rt edges, the shortest rt cycle, its bound."""
        timed = sum(1 for i in self.committed if self.attempts[i].span is not None)
        graph = realtime_edges(self.attempts, self.committed)
        count = sum(len(targets) for targets in graph.values())
        found = realtime_cycle(self.attempts, self.adjacency, graph)
        cycle = None
        if found.steps is not None and found.name is not None:
            steps = tuple(Step(self.name(s), e, self.name(t)) for s, e, t in found.steps)
            kinds = ", ".join(step.edge.kind.value for step in steps)
            cycle = RealtimeCycle(
                found.name,
                steps,
                f"shortest cycle through real-time order: {len(steps)} transactions, edges {kinds}",
            )
        return timed, count, cycle, found.bounded

    def report(self) -> Report:
        self.observations()
        self.internal()
        self.reused_versions()
        self.versions()
        self.anti_dependencies()
        self.cycles()
        timed, rt_edges, rt_cycle, rt_bounded = self.realtime()
        return Report(
            tuple(self.findings),
            len(self.attempts),
            len(self.committed),
            self.edge_count,
            tuple(self.bounds),
            timed,
            rt_edges,
            rt_cycle,
            rt_bounded,
        )


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
