"""What the cross-process checks run inside their worker processes, and how they read the answers.

Every ``w_*`` function runs in a worker (``fixtures.processes``): it gets a
``WorkerCall`` whose ``driver`` is a fresh instance on the check's store, in
another process than the check. Arguments and results are plain data
(environment names, encoded keys, strings), so nothing depends on how a
record pickles.

A scripted interleaving across processes works like ``fixtures.interleave``
across threads: the first worker does its reads, signals, and waits for the
check's go-ahead *inside its first attempt*; the competitor runs meanwhile.
A competitor that finishes within ``GRACE`` ran while the first attempt was
open; one that does not was made to wait by a locking driver, which is just
as correct. Either way the outcome must be one some serial order explains.

A transaction that ends in ``StorageConflictError`` committed nothing (core
would retry it); workers that loop retry at most ``retries`` times, a bound
the checks set above the number of competing commits, so a correct driver
(whose every conflict is caused by some competing commit) cannot run out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

from ..contract.catalog import StorageCandidateMode
from ..contract.errors import StorageConflictError
from ..contract.protocols import StorageTransaction
from ..contract.table_definitions import RunStatus, run_record_key
from ..contract.values import QueryRecordsCommand, StorageRecordKey, StoredRecord
from ..core.completion_waits import CompletionWaitPlan, RunCompletionWaitPresence, plan_completion_wait
from ..fixtures.processes import Worker, WorkerCall, WorkerFailed
from ..fixtures.records import Leases
from ._append_support import batch, point_append
from ._cursors_support import in_transaction_scan
from ._operator_support import run_record

__all__ = [
    "GRACE",
    "LATER_GRACE",
    "committed",
    "w_append_batches",
    "w_create_if_absent",
    "w_finish_source",
    "w_hold_exclusive",
    "w_increment",
    "w_read_leases",
    "w_register_wait",
    "w_select_once",
    "w_write_leases_and_wait",
]

#: How long a competitor in another process may take, while the first attempt is open, before it
#: counts as made to wait (a locking driver's right). Generous: process round trips are slower than
#: threads, and a competitor that misses it only makes the check judge less, never wrongly.
GRACE = 1.0
#: The shorter wait for the others once one of several competitors a lock released together has signalled.
LATER_GRACE = 0.25

EXCLUSIVE = StorageCandidateMode.EXCLUSIVE


class _RollBack(Exception):
    """Raised by a worker's callback on purpose, to roll its attempt back."""


def committed(outcome: object) -> bool:
    """Whether a worker's transaction committed: ``False`` for a ``StorageConflictError``.

    Any other failure in the worker is the driver's and is raised, so the
    check fails with the worker's traceback.
    """
    if isinstance(outcome, WorkerFailed):
        if isinstance(outcome.error, StorageConflictError):
            return False
        raise outcome
    return True


def _keys(result: Any) -> list[str]:
    return [item.key.encoded for item in result.items]


# -- exclusive selection ---------------------------------------------------------------------------


def w_hold_exclusive(call: WorkerCall, environment: str, limit: int, outcome: str) -> list[str] | None:
    """Select a page exclusively, signal ``selected`` with its keys, wait for ``end``, then end the attempt.

    ``outcome``: ``commit`` (read-only), ``commit-writing`` (also creates an
    unrelated record) or ``rollback`` (the callback raises). Only the first
    attempt waits; a replay ends at once. Returns the committed attempt's keys
    (``None`` after a rollback).
    """
    leases = Leases(environment=environment)
    command = leases.query(limit=limit)
    first = [True]

    def callback(tx: StorageTransaction) -> list[str]:
        rows = _keys(in_transaction_scan(tx, command, mode=EXCLUSIVE))
        if first:
            first.clear()
            call.signal("selected", rows)
            call.wait("end")
        if outcome == "commit-writing":
            tx.create(leases.record(f"unrelated-{call.index}", holder=None))
        if outcome == "rollback":
            raise _RollBack
        return rows

    try:
        return call.driver.transaction(callback)
    except _RollBack:
        return None


def w_select_once(call: WorkerCall, environment: str, limit: int) -> list[str]:
    """One committed attempt that selects a page exclusively; its keys."""
    command = Leases(environment=environment).query(limit=limit)
    return call.driver.transaction(lambda tx: _keys(in_transaction_scan(tx, command, mode=EXCLUSIVE)))


# -- append ----------------------------------------------------------------------------------------


def w_append_batches(
    call: WorkerCall, partition: str, batches: Sequence[tuple[str, int, bool]], retries: int
) -> list[tuple[str, bool]]:
    """Append each ``(tag, count, native)`` batch in its own transaction; ``(tag, committed)`` per batch.

    ``native`` uses ``tx.append``; otherwise core's point writer (head read
    plus conditional writes). A batch that conflicts is retried up to
    ``retries`` times and reported uncommitted after that.
    """
    done: list[tuple[str, bool]] = []
    for tag, count, native in batches:
        command = batch(partition, tag, count)

        def callback(tx: StorageTransaction, command: Any = command, native: bool = native) -> None:
            if native:
                tx.append(command)
            else:
                point_append(tx, command)

        for _ in range(retries):
            try:
                call.driver.transaction(callback)
            except StorageConflictError:
                continue
            done.append((tag, True))
            break
        else:
            done.append((tag, False))
    return done


# -- durability ------------------------------------------------------------------------------------


