"""The differential's steps that cross a fault, a held attempt or an OS process (run and judged here).

* ``Faulted``: a transaction on an instance whose store exchanges pass a fault hook the workload owns
  (``FaultHookStore``, the public harness API): its commit reply is lost, or its connection breaks at
  the commit or at its second read, while another instance commits in between. The reference computes
  the serial outcomes from the state before (the faulted step not applied; applied, then the other;
  the other, then the faulted step applied once) and the driver must
  match one: never success for a step not applied, never applied twice, never in part.
* ``Hold``: an exclusive selection kept open while the clock jumps and another instance selects the
  same page exclusively: the two selections made while both were open share no record, whatever the
  clock did (an exclusive hold is no lease that lapses).
* ``Elsewhere``: a transaction run by a worker in another OS process attached to the store by its
  address; what it committed must be what every instance here reads and scans afterwards.

Guarantees: every outcome a correct driver may legitimately produce is accepted (a locking driver that
makes the other wait, a driver that replays an attempt whose connection broke before anything reached
the store); the verdict depends on the answers only, never on timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from runlane_conformance.contract.catalog import StorageCandidateMode
from runlane_conformance.contract.errors import (
    StorageCommitUnknownError,
    StorageConflictError,
    StorageUnavailableError,
)
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.faults.plan import InjectedFault
from runlane_conformance.fixtures.interleave import Competitor, CompetitorPace, compete
from runlane_conformance.suites._differential_oracle import (
    Answer,
    Content,
    Sides,
    _content,
    _describe_content,
    _outcome,
    _read_all,
    _restore,
    do_transact,
    run_transact,
)
from runlane_conformance.suites._differential_programs import (
    FAULT_POINTS,
    JUMPS,
    RAISES,
    READS,
    SCANS,
    Elsewhere,
    Faulted,
    Hold,
    Transact,
    _cover,
)
from runlane_conformance.suites._retries_support import CALLER_ATTEMPTS

T = TypeVar("T")

UNAVAILABLE = StorageUnavailableError.__name__
UNKNOWN = StorageCommitUnknownError.__name__
CONFLICT = StorageConflictError.__name__


@dataclass
class FaultPoint:
    """A ``FaultHook`` the workload owns: it breaks one exchange of the attempt it is armed for.

    ``phase`` is set by the faulted callback (``read 0``, ``read 1``, ..., then ``commit`` once the
    callback returned); the first exchange in the armed phase is broken: its reply lost after the store
    processed it, or the connection cut before it reached the store. ``between`` runs at that moment
    (before the cut, or after the store applied the exchange whose reply is lost).
    """

    phase: str = "idle"
    armed: str | None = None
    lose_reply: bool = False
    between: Callable[[], None] | None = None
    fired: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def round_trip(self, action: Callable[[], T]) -> T:
        with self._lock:
            hit = self.armed is not None and self.phase == self.armed and not self.fired
            if hit:
                self.fired = True
        if not hit:
            return action()
        between = self.between
        if self.lose_reply:
            action()
            if between is not None:
                between()
            raise InjectedFault("injected fault: the reply to the commit was lost (the store applied it)")
        if between is not None:
            between()
        raise InjectedFault(f"injected fault: the connection broke before the exchange at {self.armed}")

    def arm(self, point: str, between: Callable[[], None]) -> None:
        self.phase = "idle"
        self.fired = False
        self.lose_reply = point == FAULT_POINTS[0]
        self.armed = "read 1" if point == FAULT_POINTS[2] else "commit"
        self.between = between

    def disarm(self) -> None:
        self.armed = None
        self.between = None
        self.phase = "idle"


def run_faulted(driver: StorageDriver, step: Transact, hook: FaultPoint) -> Answer:
    """``step`` on the faulted instance: each read slot in a get() of its own (so a read can break
    between two reads), the phase told to the hook; errors become their kind."""
    from runlane_conformance.suites._differential_oracle import error_kind

    slots = step.read_slots

    def body(tx: StorageTransaction) -> list[Any]:
        got = []
        for number, slot in enumerate(slots):
            hook.phase = f"read {number}"
            got.extend(tx.get([slot.template.key]))
        hook.phase = "writes"
        tx.now()
        current = {slot.template.key.encoded: record for slot, record in zip(slots, got, strict=True)}
        for write in step.writes:
            existing = current.get(write.record.key.encoded)
            if write.kind == "blind" or (write.kind == "put" and existing is None):
                tx.create(write.record)
            elif write.kind == "put" and existing is not None:
                tx.replace(existing, write.record)
            elif existing is not None:
                tx.delete(existing)
        if step.raises is not None:
            raise RAISES[step.raises]("the callback raised on purpose")
        hook.phase = "commit"
        return got

    try:
        got = driver.transaction(body)
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return Answer(None, (), error_kind(error))
    finally:
        hook.disarm()
    return Answer(
        tuple(_content(record) for record in got),
        tuple(None if record is None else record.version.value for record in got),
        None,
    )


def _forget_versions(sides: Sides, step: Transact) -> None:
    """Keys whose writer may or may not have committed: their version history restarts (never judged
    across the ambiguity), their content is still compared at every read."""
    for slot in (*step.read_slots, *(write.slot for write in step.writes)):
        key = slot.template.key.encoded
        sides.versions.pop(key, None)
        sides.current.pop(key, None)
        sides.dirty.discard(key)


def _track(sides: Sides, step: Transact) -> None:
    for write in step.writes:
        key = write.record.key.encoded
        sides.keys[key] = write.record.key
        sides.scopes.update((entry.index, entry.partition) for entry in write.record.indexes)


def do_faulted(
    sides: Sides, step: Faulted, faulty: StorageDriver, hook: FaultPoint, pace: CompetitorPace
) -> None:
    """Run ``step`` on the faulted instance with the other committing in between; the answers and the
    state left must be one of the serializable outcomes (computed on the reference from the state before)."""
    mine, other = step.step, step.other
    keys = list(
        {
            slot.template.key.encoded: slot.template.key
            for transact in (mine, other)
            for slot in (*transact.read_slots, *(write.slot for write in transact.writes))
        }.values()
    )
    reference = sides.reference
    before = _read_all(reference, keys)
    alone = run_transact(reference, other)
    after_other = _read_all(reference, keys)
    replayed = run_transact(reference, mine)
    after_replay = _read_all(reference, keys)
    _restore(reference, keys, before)
    first = run_transact(reference, mine)
    other_after = run_transact(reference, other)
    after_both = _read_all(reference, keys)
    # (what the faulted step may answer, what the other answers, the state left)
    possible: dict[str, tuple[set[tuple[str | None, Any]], tuple[str | None, Any], list[Content]]] = {
        "not applied": (
            {(UNAVAILABLE, None), (UNKNOWN, None)},
            _outcome(alone),
            [_content(r) for r in after_other],
        ),
        "applied once, then the other": (
            {_outcome(first), (UNKNOWN, None)},
            _outcome(other_after),
            [_content(r) for r in after_both],
        ),
    }
    # The faulted step run once after the other (its outcome there, an error included): replayed when
    # nothing reached the store (or its read set went stale), or, where the hook only decides and the
    # exchange runs afterwards (a driver in an isolated backend), its commit run after the other's.
    possible["the other, then applied once"] = (
        {_outcome(replayed)} | ({(UNKNOWN, None)} if replayed.error is None else set()),
        _outcome(alone),
        [_content(r) for r in after_replay],
    )
    tested_other = sides.tested[other.instance]
    competitor: list[Competitor[Answer]] = []

    def between() -> None:
        competitor.append(compete(lambda: run_transact(tested_other, other), grace=pace.grace()))
        pace.note(competitor[0].finished_while_open)

    hook.arm(step.point, between)
    got_mine = run_faulted(faulty, mine, hook)
    got_other = competitor[0].settle() if competitor else run_transact(tested_other, other)
    fired = bool(competitor)
    # A driver that never replays ends a raced attempt with a typed conflict and core runs the whole
    # transaction again: once the other ran, a conflicted side is retried (bounded by count), which
    # lands it in the serial order where it runs second.
    for _ in range(CALLER_ATTEMPTS - 1):
        if not fired or CONFLICT not in (got_mine.error, got_other.error):
            break
        if got_mine.error == CONFLICT:
            got_mine = run_transact(faulty, mine)
        if got_other.error == CONFLICT:
            got_other = run_transact(tested_other, other)
    state = [_content(record) for record in _read_all(sides.tested[other.instance], keys)]
    matched = [
        name
        for name, (answers, theirs, after) in possible.items()
        if _outcome(got_mine) in answers and _outcome(got_other) == theirs and state == after
    ]
    _cover(
        READS,
        fault=step.point.split(" at ")[0] if fired else "none",
        outcome=got_mine.error or "committed",
        order=matched[0] if matched else "none",
        process="this process",
    )
    if not matched:
        raise sides.fail(
            READS,
            f"a transaction whose {step.point} ended in no serializable outcome (another instance committed "
            "in between; the fault " + ("fired" if fired else "never fired") + ")",
            f"it {got_mine.describe()}; the other {got_other.describe()}; then "
            f"{[_describe_content(content) for content in state]}",
            " or ".join(
                f"({name}) it {' or '.join(a or 'committed' for a, _ in sorted(answers, key=str))}; "
                f"the other "
                f"{theirs[0] or 'committed'}; then {[_describe_content(content) for content in after]}"
                for name, (answers, theirs, after) in possible.items()
            ),
        )
    target = {"not applied": after_other, "the other, then applied once": after_replay}.get(matched[0])
    if target is not None:
        _restore(reference, keys, target)
    _forget_versions(sides, mine)
    _forget_versions(sides, other)
    _track(sides, mine)
    _track(sides, other)


def do_hold(sides: Sides, step: Hold, pace: CompetitorPace) -> None:
    """The holder selects exclusively and stays open while the clock jumps and the rival selects the same
    page exclusively: what both selected while both were open is disjoint."""
    command = step.scan.command()
    exclusive = StorageCandidateMode.EXCLUSIVE
    holder, rival = sides.tested[step.holder], sides.tested[step.rival]
    competitor: list[Competitor[list[str]]] = []

    def select(tx: StorageTransaction) -> list[str]:
        return [item.key.encoded for item in tx.query_candidates(command, mode=exclusive).items]

    def hold(tx: StorageTransaction) -> list[str]:
        mine = [item.key.encoded for item in tx.query_candidates(command, mode=exclusive).items]
        if not competitor:
            sides.clock.at += JUMPS[step.jump]
            tx.now()
            competitor.append(compete(lambda: rival.transaction(select), grace=pace.grace()))
            pace.note(competitor[0].finished_while_open)
        return mine

    held = holder.transaction(hold)
    open_together = competitor[0].finished_while_open
    theirs = competitor[0].settle()
    _cover(SCANS, jump=step.jump, via="exclusive", hold="open together" if open_together else "rival waited")
    shared = sorted(set(held) & set(theirs))
    if open_together and shared:
        raise sides.fail(
            SCANS,
            f"two exclusive selections made while both attempts were open share {len(shared)} records (the "
            f"clock jumped by {step.jump} while the first was open)",
            f"the holder selected {len(held)}, the rival {len(theirs)}, both: {shared[:4]}",
            "disjoint selections: an exclusive hold lasts as long as its attempt, whatever the clock does",
        )


def _plain(step: Transact) -> tuple[Any, ...]:
    """``step`` as plain data a worker process can rebuild it from (records do not pickle)."""
    from runlane_conformance.contract.json_boundary import thaw_json

    reads = tuple((slot.template.key.table.value, tuple(slot.template.key.id)) for slot in step.read_slots)
    writes = tuple(
        (write.kind, write.record.key.table.value, thaw_json(write.record.document.value))
        for write in step.writes
    )
    return reads, writes


def w_transact(call: Any, reads: Any, writes: Any, at: datetime) -> tuple[str | None, Any, Any]:
    """Run in a worker process: the transaction ``_plain`` described, on a fresh instance there whose
    clock is the program's; its answer as plain data (error kind, contents, versions)."""
    from runlane_conformance.contract.catalog import StorageTableName
    from runlane_conformance.contract.keys import StorageRecordKey
    from runlane_conformance.contract.records import build_storage_record
    from runlane_conformance.suites._differential_oracle import error_kind

    driver = call.connect(clock=lambda: at)
    keys = [StorageRecordKey(StorageTableName(table), tuple(ids)) for table, ids in reads]
    records = [(kind, build_storage_record(StorageTableName(table), value)) for kind, table, value in writes]

    def body(tx: StorageTransaction) -> list[Any]:
        got = list(tx.get(keys)) if keys else []
        tx.now()
        current = {key.encoded: record for key, record in zip(keys, got, strict=True)}
        for kind, record in records:
            existing = current.get(record.key.encoded)
            if kind == "blind" or (kind == "put" and existing is None):
                tx.create(record)
            elif kind == "put" and existing is not None:
                tx.replace(existing, record)
            elif existing is not None:
                tx.delete(existing)
        return got

    try:
        got = driver.transaction(body)
    except Exception as error:
        return error_kind(error), None, None
    contents = [
        None
        if record is None
        else (record.document.text, [(e.index.value, e.partition, e.sort) for e in record.indexes])
        for record in got
    ]
    return None, contents, [None if record is None else record.version.value for record in got]


def do_elsewhere(sides: Sides, step: Elsewhere, worker: Any) -> None:
    """``step`` run in another OS process; compared with the reference like any transaction."""
    from runlane_conformance.contract.catalog import StorageIndexName
    from runlane_conformance.contract.keys import StorageIndexEntry

    def remote(transact: Transact) -> Answer:
        error, contents, versions = worker.call(w_transact, *_plain(transact), sides.clock.at)
        if error is not None:
            return Answer(None, (), error)
        reads = tuple(
            None
            if content is None
            else (
                content[0],
                frozenset(StorageIndexEntry(StorageIndexName(i), p, sort) for i, p, sort in content[1]),
            )
            for content in contents
        )
        return Answer(reads, tuple(versions), None)

    do_transact(sides, step.step, elsewhere=remote)
