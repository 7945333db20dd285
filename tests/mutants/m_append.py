"""Broken drivers for the append area.

Positions are allocated inside the reference store's commit, which no
wrapper can see, so the allocation mutants replace the append half of one
store instance's ``_writes`` (the point that turns a staged batch into
records and a head). The staging mutants wrap the attempt instead. Every
patch is made on the store instance a mutant store handle owns, never on a
module, so nothing leaks into other runs in the same process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance import (
    AppendRecordsCommand,
    NewStorageRecord,
    StorageLimits,
    StorageStreamExhaustedError,
    materialize_storage_append,
    parse_append_records_command,
    read_storage_stream_position,
)
from runlane_conformance.catalogue import append
from runlane_conformance.contract.encodings import U64_MAX
from runlane_conformance.contract.errors import StorageAttemptEndedError
from runlane_conformance.contract.limits import StorageTransactionMeter
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.streams import MaterializedStorageAppend
from runlane_conformance.local.store import CommitPlan, LocalStore
from tests.mutants.catalog import Mutant
from tests.mutants.m_conflicts import store_mutant
from tests.mutants.wrapping import WrappedDriver, WrappedStore, WrappedTransaction, mutant_harness

T = TypeVar("T")
Writes = list[tuple[str, Any]]
Placer = Callable[[Any, Any, AppendRecordsCommand], Writes]


def _head(local: Any, command: AppendRecordsCommand, snapshot: int | None = None) -> tuple[str, Any]:
    """The head key and the head record (latest, or as ``snapshot`` saw it)."""
    head_key = command.layout.head_key(command.partition).encoded
    chain = local._chains.get(head_key)
    if chain is None:
        return head_key, None
    if snapshot is None:
        return head_key, chain[-1][1]
    for version in reversed(chain):
        if version[0] <= snapshot:
            return head_key, version[1]
    return head_key, None


def _as_writes(placed: MaterializedStorageAppend, head_key: str) -> Writes:
    return [(record.key.encoded, record) for record in placed.records] + [(head_key, placed.head)]


class _PlacingDriver(WrappedDriver):
    """Replaces how the store places an append batch (once per store)."""

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        if not store.shared.get("patched"):
            store.shared["patched"] = True
            local = inner.store
            original = local._writes
            place = self.place

            def writes(plan: Any) -> Writes:
                base: Writes = original(replace(plan, append=None))
                if plan.append is None:
                    return base
                return base + place(local, plan, plan.append)

            local._writes = writes

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        raise NotImplementedError


class GapBetweenBatches(_PlacingDriver):
    """Leaves one unused position before every batch after the first."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        head_key, head = _head(local, command)
        start = read_storage_stream_position(command.stream, command.partition, head)
        return _as_writes(materialize_storage_append(command, start + (0 if head is None else 1)), head_key)


class HeadHoldsLastPosition(_PlacingDriver):
    """Stores the last allocated position in the head instead of the next one."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        head_key, head = _head(local, command)
        placed = materialize_storage_append(
            command, read_storage_stream_position(command.stream, command.partition, head)
        )
        layout = command.layout
        wrong = build_storage_record(
            layout.head_table, layout.head_value(command.partition, placed.last_position)
        )
        return [(record.key.encoded, record) for record in placed.records] + [(head_key, wrong)]


class OwnCounterIgnoresHead(_PlacingDriver):
    """Allocates from a private counter, ignoring heads that point writers advanced."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        counters = local.__dict__.setdefault("_mutant_counters", {})
        start = counters.get(command.partition, 1)
        counters[command.partition] = start + len(command.values)
        head_key, _head_record = _head(local, command)
        return _as_writes(materialize_storage_append(command, start), head_key)


class StaleHeadAllocation(_PlacingDriver):
    """Allocates from the head the attempt's snapshot saw, so concurrent appends overlap."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        head_key, head = _head(local, command, plan.snapshot)
        start = read_storage_stream_position(command.stream, command.partition, head)
        return _as_writes(materialize_storage_append(command, start), head_key)


class CommitsWhatFits(_PlacingDriver):
    """On an exhausted head, commits the part of the batch that still fits, then reports the error."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        head_key, head = _head(local, command)
        start = read_storage_stream_position(command.stream, command.partition, head)
        try:
            return _as_writes(materialize_storage_append(command, start), head_key)
        except StorageStreamExhaustedError:
            fit = U64_MAX - start
            if fit >= 1:
                partial = AppendRecordsCommand(command.stream, command.partition, command.values[:fit])
                local._apply(_as_writes(materialize_storage_append(partial, start), head_key))
            raise