def w_write_leases_and_wait(call: WorkerCall, environment: str, names: Sequence[str]) -> None:
    """Create a lease per name; then move the first in its index and delete the last; signal ``committed``.

    Then waits, so the check can SIGKILL this process right after the commits
    were acknowledged and before anything else happens in it.
    """
    leases = Leases(environment=environment)

    def create(tx: StorageTransaction) -> None:
        for at, name in enumerate(names, start=1):
            tx.create(leases.record(name, at=10 * at, holder=f"{environment}-{name}"))

    call.driver.transaction(create)

    def move_and_delete(tx: StorageTransaction) -> None:
        first, last = tx.get([leases.key(names[0]), leases.key(names[-1])])
        assert first is not None and last is not None, "a record this process just committed is gone"
        tx.replace(first, leases.record(names[0], at=1000, holder=f"{environment}-{names[0]}-moved"))
        tx.delete(last)

    call.driver.transaction(move_and_delete)
    call.signal("committed")
    call.wait("never", timeout=600)


def w_read_leases(call: WorkerCall, environment: str, names: Sequence[str]) -> dict[str, Any]:
    """Point reads of the named leases (canonical text or ``None``) and one advisory scan of their index."""
    from ._mutations_support import query_pairs, read

    leases = Leases(environment=environment)
    # Sized to the driver's limits: reads in as many attempts, and the scan in as many pages, as it takes.
    found = read(call.driver, [leases.key(name) for name in names])
    scan = query_pairs(call.driver, leases.query(limit=max(1, len(names))))
    return {
        "documents": {
            name: None if record is None else record.document.text
            for name, record in zip(names, found, strict=True)
        },
        "index": [(sort, key.encoded) for key, sort in scan],
    }


# -- conflicts -------------------------------------------------------------------------------------


def _counter(record: StoredRecord | None) -> int:
    if record is None:
        return 0
    return int(str(record.document.value["holder"]).rpartition("-")[2])


def w_increment(
    call: WorkerCall, environment: str, times: int, pause: bool, retries: int
) -> list[int | None]:
    """Increment the ``counter`` lease ``times`` times, each a read then a replace (a create at 0).

    Returns, per increment, the value the committed attempt read (``None``
    when it kept conflicting). With ``pause`` the first attempt of the first
    increment signals ``read`` with what it read and waits for ``go``.
    """
    leases = Leases(environment=environment)
    key = leases.key("counter")
    pausing = [True] if pause else []
    seen: list[int | None] = []

    def callback(tx: StorageTransaction) -> int:
        (current,) = tx.get([key])
        value = _counter(current)
        if pausing:
            pausing.clear()
            call.signal("read", value)
            call.wait("go")
        record = leases.record("counter", holder=f"count-{value + 1}")
        if current is None:
            tx.create(record)
        else:
            tx.replace(current, record)
        return value

    for _ in range(times):
        for _ in range(retries):
            try:
                seen.append(call.driver.transaction(callback))
            except StorageConflictError:
                continue
            break
        else:
            seen.append(None)
    return seen


def w_create_if_absent(call: WorkerCall, environment: str, content: str, pause: bool) -> str:
    """Read the ``claim`` lease; create it with ``content`` when absent. ``created`` or ``present``.

    With ``pause`` the first attempt signals ``read`` after its read and
    waits for ``go``. A conflict propagates (the check counts it as not committed).
    """
    leases = Leases(environment=environment)
    first = [True] if pause else []

    def callback(tx: StorageTransaction) -> str:
        (current,) = tx.get([leases.key("claim")])
        if first:
            first.clear()
            call.signal("read", current is None)
            call.wait("go")
        if current is not None:
            return "present"
        tx.create(leases.record("claim", holder=content))
        return "created"

    return call.driver.transaction(callback)


# -- completion waits ------------------------------------------------------------------------------


def w_register_wait(call: WorkerCall, environment: str, source: str, waiter: str, pause: bool) -> str:
    """Register ``waiter`` as waiting on ``source`` the way core does; the plan of the committed attempt.

    With ``pause`` the first attempt signals ``read`` (its plan) after the
    fenced read and waits for ``go`` before it writes.
    """
    presence = RunCompletionWaitPresence(environment, source)
    first = [True] if pause else []

    def callback(tx: StorageTransaction) -> str:
        source_run, marker = tx.get([presence.source_key, presence.key])
        plan = plan_completion_wait(source_run, marker)
        if first:
            first.clear()
            call.signal("read", plan.value)
            call.wait("go")
        if plan is CompletionWaitPlan.CREATE_MARKER:
            tx.create(presence.record(tx.now()))
        if plan is not CompletionWaitPlan.SOURCE_TERMINAL:
            tx.create(run_record(environment, waiter, status=RunStatus.WAITING, waiting_for=source))
        return plan.value

    return call.driver.transaction(callback)


def w_finish_source(call: WorkerCall, environment: str, source: str) -> bool:
    """The source's terminal transition: one attempt reads the run and its marker and marks it succeeded.

    Returns whether the marker was present, i.e. whether core would go on to
    query the waiter index (absent: it skips that query).
    """
    presence = RunCompletionWaitPresence(environment, source)

    def callback(tx: StorageTransaction) -> bool:
        source_run, marker = tx.get([presence.source_key, presence.key])
        assert source_run is not None, f"the source run {source} the check created is gone"
        tx.replace(source_run, run_record(environment, source, status=RunStatus.SUCCEEDED))
        return marker is not None

    return call.driver.transaction(callback)


def run_key(environment: str, run_id: str) -> StorageRecordKey:
    return run_record_key(environment, run_id)


def scan_keys(result: Any) -> list[str]:
    """The encoded keys of a query page, in order."""
    return _keys(result)


def end_all(workers: Iterable[Worker], tag: str) -> None:
    """Send ``tag`` to every worker still running a call (on the way out of a failed check)."""
    for worker in workers:
        if worker.running:
            with contextlib.suppress(Exception):
                worker.send(tag)


def query_of(environment: str, limit: int) -> QueryRecordsCommand:
    return Leases(environment=environment).query(limit=limit)
