"""The histories workload: several clients run random transactions on one store and record everything.

Each client is a thread with its own driver instance (``store.connect()``).
The run is a fixed number of *rounds* (set by the Hypothesis profile, never by
the clock); in each round every client runs one transaction drawn from the
seed. Rounds are shaped to provoke the anomalies a weak store lets through,
on a handful of hot keys:

* ``rmw``: every client reads one key and writes it back (lost update);
* ``skew``: every client reads two keys and writes one of them (write skew);
* ``read-skew``: one client reads one key, waits for the others to rewrite
  both keys and commit, then reads the second key (read skew);
* ``phantom``: every client scans an index range and creates a fresh key in
  it (predicate skew);
* ``exclusive`` (where offered): every client selects one row exclusively
  and rewrites it;
* ``random``: a mix of point reads, scans, creates, replaces, deletes,
  releases (a write that drops the index entry), appends where offered, and
  callbacks that raise after staging their writes (aborted attempts).

Clients meet at *sync points* inside their first attempt (after their reads)
so that reads of one round really overlap the writes of the next client.
A sync point is a barrier with a bounded wait: a locking driver that makes a
client wait outside its callback simply lets the wait run out, which is
correct behaviour and costs only the wait (it shrinks after each timeout, so
a store that serializes everything pays a few milliseconds per round).

Every callback invocation is one recorded attempt. The transaction's result
says which attempt committed (the last one, when ``transaction`` returns);
every earlier one, and every attempt of a transaction that raised, is
aborted; a ``StorageCommitUnknownError`` leaves the last one ``unknown``.

Every attempt carries its *span* on a logical clock of its process (``p<process>``): round ``r``
opens at tick ``2r`` and closes at ``2r + 1``. The workload waits for every client of a round before it
starts the next, so an attempt of an earlier round ended before any of a later round began; within a
round, and between processes, nothing is known. A commit whose outcome is unknown may land after the
round, so such an attempt has no span. The ticks count rounds, never the clock: the same seed gives
the same spans everywhere.

Every document written is unique: its expiry encodes a serial number
(``w<serial>``) that is the write's value in the history, so a read or an
index entry names the exact write it saw.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from ..contract.catalog import StorageIndexName, StorageQueryDirection, StorageTableName
from ..contract.encodings import iso_date_codec, storage_tuple_codec
from ..contract.errors import StorageCommitUnknownError, StorageConflictError, StorageError
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.records import build_storage_record
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageIndexConsistency,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StoredRecord,
)
from ..fixtures.records import BASE_TIME
from ..harness import StoreHandle
from ..history import (
    Append,
    Attempt,
    Bound,
    History,
    IndexEntry,
    Operation,
    Outcome,
    Read,
    Scan,
    ScanItem,
    Seen,
    Span,
    Write,
    WriteKind,
    from_json,
    to_json,
)

if TYPE_CHECKING:
    from ..fixtures.processes import Worker, WorkerCall

__all__ = ["CLIENTS", "ROUNDS", "Workload", "record_concurrent_history", "rounds_for_profile", "run_workload"]

ENVIRONMENT = "hist"
HOT = ("h0", "h1", "h2", "h3")
#: Index buckets (one day of expiry each) in play at a time; the window moves on every
#: ``ROUNDS_PER_WINDOW`` rounds, so a range keeps a bounded population (and the predicate graph
#: a bounded number of edges per scan) however long the run.
BUCKETS = 2
ROUNDS_PER_WINDOW = 15
CLIENTS = 4
INDEX = StorageIndexName.LEASES_BY_EXPIRY
#: Rounds per Hypothesis profile; each round is one transaction per client.
ROUNDS = {"quick": 60, "default": 250, "thorough": 1000}
#: The longest a client waits at a sync point; halved after each timeout down to FLOOR_WAIT.
SYNC_WAIT = 0.2
FLOOR_WAIT = 0.005
#: Worker processes (where the store has an address) and the clients each runs, beside this process's.
WORKERS = 2
WORKER_CLIENTS = 2
#: Serial spaces: a serial is counter * STRIDE + process * SLOTS + client (slot CLIENTS: the planner).
SLOTS = CLIENTS + 1
STRIDE = 256
_ACTIONS = ("put", "put", "put", "delete", "release")
_KINDS = ("rmw", "skew", "read-skew", "phantom", "exclusive", "random", "random")


def rounds_for_profile(name: str) -> int:
    """Rounds the workload runs under Hypothesis profile ``name`` (``quick`` if unknown)."""
    return ROUNDS.get(name, ROUNDS["quick"])


class Boom(Exception):
    """Raised by a callback on purpose after staging writes: the attempt must leave nothing behind."""


def _bucket_sort(bucket: int) -> str:
    return storage_tuple_codec.encode([iso_date_codec.encode(BASE_TIME + timedelta(days=bucket))])


def _bucket_range(bucket: int) -> StorageQueryRange:
    return StorageQueryRange(
        StorageRangeBound(_bucket_sort(bucket), True), StorageRangeBound(_bucket_sort(bucket + 1), False)
    )


def value_of_expiry(text: str) -> str:
    """The write a lease's expiry names (``w<serial>``), or a marker when it names none of ours."""
    try:
        delta = iso_date_codec.decode(text) - BASE_TIME
    except (StorageError, ValueError):
        return f"unknown-expiry:{text}"
    micros = delta.seconds * 1_000_000 + delta.microseconds
    return f"w{micros}" if delta.days >= 0 else f"unknown-expiry:{text}"