class ReservesAtStaging(WrappedTransaction):
    """Reserves positions when append() is called (like a sequence), so aborted attempts burn them."""

    def append(self, command: Any) -> None:
        parsed = parse_append_records_command(command)
        self.reserve(parsed)
        self.inner.append(parsed)

    def reserve(self, parsed: Any) -> None:
        """Move the head past the batch in a commit of its own."""
        helper = self.driver.store.inner.connect()
        layout = parsed.layout

        def reserve(tx: Any) -> None:
            (head,) = tx.get([layout.head_key(parsed.partition)])
            start = read_storage_stream_position(parsed.stream, parsed.partition, head)
            bumped = build_storage_record(
                layout.head_table, layout.head_value(parsed.partition, start + len(parsed.values))
            )
            if head is None:
                tx.create(bumped)
            else:
                tx.replace(head, bumped)

        helper.transaction(reserve)


# -- positions through a float or a signed 64-bit column, positions burnt by a BaseException ---------

#: The largest position a signed 64-bit column holds.
I64_MAX = 2**63 - 1


class FloatPositions(_PlacingDriver):
    """Reads the head's next position through a double, so positions past 2**53 lose their last digits."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        head_key, head = _head(local, command)
        start = int(float(read_storage_stream_position(command.stream, command.partition, head)))
        return _as_writes(materialize_storage_append(command, max(1, start)), head_key)


class SignedPositions(_PlacingDriver):
    """Keeps positions in a signed 64-bit column: a batch whose head would pass 2**63-1 is refused."""

    @staticmethod
    def place(local: Any, plan: Any, command: AppendRecordsCommand) -> Writes:
        head_key, head = _head(local, command)
        start = read_storage_stream_position(command.stream, command.partition, head)
        if start + len(command.values) > I64_MAX:
            raise StorageStreamExhaustedError(f"{command.partition}: the position column is full")
        return _as_writes(materialize_storage_append(command, start), head_key)


class StagesBatches(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.batches: list[Any] = []

    def append(self, command: Any) -> None:
        self.inner.append(command)
        self.batches.append(parse_append_records_command(command))


class BurnsPositionsOnBaseException(WrappedDriver):
    """Gives a sequence's reservation back when the callback raises an Exception, not a BaseException."""

    transaction_class = StagesBatches

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[StagesBatches] = []

        def run(tx: Any) -> T:
            attempts.append(StagesBatches(tx, self))
            return callback(attempts[-1])

        try:
            return self.inner.transaction(run)  # type: ignore[no-any-return]
        except Exception:
            raise
        except BaseException:
            for command in attempts[-1].batches if attempts else []:
                ReservesAtStaging(None, self).reserve(command)
            raise


class DropsLaterBatches(WrappedTransaction):
    """Silently ignores every append after the first one in an attempt."""

    appended = False

    def append(self, command: Any) -> None:
        if self.appended:
            return
        self.appended = True
        self.inner.append(command)


class DefersAppend(WrappedDriver):
    """Keeps the caller's append command as given and stages it only when the callback returns.

    Reads after append() are therefore still allowed, and the caller's
    values are read only at the end, after the caller may have changed them.
    """

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            wrapped = _DeferredTransaction(tx, self)
            result = callback(wrapped)
            for command in wrapped.pending:
                tx.append(command)
            return result

        return self.inner.transaction(run)  # type: ignore[no-any-return]


