"""The machinery of the faults suite: fresh stores per trial, calibrated fault schedules, recorded outcomes.

A *trial* runs one transaction through a new instance whose exchanges with
the store pass a fault switch (the loopback proxy, or the driver's
in-process hook), with one fault armed; then a plain instance reads what the
store holds, and the faulted instance must keep working. Each schedule of
trials runs on a store of its own, opened for it and closed after it, and
each trial on keys of its own, so nothing a fault leaves behind can reach
another trial, check or area.

Where faults land. A fault-free *calibration* trial counts the writes (request
flights) the transaction makes: W. The schedule then breaks each write 1..W
in each way (cut before it, lose its reply, make the store unreachable from
it on) and delays the last one. Write 1 is the attempt's first statement,
write W is the commit, and losing W's reply is the ambiguous commit. The
schedule depends only on what the driver does, so a reproduce run replays
the same faults.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..contract.catalog import StorageCandidateMode
from ..contract.errors import StorageCommitUnknownError, StorageLimitError, StorageUnavailableError
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.streams import AppendRecordsCommand
from ..contract.values import StoredRecord
from ..faults.plan import Fault, FaultInjector, FaultKind, FaultSwitch
from ..faults.proxy import FaultProxy
from ..fixtures.convergence import forget_instance, register_instance, settle_indexes
from ..fixtures.gating import fault_skip_reason
from ..fixtures.limit_gates import FAULT_BATCH_RECORDS
from ..fixtures.limit_plans import PRACTICAL_COUNT
from ..fixtures.records import Leases
from ..harness import DriverHarness, FaultHookStore, ProxiedStore, StoreHandle
from ._append_support import LAYOUT, batch, point_append, read_stream, stage_point_append
from ._mutations_support import query_pairs, read

__all__ = [
    "FOLLOW_UP_TIMEOUT",
    "BatchTrial",
    "CounterRun",
    "CounterTrial",
    "FaultRig",
    "RunRecord",
    "batch_trials",
    "counter_trials",
    "describe_error",
    "report",
]

#: How long a transaction under a fault, or after it, may take before the instance counts as wedged.
FOLLOW_UP_TIMEOUT = 15.0
#: How long a proxy may live: far beyond any check, so it only ends a proxy nobody closed.
PROXY_LIFETIME = 600.0
#: The error types a fault may surface as.
FAULT_ERRORS = (StorageUnavailableError, StorageCommitUnknownError)


def describe_error(error: BaseException | None) -> str:
    if error is None:
        return "success"
    text = " ".join(str(error).split())
    return f"{type(error).__module__}.{type(error).__qualname__}: {text[:160]}"


@dataclass
class Trial:
    """One trial on the rig's store: its fault switch, and instances behind the switch or beside it.

    Every instance a trial opens is closed when the trial ends, so trials
    never pile up connections.
    """

    store: StoreHandle
    switch: FaultSwitch
    mechanism: str
    _open_faulty: Callable[[], StorageDriver]
    opened: list[StorageDriver] = field(default_factory=list)

    def connect_faulty(self) -> StorageDriver:
        """A new instance whose exchanges with the store pass the fault switch."""
        driver = self._open_faulty()
        self.opened.append(driver)
        register_instance(driver, self.store)  # so an eventual index can be settled through it
        return driver

    def fresh(self) -> StorageDriver:
        """A plain instance on the store that bypasses the fault switch."""
        driver = self.store.connect()
        self.opened.append(driver)
        register_instance(driver, self.store)
        return driver


class FaultRig:
    """One fresh store for a whole schedule of trials, and the switch its faulty instances go through.

    Trials share the store but never a key (each uses its own lease
    environment and stream partition) nor an instance. Closing the rig closes
    the store (dropping everything in it) and its proxy.
    """

    def __init__(self, harness: DriverHarness) -> None:
        self.store = harness.open_store()
        self._proxy: FaultProxy | None = None
        store = self.store
        try:
            if isinstance(store, ProxiedStore):
                host, port = store.proxy_target()
                proxy = self._proxy = FaultProxy((host, port), lifetime=PROXY_LIFETIME)
                address = proxy.address
                self.switch: FaultSwitch = proxy
                self.mechanism = "the fault proxy"
                self._open_faulty: Callable[[], StorageDriver] = lambda: store.connect_through(address)
            elif isinstance(store, FaultHookStore):
                injector = FaultInjector()
                self.switch = injector
                self.mechanism = "the in-process fault hook"
                self._open_faulty = lambda: store.connect_with_faults(injector)
            else:
                pytest.skip(fault_skip_reason(store) or "profile: faults not offered")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> FaultRig:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            if self._proxy is not None:
                self._proxy.close()

    @contextmanager
    def trial(self) -> Iterator[Trial]:
        trial = Trial(self.store, self.switch, self.mechanism, self._open_faulty)
        try:
            yield trial
        finally:
            self.switch.disarm()
            for driver in reversed(trial.opened):
                forget_instance(driver)
                driver.close()


def bounded(
    action: Callable[[], Any], timeout: float = FOLLOW_UP_TIMEOUT
) -> tuple[Any, BaseException | None]:
    """Run ``action`` on a daemon thread; its value and error, or a TimeoutError if it did not finish."""
    outcome: list[tuple[Any, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((action(), None))
        except BaseException as error:  # reported, never swallowed: the caller judges it
            outcome.append((None, error))

    thread = threading.Thread(target=run, name="runlane-faults-transaction", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        return None, TimeoutError(f"did not return within {timeout:g}s")
    return outcome[0]


def schedule(writes: int) -> list[Fault]:
    """Every fault of the suite for a transaction of ``writes`` writes (see the module docstring)."""
    faults = [
        Fault(kind, at)
        for kind in (FaultKind.CUT, FaultKind.LOSE_REPLY, FaultKind.REFUSE)
        for at in range(1, writes + 1)
    ]
    faults.append(Fault(FaultKind.DELAY, writes))
    return faults


# -- the counter scenario: one read-modify-write, the outcome rules ------------------------------


@dataclass(frozen=True)
class RunRecord:
    """What one ``transaction()`` call did: its value or error, and the counter value each run read."""

    value: object
    error: BaseException | None
    reads: tuple[int, ...]


@dataclass(frozen=True)
class CounterTrial:
    """A counter increment from 0 under ``fault``, and what the store and the instance did afterwards."""

    fault: Fault
    mechanism: str
    planned: int
    fired: bool
    run: RunRecord
    stored: int | None
    inspect_error: BaseException | None
    follow_up: str | None  # why the instance was not usable after the fault, or None
    budget: str | None = None  # why the instance could not spend its full limits afterwards, or None

    def where(self) -> str:
        return f"{self.fault.describe()} (a fault-free run makes {self.planned} writes), via {self.mechanism}"

    def applied(self) -> str:
        if self.inspect_error is not None:
            return f"the store could not be read afterwards ({describe_error(self.inspect_error)})"
        return f"the store holds counter={self.stored}"


def _counter(leases: Leases) -> Callable[[list[int]], Callable[[StorageTransaction], int]]:
    def make(reads: list[int]) -> Callable[[StorageTransaction], int]:
        def increment(tx: StorageTransaction) -> int:
            (current,) = tx.get([leases.key("counter")])
            assert current is not None, "the counter record vanished"
            value = int(str(current.document.value["holder"]))
            reads.append(value)
            tx.replace(current, leases.record("counter", holder=str(value + 1)))
            return value

        return increment

    return make


def _read_counter(driver: StorageDriver, leases: Leases) -> int:
    (current,) = driver.transaction(lambda tx: tx.get([leases.key("counter")]))
    assert current is not None, "the counter record vanished"
    return int(str(current.document.value["holder"]))


def _counter_trial(rig: FaultRig, fault: Fault | None, planned: int) -> tuple[CounterTrial, int]:
    leases = Leases(environment=f"faults-{uuid.uuid4().hex[:8]}")
    make = _counter(leases)
    with rig.trial() as trial:
        faulty = trial.connect_faulty()
        faulty.transaction(lambda tx: tx.create(leases.record("counter", holder="0")))
        reads: list[int] = []
        trial.switch.arm(fault)
        value, error = bounded(lambda: faulty.transaction(make(reads)))
        writes, fired = trial.switch.writes, trial.switch.fired
        trial.switch.disarm()
        stored: int | None = None
        inspect_error: BaseException | None = None
        try:
            stored = _read_counter(trial.fresh(), leases)
        except Exception as caught:
            inspect_error = caught
        follow_up = None
        if fault is not None and inspect_error is None and stored is not None:
            follow_up = _follow_up(trial, faulty, leases, make, stored)
        if fault is not None and (follow_up is not None or inspect_error is not None):
            budget: str | None = (
                "could not be judged, the faulted instance or the store was not usable afterwards: "
                f"{follow_up or describe_error(inspect_error)}"
            )
        else:
            budget = _at_the_limit(faulty, leases)
        record = CounterTrial(
            fault or Fault(FaultKind.DELAY, 1, delay=0.0),
            trial.mechanism,
            planned,
            fired,
            RunRecord(value, error, tuple(reads)),
            stored,
            inspect_error,
            follow_up,
            budget,
        )
        return record, writes


def _at_the_limit(driver: StorageDriver, leases: Leases) -> str | None:
    """Why a transaction spending the instance's whole point-read and record budget fails; None if it works.

    It reads as many absent keys as both the point-read and the transaction
    record limit allow (at most ``PRACTICAL_COUNT``), so one read left over on
    the books from a failed attempt pushes it over.
    """
    limits = driver.profile.limits
    count = min(limits.max_point_reads, limits.max_transaction_records, PRACTICAL_COUNT)
    keys = [leases.key(f"budget-{number:06d}") for number in range(count)]
    _, error = bounded(lambda: driver.transaction(lambda tx: tx.get(keys)))
    if error is None:
        return None
    what = "was refused as over a limit" if isinstance(error, StorageLimitError) else "failed"
    return (
        f"a transaction reading {count} absent keys (its advertised budget) {what}: {describe_error(error)}"
    )


def _follow_up(
    trial: Trial,
    faulty: StorageDriver,
    leases: Leases,
    make: Callable[[list[int]], Callable[[StorageTransaction], int]],
    stored: int,
) -> str | None:
    """Why the faulted instance or a new one behind the switch fails after the fault; None if both work."""
    _, error = bounded(lambda: faulty.transaction(make([])))
    if error is not None:
        return f"the faulted instance's next transaction failed: {describe_error(error)}"
    newcomer, error = bounded(trial.connect_faulty)
    if error is not None:
        return f"a new instance could not be opened: {describe_error(error)}"
    value, error = bounded(lambda: _read_counter(newcomer, leases))
    if error is not None:
        return f"a new instance could not read the store: {describe_error(error)}"
    if value != stored + 1:
        return f"the next transaction reported success but the store holds counter={value}, not {stored + 1}"
    return None


@dataclass(frozen=True)
class CounterRun:
    """The fault-free calibration trial of the counter scenario, and its trials under every fault."""

    calibration: CounterTrial
    trials: tuple[CounterTrial, ...]


def counter_trials(harness: DriverHarness) -> CounterRun:
    """The counter increment under every fault of the calibrated schedule."""
    with FaultRig(harness) as rig:
        calibration, writes = _counter_trial(rig, None, 0)
        if writes == 0:
            pytest.fail(
                "the calibration transaction made no writes through the fault mechanism: the harness's "
                "faulty instances do not route their store exchanges through it"
            )
        return CounterRun(
            calibration, tuple(_counter_trial(rig, fault, writes)[0] for fault in schedule(writes))
        )


# -- the batch scenario: several mutations, indexes and an append, all or nothing ----------------


@dataclass(frozen=True)
class BatchTrial:
    """A multi-record transaction under ``fault``: which of its pieces the store shows afterwards."""

    fault: Fault
    mechanism: str
    planned: int
    fired: bool
    error: BaseException | None
    pieces: dict[str, bool] = field(default_factory=dict)  # piece -> applied?
    index_problems: tuple[str, ...] = ()  # where the lease index disagrees with the records
    stream_problems: tuple[str, ...] = ()  # where the stream head disagrees with the stream's records
    inspect_error: BaseException | None = None

    def where(self) -> str:
        return f"{self.fault.describe()} (a fault-free run makes {self.planned} writes), via {self.mechanism}"


def _name(record: StoredRecord | None) -> str | None:
    return None if record is None else str(record.document.value.get("holder"))


def _append(tx: StorageTransaction, command: AppendRecordsCommand, native: bool) -> None:
    """Append ``command`` natively when the driver offers it, else the way core does (head read + writes)."""
    if native:
        tx.append(command)
    else:
        point_append(tx, command)


def _index_problems(fresh: StorageDriver, leases: Leases, found: dict[str, StoredRecord | None]) -> list[str]:
    """Where the lease index disagrees with the records a fresh instance point-read (settled first)."""
    at = {"new-a": 1, "new-b": 2, "keep-r": 11 if _name(found["keep-r"]) == "r1" else 10, "keep-d": 20}
    expected = sorted((leases.sort(at[name]), name) for name, record in found.items() if record is not None)
    settle_indexes(fresh)  # an eventual index must have caught up before it is compared
    # Every page of the scan, each as large as the driver allows.
    index = sorted((sort, str(key.id[-1])) for key, sort in query_pairs(fresh, leases.query(limit=100)))
    if index == expected:
        return []
    seconds = {leases.sort(second): second for second in (1, 2, 10, 11, 20)}

    def shown(entries: list[tuple[str, str]]) -> str:
        return "[" + ", ".join(f"{name}@{seconds.get(sort, sort)}" for sort, name in entries) + "]"

    return [f"the index shows {shown(index)} but the records imply {shown(expected)} (name@sort second)"]


def _stream_problems(
    fresh: StorageDriver, partition: str, native: bool, appended: int
) -> tuple[bool, list[str]]:
    """Whether the work's batch is in the stream, and where the head disagrees with the stream's records.

    The stream was seeded with one record, so it holds 1 or 1 + ``appended`` records; the head
    must name the position after the last one, and one more append must land
    right there.
    """
    view = read_stream(fresh, partition)
    problems = []
    if view.positions != list(range(1, len(view.records) + 1)):
        problems.append(f"stream positions {view.positions} are not contiguous from 1")
    if view.next_position != len(view.records) + 1:
        problems.append(
            f"the stream head says next position {view.next_position} after {len(view.records)} records"
        )
    fresh.transaction(lambda tx: _append(tx, batch(partition, "after", 1), native))
    after = read_stream(fresh, partition)
    if after.positions != list(range(1, len(view.records) + 2)):
        problems.append(
            f"the next append after {len(view.records)} records landed at positions {after.positions}"
        )
    return len(view.records) == 1 + appended, problems


def _batch_trial(rig: FaultRig, fault: Fault | None, planned: int) -> tuple[BatchTrial, int]:
    leases = Leases(environment=f"faults-{uuid.uuid4().hex[:8]}")
    partition = f"faults-{uuid.uuid4().hex[:8]}"
    with rig.trial() as trial:
        faulty = trial.connect_faulty()
        native = bool(faulty.profile.append)
        # The whole mix touches FAULT_BATCH_RECORDS records; a driver allowing fewer gets the compact
        # mix (no second create, one appended value), still a create, replace, delete and append.
        compact = faulty.profile.limits.max_transaction_records < FAULT_BATCH_RECORDS
        appended = 1 if compact else 2

        def seed(tx: StorageTransaction) -> None:
            tx.create(leases.record("keep-r", at=10, holder="r0"))
            tx.create(leases.record("keep-d", at=20, holder="d0"))

        faulty.transaction(seed)
        faulty.transaction(lambda tx: _append(tx, batch(partition, "seed", 1), native))

        def work(tx: StorageTransaction) -> None:
            # One read of everything the attempt depends on (the stream head too, without native
            # append), then every mutation: reads are sealed by the first mutation.
            head_key = [] if native else [LAYOUT.head_key(partition)]
            replaced, deleted, *head = tx.get([leases.key("keep-r"), leases.key("keep-d"), *head_key])
            assert replaced is not None and deleted is not None, (
                "keep-r or keep-d read as absent although the seed transaction committed both just before "
                "(a read-your-commits fault, before any fault was injected into this work)"
            )
            tx.create(leases.record("new-a", at=1, holder="a"))
            if not compact:
                tx.create(leases.record("new-b", at=2, holder="b"))
            tx.replace(replaced, leases.record("keep-r", at=11, holder="r1"))
            tx.delete(deleted)
            command = batch(partition, "work", appended)
            if native:
                tx.append(command)
                return
            stage_point_append(tx, command, head[0])

        trial.switch.arm(fault)
        _, error = bounded(lambda: faulty.transaction(work))
        writes, fired = trial.switch.writes, trial.switch.fired
        trial.switch.disarm()
        pieces: dict[str, bool] = {}
        index_problems: list[str] = []
        stream_problems: list[str] = []
        inspect_error: BaseException | None = None
        try:
            fresh = trial.fresh()
            names = ["new-a", "keep-r", "keep-d"] if compact else ["new-a", "new-b", "keep-r", "keep-d"]
            # Read in as many attempts as the driver's point-read and record limits take.
            found = dict(zip(names, read(fresh, [leases.key(n) for n in names]), strict=True))
            pieces["create new-a"] = found["new-a"] is not None
            if not compact:
                pieces["create new-b"] = found["new-b"] is not None
            pieces["replace keep-r"] = _name(found["keep-r"]) == "r1"
            pieces["delete keep-d"] = found["keep-d"] is None
            index_problems = _index_problems(fresh, leases, found)
            appended_all, stream_problems = _stream_problems(fresh, partition, native, appended)
            pieces[f"append {appended} observation{'s' if appended > 1 else ''}"] = appended_all
        except Exception as caught:
            inspect_error = caught
        return (
            BatchTrial(
                fault or Fault(FaultKind.DELAY, 1, delay=0.0),
                trial.mechanism,
                planned,
                fired,
                error,
                pieces,
                tuple(index_problems),
                tuple(stream_problems),
                inspect_error,
            ),
            writes,
        )


def batch_trials(harness: DriverHarness) -> list[BatchTrial]:
    """The multi-record transaction under every fault of the calibrated schedule."""
    from ..fixtures.limit_gates import core_floor_reason, limit_gate_reason

    with FaultRig(harness) as rig:
        # The plan gates the checks judging these trials where the attempt cannot fit the limits; this
        # module fixture runs before their own gate, so it steps aside with the plan's reason.
        with rig.trial() as trial:
            limits = trial.fresh().profile.limits
            reason = core_floor_reason(limits) or limit_gate_reason("fault-batch", limits)
        if reason is not None:
            pytest.skip(reason)
        calibration, writes = _batch_trial(rig, None, 0)
        if calibration.inspect_error is not None or not all(calibration.pieces.values()):
            pytest.fail(
                "the fault-free calibration transaction did not commit as written: "
                f"{calibration.pieces} {describe_error(calibration.inspect_error or calibration.error)}"
            )
        if writes == 0:
            pytest.fail(
                "the calibration transaction made no writes through the fault mechanism: the harness's "
                "faulty instances do not route their store exchanges through it"
            )
        return [_batch_trial(rig, fault, writes)[0] for fault in schedule(writes)]


def report(problems: list[str], trials: int) -> str:
    """A failure message whose first line (the one reports show) names a whole failing trial.

    The first problem comes first, in full, with the count of failing
    trials; the next few follow on their own lines.
    """
    rest = "".join(f"\n  {problem}" for problem in problems[1:8])
    more = f"\n  ... and {len(problems) - 8} more" if len(problems) > 8 else ""
    return f"{problems[0]} [{len(problems)} of {trials} fault trials broke the rule]{rest}{more}"


# -- the exclusive scenario: holds of a faulted attempt are released ----------------------------

#: How long rows held by a faulted attempt may stay busy: a server may notice a dropped connection (and
#: release its locks) only a moment after the client saw the fault. Rows skipped because they are busy
#: are legitimate until then, so the check selects again until this deadline, never longer.
HOLD_RELEASE_DEADLINE = 5.0


@dataclass(frozen=True)
class HoldTrial:
    """An attempt that selected two rows exclusively and wrote one, under ``fault``; who got them after."""

    fault: Fault
    mechanism: str
    planned: int
    fired: bool
    error: BaseException | None
    problem: str | None  # why the rows were not free again for another and for the faulted instance

    def where(self) -> str:
        return f"{self.fault.describe()} (a fault-free run makes {self.planned} writes), via {self.mechanism}"


def _selected(driver: StorageDriver, leases: Leases) -> list[str]:
    command = leases.query(limit=2)
    return driver.transaction(
        lambda tx: [
            item.key.id[-1]
            for item in tx.query_candidates(command, mode=StorageCandidateMode.EXCLUSIVE).items
        ]
    )


def _free_again(driver: StorageDriver, leases: Leases, who: str, wait: float) -> str | None:
    """None once an exclusive selection on ``driver`` gets both rows (retried for up to ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    last: object = None
    while True:
        rows, error = bounded(lambda: _selected(driver, leases))
        if error is None and rows == ["r0", "r1"]:
            return None
        last = describe_error(error) if error is not None else rows
        if time.monotonic() >= deadline:
            return (
                f"{who}'s exclusive selection still got {last} {wait:.0f}s after the fault, "
                "not both rows: the faulted attempt's holds were never released"
            )
        time.sleep(0.05)


def _hold_trial(
    rig: FaultRig, fault: Fault | None, planned: int, wait: float = HOLD_RELEASE_DEADLINE
) -> tuple[HoldTrial, int]:
    leases = Leases(environment=f"faults-{uuid.uuid4().hex[:8]}")
    with rig.trial() as trial:
        faulty = trial.connect_faulty()

        def seed(tx: StorageTransaction) -> None:
            tx.create(leases.record("r0", at=10, holder="free"))
            tx.create(leases.record("r1", at=20, holder="free"))

        faulty.transaction(seed)
        settle_indexes(faulty)

        def work(tx: StorageTransaction) -> None:
            page = tx.query_candidates(leases.query(limit=2), mode=StorageCandidateMode.EXCLUSIVE)
            rows = tx.get([item.key for item in page.items])
            assert rows and rows[0] is not None, "the exclusive selection of a free index returned no row"
            tx.replace(rows[0], leases.record(rows[0].key.id[-1], at=10, holder="taken"))

        trial.switch.arm(fault)
        _, error = bounded(lambda: faulty.transaction(work))
        writes, fired = trial.switch.writes, trial.switch.fired
        trial.switch.disarm()
        problem = _free_again(trial.fresh(), leases, "a new instance", wait) or _free_again(
            faulty, leases, "the faulted instance", wait
        )
        record = HoldTrial(
            fault or Fault(FaultKind.DELAY, 1, delay=0.0), trial.mechanism, planned, fired, error, problem
        )
        return record, writes


def hold_trials(harness: DriverHarness) -> list[HoldTrial]:
    """The exclusive select-and-write under every fault of the calibrated schedule."""
    with FaultRig(harness) as rig:
        calibration, writes = _hold_trial(rig, None, 0)
        if calibration.error is not None or calibration.problem is not None:
            pytest.fail(
                "the fault-free exclusive selection did not work: "
                f"{describe_error(calibration.error)}; {calibration.problem}"
            )
        if writes == 0:
            pytest.fail(
                "the calibration transaction made no writes through the fault mechanism: the harness's "
                "faulty instances do not route their store exchanges through it"
            )
        trials: list[HoldTrial] = []
        # A refused store is down for the rest of the attempt: nothing the driver does can release a
        # hold then, and a lease-based hold rightly outlives it until it expires. Every other fault
        # leaves the store reachable, so the attempt's end must reach it.
        for fault in [fault for fault in schedule(writes) if fault.kind is not FaultKind.REFUSE]:
            # Once one trial found rows still held at the deadline the check has failed; later trials
            # look once instead of waiting out the deadline again.
            stuck = any(trial.problem is not None for trial in trials)
            trials.append(_hold_trial(rig, fault, writes, 0.0 if stuck else HOLD_RELEASE_DEADLINE)[0])
        return trials