def value_of_sort(sort: str) -> str:
    try:
        (text,) = storage_tuple_codec.decode(sort)
    except (StorageError, ValueError):
        return f"unknown-sort:{sort}"
    return value_of_expiry(text)


def _key(name: str) -> StorageRecordKey:
    return StorageRecordKey(StorageTableName.LEASES, (ENVIRONMENT, name))


def _seen(record: StoredRecord) -> Seen:
    return Seen(record.version.value, value_of_expiry(str(record.document.value["expiresAt"])))


@dataclass(frozen=True)
class PlannedWrite:
    """``put`` replaces what was read or creates; ``release`` replaces without an index entry;
    ``delete`` removes what was read; ``fresh`` creates a key no one has used."""

    name: str
    action: str
    bucket: int


@dataclass(frozen=True)
class PlannedScan:
    bucket: int
    limit: int
    descending: bool
    exclusive: bool = False


@dataclass(frozen=True)
class ReadKeys:
    """Point-read these keys in one ``get`` (keys this attempt already read are left out)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Meet:
    """Wait (bounded) until every client of the round got here; only in a transaction's first attempt."""


@dataclass(frozen=True)
class AwaitWriters:
    """Wait (bounded) until the round's writing clients finished their transactions."""


@dataclass(frozen=True)
class WriteKeys:
    writes: tuple[PlannedWrite, ...]


@dataclass(frozen=True)
class Claim:
    """Point-read and rewrite the row the last exclusive scan selected, or create a fresh one."""

    bucket: int


@dataclass(frozen=True)
class AppendOne:
    """Stage one append batch of one value (where the store offers append)."""


@dataclass(frozen=True)
class Fail:
    """Raise ``Boom`` after the writes: the attempt must leave nothing behind."""


Phase = ReadKeys | PlannedScan | Meet | AwaitWriters | WriteKeys | Claim | AppendOne | Fail


@dataclass(frozen=True)
class Plan:
    """One client's transaction in a round: its phases in order; ``writer`` if it stages writes."""

    phases: tuple[Phase, ...]
    writer: bool


def _random_plan(rng: random.Random, window: int, serials: Callable[[], int], *, append: bool) -> Plan:
    reads = rng.sample(HOT, rng.randint(0, 3))
    phases: list[Phase] = []
    if reads:
        phases.append(ReadKeys(tuple(reads)))
    if rng.random() < 0.4:
        bucket = window + rng.randrange(BUCKETS)
        phases.append(PlannedScan(bucket, rng.randint(1, 5), rng.random() < 0.5))
    phases.append(Meet())
    writes = [
        PlannedWrite(name, rng.choice(_ACTIONS), window + rng.randrange(BUCKETS))
        for name in reads
        if rng.random() < 0.6
    ]
    if rng.random() < 0.2:
        writes.append(PlannedWrite(f"n{serials()}", "fresh", window + rng.randrange(BUCKETS)))
    if writes:
        phases.append(WriteKeys(tuple(writes)))
    if append and rng.random() < 0.2:
        phases.append(AppendOne())
    if writes and rng.random() < 0.15:
        phases.append(Fail())
    return Plan(tuple(phases), writer=bool(writes))