class _DeferredTransaction(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.pending: list[Any] = []

    def append(self, command: Any) -> None:
        self.pending.append(command)


class ForgetsStreamReads(WrappedTransaction):
    """Drops its own point reads of the stream from its bookkeeping before appending to it."""

    def append(self, command: Any) -> None:
        parsed = parse_append_records_command(command)
        layout = parsed.layout
        reads = self.inner._reads
        for ekey in list(reads):
            owner_head = ekey == layout.head_key(parsed.partition).encoded
            record_prefix = layout.record_key(parsed.partition, 1).encoded.rpartition("/")[0] + "/"
            if owner_head or ekey.startswith(record_prefix):
                del reads[ekey]
        self.inner.append(parsed)


_UNLIMITED = StorageLimits(
    max_point_reads=10**6,
    max_query_results=10**6,
    max_transaction_records=10**6,
    max_record_bytes=2**30,
    max_transaction_bytes=2**40,
)


class UnmeteredAppend(WrappedTransaction):
    """Does not count appended records and the head against the transaction limits."""

    def append(self, command: Any) -> None:
        meter = self.inner._meter
        self.inner._meter = type(meter)(_UNLIMITED)
        try:
            self.inner.append(command)
        finally:
            self.inner._meter = meter


class IgnoresEndedAppend(WrappedDriver):
    """Accepts (and drops) append() calls on an attempt that already ended."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            wrapped = _EndAware(tx, self)
            try:
                return callback(wrapped)
            finally:
                wrapped.ended = True

        return self.inner.transaction(run)  # type: ignore[no-any-return]


class _EndAware(WrappedTransaction):
    ended = False

    def append(self, command: Any) -> None:
        if self.ended:
            return
        self.inner.append(command)


class _AppendIgnoredAfterRollback(WrappedTransaction):
    """Refuses append() on an ended attempt only if that attempt committed; otherwise drops it quietly."""

    committed = False

    def append(self, command: Any) -> None:
        try:
            self.inner.append(command)
        except StorageAttemptEndedError:
            if self.committed:
                raise


class _RefusesOnlyAfterCommit(WrappedDriver):
    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[_AppendIgnoredAfterRollback] = []

        def run(tx: Any) -> T:
            wrapped = _AppendIgnoredAfterRollback(tx, self)
            attempts.append(wrapped)
            return callback(wrapped)

        result: T = self.inner.transaction(run)
        attempts[-1].committed = True
        return result


class _NarrowMeter(StorageTransactionMeter):
    """Charges an append at the width of position 1 (19 digits fewer than the widest) per record and head."""

    def add_appended(self, encoded_keys: Sequence[str], sizes: Sequence[int]) -> None:
        super().add_appended(encoded_keys, [size - 19 for size in sizes])


class _ChargesAppendNarrow(WrappedTransaction):
    """measure_storage_append still refuses a batch too big alone; beside point work it is charged narrow."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        inner._rules.meter = _NarrowMeter(inner._rules.meter.limits)


MUTANTS = [
    Mutant(
        "gap-between-batches",
        "tests.mutants.m_append:gap_between_batches",
        append.CONTIGUOUS,
        "leaves an unused position before each later batch",
    ),
    Mutant(
        "head-holds-last-position",
        "tests.mutants.m_append:head_holds_last",
        append.LAYOUT_REQ,
        "the head stores the last position instead of the next",
    ),
    Mutant(
        "positions-consumed-on-rollback",
        "tests.mutants.m_append:reserves_at_staging",
        append.NOTHING_ON_ROLLBACK,
        "positions are reserved when append() is called, even if the attempt aborts",
    ),
    Mutant(
        "drops-second-batch",
        "tests.mutants.m_append:drops_later_batches",
        append.ONE_BATCH,
        "a second append in one attempt is silently ignored",
    ),
    Mutant(
        "append-does-not-seal",
        "tests.mutants.m_append:defers_append",
        append.SEALS,
        "append is staged at the end of the callback, so reads after it still work",
    ),
    Mutant(
        "append-keeps-caller-values",
        "tests.mutants.m_append:defers_append",
        append.COPIES,
        "the caller's values are read only when the callback returns",
    ),
    Mutant(
        "forgets-stream-reads",
        "tests.mutants.m_append:forgets_stream_reads",
        append.OWN_STREAM,
        "an attempt may read its stream's head and then append to it",
    ),
    Mutant(
        "allocates-ignoring-head",
        "tests.mutants.m_append:own_counter",
        append.MIXED,
        "native appends count positions privately and ignore heads point writers advanced",
    ),
    Mutant(
        "commits-what-fits",
        "tests.mutants.m_append:commits_what_fits",
        append.BOUNDS,
        "an exhausted batch commits the records that still fit",
    ),
    Mutant(
        "stale-head-allocation",
        "tests.mutants.m_append:stale_head",
        append.CONCURRENT,
        "positions come from the head the attempt's snapshot saw",
    ),
    Mutant(
        "unmetered-append",
        "tests.mutants.m_append:unmetered_append",
        append.LIMITS,
        "appended records and the head are not counted against limits",
    ),
    Mutant(
        "append-after-attempt-ignored",
        "tests.mutants.m_append:ignores_ended_append",
        append.ENDED,
        "append() on an ended attempt is silently dropped",
    ),
    Mutant(
        "float-positions",
        "tests.mutants.m_append:float_positions",
        append.BOUNDS,
        "the head's next position is read through a double, so positions past 2**53 are rounded",
    ),
    Mutant(
        "upserts-appended-records",
        "tests.mutants.m_append:upserts_appended_records",
        append.OCCUPIED,
        "native append writes its records as upserts, overwriting a record that already sits at the head's "
        "next position",
    ),
    Mutant(
        "signed-64-bit-positions",
        "tests.mutants.m_append:signed_positions",
        append.BOUNDS,
        "positions live in a signed 64-bit column, so a batch reaching 2**63 is refused as exhausted",
    ),
    Mutant(
        "positions-burnt-by-base-exception",
        "tests.mutants.m_append:burns_positions_on_base_exception",
        append.NOTHING_ON_ROLLBACK,
        "a callback that raised a BaseException (not an Exception) leaves its batch's positions consumed",
    ),
    Mutant(
        "append-ignored-after-rollback",
        "tests.mutants.m_append:append_ignored_after_rollback",
        append.ENDED,
        "refuses append() on an ended attempt only after a commit; after a rollback or replay it is dropped",
    ),
    Mutant(
        "append-charged-narrow-with-point-work",
        "tests.mutants.m_append:append_charged_narrow",
        append.LIMITS,
        "charges an append beside point writes at the narrowest position width, so the bytes pass the limit",
    ),
]


class UpsertsAppendedRecords(LocalStore):
    """Writes each appended record whether or not its position is taken (an upsert), so it overwrites."""

    def _writes(self, plan: CommitPlan) -> list[tuple[str, NewStorageRecord | None]]:
        command = plan.append
        if command is None:
            return super()._writes(replace(plan, append=None))
        writes = super()._writes(replace(plan, append=None))
        head_key = command.layout.head_key(command.partition).encoded
        head_chain = self._chains.get(head_key)
        start = read_storage_stream_position(
            command.stream, command.partition, None if head_chain is None else head_chain[-1][1]
        )
        placed = materialize_storage_append(command, start)
        writes.extend((record.key.encoded, record) for record in placed.records)
        writes.append((head_key, placed.head))
        return writes


upserts_appended_records = store_mutant(UpsertsAppendedRecords)
float_positions = mutant_harness(FloatPositions)
signed_positions = mutant_harness(SignedPositions)
burns_positions_on_base_exception = mutant_harness(BurnsPositionsOnBaseException)
gap_between_batches = mutant_harness(GapBetweenBatches)
head_holds_last = mutant_harness(HeadHoldsLastPosition)
own_counter = mutant_harness(OwnCounterIgnoresHead)
stale_head = mutant_harness(StaleHeadAllocation)
commits_what_fits = mutant_harness(CommitsWhatFits)
reserves_at_staging = mutant_harness(transaction_class=ReservesAtStaging)
drops_later_batches = mutant_harness(transaction_class=DropsLaterBatches)
defers_append = mutant_harness(DefersAppend)
forgets_stream_reads = mutant_harness(transaction_class=ForgetsStreamReads)
unmetered_append = mutant_harness(transaction_class=UnmeteredAppend)
ignores_ended_append = mutant_harness(IgnoresEndedAppend)
append_ignored_after_rollback = mutant_harness(_RefusesOnlyAfterCommit)
append_charged_narrow = mutant_harness(transaction_class=_ChargesAppendNarrow)