def plan_round(
    rng: random.Random,
    number: int,
    clients: int,
    serials: Callable[[], int],
    *,
    exclusive: bool,
    append: bool,
) -> tuple[str, list[Plan]]:
    """The kind of round ``number`` and each client's plan in it, drawn from ``rng`` alone."""
    window = number // ROUNDS_PER_WINDOW
    kind = rng.choice(_KINDS)
    if kind == "exclusive" and not exclusive:
        kind = "random"
    bucket = window + rng.randrange(BUCKETS)
    if kind == "rmw":
        name = rng.choice(HOT)
        return kind, [
            Plan((ReadKeys((name,)), Meet(), WriteKeys((PlannedWrite(name, "put", bucket),))), True)
            for _ in range(clients)
        ]
    if kind == "skew":
        pair = tuple(rng.sample(HOT, 2))
        return kind, [
            Plan((ReadKeys(pair), Meet(), WriteKeys((PlannedWrite(pair[i % 2], "put", bucket),))), True)
            for i in range(clients)
        ]
    if kind == "read-skew":
        x, y = rng.sample(HOT, 2)
        reader = Plan((ReadKeys((x,)), Meet(), AwaitWriters(), ReadKeys((y,))), False)
        writer = Plan(
            (
                Meet(),
                ReadKeys((x, y)),
                WriteKeys((PlannedWrite(x, "put", bucket), PlannedWrite(y, "put", bucket))),
            ),
            True,
        )
        return kind, [reader, *(writer for _ in range(clients - 1))]
    if kind == "phantom":
        return kind, [
            Plan(
                (
                    PlannedScan(bucket, 10, rng.random() < 0.75),
                    Meet(),
                    WriteKeys((PlannedWrite(f"n{serials()}", "fresh", bucket),)),
                ),
                True,
            )
            for _ in range(clients)
        ]
    if kind == "exclusive":
        return kind, [
            Plan((PlannedScan(bucket, 1, False, exclusive=True), Meet(), Claim(bucket)), True)
            for _ in range(clients)
        ]
    return kind, [_random_plan(rng, window, serials, append=append) for _ in range(clients)]


def fit_plan(plan: Plan, records: int) -> Plan:
    """``plan`` within ``records`` transaction records: its append, then its fresh keys, left out until
    the keys it reads and writes (an append counts its head and its one value) fit.

    A drawn plan touches at most six records (three reads, one fresh key, an append), so at any limit
    of six or more every plan runs as drawn. Reads are never dropped: no plan reads more than three
    keys, and a driver's limits allow that much (``catalogue.profile.CORE_FLOOR``).
    """
    phases = list(plan.phases)

    def touched() -> int:
        keys: set[str] = set()
        appends = 0
        for phase in phases:
            if isinstance(phase, ReadKeys):
                keys.update(phase.names)
            elif isinstance(phase, WriteKeys):
                keys.update(write.name for write in phase.writes)
            elif isinstance(phase, Claim):
                keys.add("claimed")
            elif isinstance(phase, AppendOne):
                appends += 2
        return len(keys) + appends

    if touched() <= records:
        return plan
    phases = [phase for phase in phases if not isinstance(phase, AppendOne)]
    if touched() > records:
        read = {name for phase in phases if isinstance(phase, ReadKeys) for name in phase.names}
        fitted: list[Phase] = []
        for phase in phases:
            if isinstance(phase, WriteKeys):
                kept = tuple(write for write in phase.writes if write.name in read)
                if not kept:
                    continue
                phase = WriteKeys(kept)
            fitted.append(phase)
        phases = fitted
    writer = any(isinstance(phase, WriteKeys | Claim) for phase in phases)
    if not writer:
        phases = [phase for phase in phases if not isinstance(phase, Fail)]
    return Plan(tuple(phases), writer=writer)


@dataclass
class _Sync:
    """A round's meeting point and its writers' finish line, both with bounded waits."""

    barrier: threading.Barrier
    writers: int
    wait: float
    done: int = 0
    finished: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    timeouts: int = 0

    def meet(self) -> None:
        try:
            self.barrier.wait(self.wait)
        except threading.BrokenBarrierError:
            with self.lock:
                self.timeouts += 1

    def writer_done(self) -> None:
        with self.lock:
            self.done += 1
            if self.done >= self.writers:
                self.finished.set()

    def await_writers(self) -> None:
        if not self.finished.wait(self.wait):
            with self.lock:
                self.timeouts += 1


class _Client:
    """One client: its own driver instance and serial space; runs one plan per round and records it."""

    def __init__(self, workload: Workload, index: int, driver: StorageDriver) -> None:
        self.workload = workload
        self.index = index
        self.driver = driver
        self.counter = 0
        self.transactions = 0
        self.attempts: list[Attempt] = []

    def serial(self) -> int:
        self.counter += 1
        return self.counter * STRIDE + self.workload.process * SLOTS + self.index

    def record(self, name: str, bucket: int, *, indexed: bool = True) -> tuple[NewStorageRecord, str]:
        serial = self.serial()
        expiry = BASE_TIME + timedelta(days=bucket, microseconds=serial)
        value = f"w{serial}"
        record = build_storage_record(
            StorageTableName.LEASES,
            {
                "environment": ENVIRONMENT,
                "name": name,
                "holder": value if indexed else None,
                "expiresAt": iso_date_codec.encode(expiry),
            },
        )
        return record, value

    def run(self, plan: Plan, sync: _Sync, round_number: int = 0) -> None:
        self.transactions += 1
        transaction = f"p{self.workload.process}.c{self.index}.t{self.transactions}"
        recorded: list[list[Operation]] = []

        def callback(tx: StorageTransaction) -> None:
            ops: list[Operation] = []
            recorded.append(ops)
            self._attempt(tx, plan, sync if len(recorded) == 1 else None, ops)

        # An error the contract does not allow leaves the last attempt's fate unknown: it is recorded
        # as such (committed only if someone saw its writes) before the error stops the workload.
        outcome_of_last = Outcome.UNKNOWN
        try:
            self.driver.transaction(callback)
            outcome_of_last = Outcome.COMMITTED
        except StorageCommitUnknownError:
            pass
        except (Boom, StorageConflictError):
            outcome_of_last = Outcome.ABORTED
        finally:
            if plan.writer:
                sync.writer_done()
            clock = f"p{self.workload.process}"
            for number, ops in enumerate(recorded, 1):
                outcome = outcome_of_last if number == len(recorded) else Outcome.ABORTED
                span = (
                    None
                    if outcome is Outcome.UNKNOWN
                    else Span(clock, 2 * round_number, 2 * round_number + 1)
                )
                self.attempts.append(
                    Attempt(
                        f"{transaction}.a{number}",
                        transaction,
                        self.workload.process,
                        self.index,
                        self.index,
                        tuple(ops),
                        outcome,
                        span,
                    )
                )

    def _attempt(self, tx: StorageTransaction, plan: Plan, sync: _Sync | None, ops: list[Operation]) -> None:
        current: dict[str, StoredRecord | None] = {}
        selected: list[str] = []
        for phase in plan.phases:
            match phase:
                case ReadKeys(names=wanted):
                    names = [name for name in wanted if name not in current]
                    if names:
                        for name, found in zip(names, tx.get([_key(n) for n in names]), strict=True):
                            current[name] = found
                            ops.append(Read(name, None if found is None else _seen(found)))
                case PlannedScan():
                    selected = self._scan(tx, phase, ops)
                case Meet():
                    if sync is not None:
                        sync.meet()
                case AwaitWriters():
                    if sync is not None:
                        sync.await_writers()
                case Claim(bucket=bucket):
                    self._claim(tx, selected, bucket, current, ops)
                case WriteKeys(writes=writes):
                    for write in writes:
                        self._write(tx, write, current, ops)
                case AppendOne():
                    self._append(tx, ops)
                case Fail():
                    raise Boom("the callback raised on purpose after staging its writes")

    def _scan(self, tx: StorageTransaction, planned: PlannedScan, ops: list[Operation]) -> list[str]:
        from ..contract.catalog import StorageCandidateMode

        direction = (
            StorageQueryDirection.DESCENDING if planned.descending else StorageQueryDirection.ASCENDING
        )
        limit = min(planned.limit, self.driver.profile.limits.max_query_results)
        command = QueryRecordsCommand(
            INDEX, ENVIRONMENT, limit, range=_bucket_range(planned.bucket), direction=direction
        )
        if planned.exclusive:
            result = tx.query_candidates(command, mode=StorageCandidateMode.EXCLUSIVE)
        else:
            result = tx.query_candidates(command)
        items = tuple(
            ScanItem(item.sort, str(item.key.id[1]), value_of_sort(item.sort)) for item in result.items
        )
        bounds = command.range
        assert bounds.lower is not None and bounds.upper is not None, (
            f"the workload plans closed scan ranges only; this one is {bounds!r}"
        )
        ops.append(
            Scan(
                INDEX.value,
                ENVIRONMENT,
                Bound(bounds.lower.value, bounds.lower.inclusive),
                Bound(bounds.upper.value, bounds.upper.inclusive),
                planned.descending,
                limit,
                planned.exclusive,
                self.workload.exact_index,
                items,
                more=result.cursor is not None,
            )
        )
        return [item.key for item in items]

    def _claim(
        self,
        tx: StorageTransaction,
        selected: Sequence[str],
        bucket: int,
        current: dict[str, StoredRecord | None],
        ops: list[Operation],
    ) -> None:
        """Rewrite the exclusively selected row (point-read first), or create a fresh one if none."""
        if not selected:
            self._write(tx, PlannedWrite(f"n{self.serial()}", "fresh", bucket), current, ops)
            return
        name = selected[0]
        (found,) = tx.get([_key(name)])
        current[name] = found
        ops.append(Read(name, None if found is None else _seen(found)))
        if found is not None:
            self._write(tx, PlannedWrite(name, "put", bucket), current, ops)

    def _write(
        self,
        tx: StorageTransaction,
        write: PlannedWrite,
        current: dict[str, StoredRecord | None],
        ops: list[Operation],
    ) -> None:
        existing = current.get(write.name)
        if write.action == "delete":
            if existing is not None:
                tx.delete(existing)
                ops.append(Write(write.name, WriteKind.DELETE, _seen(existing), None))
            return
        record, value = self.record(write.name, write.bucket, indexed=write.action != "release")
        entries = [e for e in record.indexes if e.index is INDEX]
        entry = IndexEntry(INDEX.value, ENVIRONMENT, entries[0].sort) if entries else None
        if existing is None:
            if write.action == "release":
                return
            tx.create(record)
            ops.append(Write(write.name, WriteKind.CREATE, None, value, entry))
        else:
            tx.replace(existing, record)
            ops.append(Write(write.name, WriteKind.REPLACE, _seen(existing), value, entry))

    def _append(self, tx: StorageTransaction, ops: list[Operation]) -> None:
        from ._append_support import batch

        tag = f"a{self.serial()}"
        tx.append(batch(ENVIRONMENT, tag, 1))
        ops.append(Append("observations", ENVIRONMENT, (tag,)))


@dataclass
class Workload:
    """One run's settings: how many rounds and clients, what the store offers, and the seed."""

    rounds: int
    seed: int
    clients: int = CLIENTS
    exclusive: bool = False
    append: bool = False
    exact_index: bool = True
    process: int = 0
    records: int = 100
    round_kinds: dict[str, int] = field(default_factory=dict)
    sync_timeouts: int = 0
    #: Where and why the workload stopped before its last round (a driver error), else ``None``.
    stopped: str | None = None
    #: Every such stop, this process's and the workers', for the report.
    stops: list[str] = field(default_factory=list)


def run_workload(drivers: Sequence[StorageDriver], workload: Workload) -> History:
    """Run ``workload`` with one client per driver instance and return everything recorded.

    A client whose driver fails in a way the contract does not allow (anything but a conflict, an
    unknown commit or the workload's own raising callback) stops the run after the round it was
    in: the history holds every attempt recorded until then, ``workload.stopped`` says where and
    why, and the history's meta carries the same text (so a worker process reports it too).

    The plans come from ``random.Random(seed)`` alone, so the same seed and
    profile give the same transactions on every machine; only the
    interleaving is the store's.
    """
    rng = random.Random(workload.seed)
    clients = [_Client(workload, index, driver) for index, driver in enumerate(drivers)]
    planner = _Client(workload, CLIENTS, drivers[0])  # serials for fresh names, its own space
    wait = SYNC_WAIT
    for number in range(workload.rounds):
        kind, drawn = plan_round(
            rng, number, len(clients), planner.serial, exclusive=workload.exclusive, append=workload.append
        )
        plans = [fit_plan(plan, workload.records) for plan in drawn]
        workload.round_kinds[kind] = workload.round_kinds.get(kind, 0) + 1
        sync = _Sync(threading.Barrier(len(clients)), sum(p.writer for p in plans), wait)
        errors: list[BaseException] = []

        def body(
            client: _Client,
            plan: Plan,
            sync: _Sync = sync,
            errors: list[BaseException] = errors,
            number: int = number,
        ) -> None:
            try:
                client.run(plan, sync, number)
            except BaseException as error:  # reported by the caller after every client finished
                errors.append(error)

        threads = [
            threading.Thread(
                target=body, args=(client, plan), name=f"history-client-{client.index}", daemon=True
            )
            for client, plan in zip(clients, plans, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        workload.sync_timeouts += sync.timeouts
        if errors:
            first = errors[0]
            if not isinstance(first, Exception):
                raise first
            where = f"process {workload.process}, round {number + 1} of {workload.rounds}"
            workload.stopped = f"{where}: {describe_error(first)}"
            break
        wait = max(FLOOR_WAIT, wait / 2) if sync.timeouts else SYNC_WAIT
    attempts = sorted((a for c in clients for a in c.attempts), key=_attempt_order)
    meta: tuple[tuple[str, str], ...] = (
        ("clients", str(len(clients))),
        ("rounds", str(workload.rounds)),
        ("seed", str(workload.seed)),
    )
    if workload.stopped is not None:
        meta = (*meta, ("stopped", workload.stopped))
    return History(tuple(attempts), meta)


def describe_error(error: BaseException) -> str:
    """The error's type and message; a message that cannot be rendered is named as such, never raised."""
    kind = f"{type(error).__module__}.{type(error).__qualname__}"
    try:
        text = str(error)
    except Exception:  # a driver's __str__ may itself be broken
        text = "(its message could not be rendered)"
    return f"{kind}: {' '.join(text.split())[:500]}"


def _workload_for(drivers: Sequence[StorageDriver], rounds: int, seed: int, process: int) -> Workload:
    facts = drivers[0].profile
    return Workload(
        rounds=rounds,
        seed=seed,
        clients=len(drivers),
        exclusive=facts.exclusive_candidates,
        append=facts.append,
        exact_index=facts.index_consistency is StorageIndexConsistency.STRONG,
        process=process,
        records=facts.limits.max_transaction_records,
    )


def worker_clients(call: WorkerCall, rounds: int, seed: int, process: int, clients: int) -> str:
    """Run in a worker process (``fixtures.processes``): its own clients on the store; the history as JSON."""
    drivers = [call.driver, *(call.connect() for _ in range(clients - 1))]
    return to_json(run_workload(drivers, _workload_for(drivers, rounds, seed, process)))


def record_concurrent_history(
    store: StoreHandle,
    *,
    rounds: int,
    seed: int,
    clients: int = CLIENTS,
    workers: Sequence[Worker] = (),
    worker_timeout: float = 600.0,
) -> tuple[History, Workload]:
    """Run the workload on ``store`` with ``clients`` fresh instances (closed afterwards) and record it.

    ``rounds`` transactions per client, drawn from ``seed``; the instances'
    profile decides whether exclusive selections and appends are used and
    whether index pages count as exact. The store itself stays open. Each of
    ``workers`` (processes attached to the same store, see
    ``fixtures.processes``) runs ``WORKER_CLIENTS`` more clients at the same
    time, with its own seed; their attempts join the one history.
    """
    for number, worker in enumerate(workers, 1):
        worker.start(worker_clients, rounds, seed + number, number, WORKER_CLIENTS)
    drivers = [store.connect() for _ in range(clients)]
    try:
        workload = _workload_for(drivers, rounds, seed, 0)
        history = run_workload(drivers, workload)
    finally:
        for driver in drivers:
            driver.close()
    attempts = list(history.attempts)
    if workload.stopped is not None:
        workload.stops.append(workload.stopped)
    for worker in workers:
        part = from_json(worker.result(timeout=worker_timeout))
        attempts.extend(part.attempts)
        workload.stops.extend(value for name, value in part.meta if name == "stopped")
    attempts.sort(key=_attempt_order)
    meta = tuple((name, value) for name, value in history.meta if name != "stopped")
    meta = (*meta, ("processes", str(1 + len(workers))))
    if workload.stops:
        meta = (*meta, ("stopped", "; ".join(workload.stops)))
    return History(tuple(attempts), meta), workload


def _attempt_order(attempt: Attempt) -> tuple[int, int, int, int]:
    process, client, number, tries = (int(part[1:]) for part in attempt.id.split("."))
    return (number, client, process, tries)
