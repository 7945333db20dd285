"""A fifth blind batch: broken drivers written from the contract without reading the suites.

Like ``blind_batch.py`` (whose machinery this module reuses), each driver is
the reference driver with one realistic bug, confined to one dimension a
hand-written check may never cross: the third page of a scan, one index's
lookahead row, the descending direction of exclusive selection, the operator
read model's ties, a second instance's cache or clock, the time of a replayed
attempt, an append deferred to commit, the second chunk of a batched point
read, integers past 2^53, strings past 64 KiB, limits advertised one off,
UTF-16 ordering of astral characters, DATETIME(0) truncation, case-folding,
PAD SPACE and Unicode-normalising key columns, per-row versions after a
delete, cascading deletes, gap locks that stop at the last row, a third
attempt that validates only its writes, exclusive holds released early or
leaked after an error, stream positions through a double and the last u64
position, insertion-order ties, INT32 sequences and pre-1970 timeouts.

None of these bugs duplicates one of ``blind_batch.py``. The module is not
named ``m_*.py``: ``m_blind5.py`` enrols each one a check refuses, by the
requirement that refuses it; ``blind_batch5.md`` records the measurement.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace as dc_replace
from typing import Any, TypeVar

from runlane_conformance.contract.catalog import (
    StorageCandidateMode,
    StorageIndexName,
    StorageQueryDirection,
    StorageTableName,
)
from runlane_conformance.contract.cursors import (
    StorageCursorPosition,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
)
from runlane_conformance.contract.encodings import U64_MAX, storage_tuple_codec
from runlane_conformance.contract.errors import (
    StorageLimitName,
    StorageStreamExhaustedError,
    create_storage_limit_error,
)
from runlane_conformance.contract.records import parse_new_storage_record
from runlane_conformance.contract.streams import (
    materialize_storage_append,
    parse_append_records_command,
    read_storage_stream_position,
)
from runlane_conformance.contract.table_definitions import (
    run_completion_wait_presence_record_key,
    run_record_key,
)
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageIndexReference,
    StorageQueryRange,
    StorageRangeBound,
    StoredRecord,
)
from runlane_conformance.harness import load_harness
from runlane_conformance.local import operator as local_operator
from runlane_conformance.local.driver import LocalTransaction
from runlane_conformance.local.store import CommitPlan, LocalStore, RangeDependency, StoreConflict
from tests.mutants.blind_batch import (
    _HUGE,
    BlindDriver,
    BlindMutant,
    BlindTransaction,
    PatchedDriver,
    PatchedStore,
    _mangling,
    _with_version,
    patched_local,
)
from tests.mutants.wrapping import WrappedDriver, WrappedHarness, WrappedStore, mutant_harness

T = TypeVar("T")

_Entry = tuple[StorageIndexReference, str]


def _arranged(
    entries: list[_Entry], command: QueryRecordsCommand, key: Callable[[_Entry], Any]
) -> list[_Entry]:
    arranged = sorted(entries, key=key)
    return arranged[::-1] if command.direction is StorageQueryDirection.DESCENDING else arranged


# =================================================================================================
# Wrapping
# =================================================================================================


# --- the third page of a scan ---------------------------------------------------------------------


class _PageThreeTransaction(BlindTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        driver = self.driver
        assert isinstance(driver, _PageThreeDriver)
        return driver.paged(command, self.inner.query_candidates(command, **kwargs))


class _PageThreeDriver(BlindDriver):
    """Pages past the second are fetched with ``OFFSET`` one too far: page 3 loses its last row."""

    transaction_class = _PageThreeTransaction

    def paged(self, command: Any, result: Any) -> Any:
        if not isinstance(command, QueryRecordsCommand) or not isinstance(result, QueryRecordsResult):
            return result
        depth: dict[str, int] = self.store.shared.setdefault("depth", {})
        page = 1 if command.cursor is None else depth.get(command.cursor, 2)
        if result.cursor is not None:
            depth[result.cursor] = page + 1
        if page == 3 and len(result.items) > 1:
            return QueryRecordsResult(result.items[:-1], result.cursor)
        return result

    def query(self, command: Any) -> Any:
        return self.paged(command, self.inner.query(command))


page_three_loses_its_last_row = mutant_harness(_PageThreeDriver)


# --- the operator read model ----------------------------------------------------------------------


class _OperatorTiesDriver(BlindDriver):
    """list_runs is ``ORDER BY created_at DESC, key ASC``: runs created in the same instant keep key order."""

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        store: LocalStore = self.inner.store
        command = QueryRecordsCommand(
            StorageIndexName.RUNS_BY_CREATED_AT,
            environment,
            limit,
            StorageQueryRange(),
            StorageQueryDirection.DESCENDING,
            cursor,
        )
        position = decode_storage_query_cursor(command)
        snapshot = store.open_snapshot()
        try:
            page = store.scan(
                snapshot,
                command.index.value,
                environment,
                StorageQueryRange(),
                StorageQueryDirection.ASCENDING,
                None,
                _HUGE,
                exact=True,
            )
            entries = list(zip(page.references, page.ekeys, strict=True))
            # sort descending, key ascending
            entries.sort(key=lambda entry: entry[1])
            entries.sort(key=lambda entry: entry[0].sort, reverse=True)
            start = 0
            if position is not None:
                for number, (reference, ekey) in enumerate(entries):
                    if reference.sort == position.sort and ekey == position.key:
                        start = number + 1
                        break
            chosen = entries[start : start + limit]
            records = store.read(snapshot, [ekey for _reference, ekey in chosen])
        finally:
            store.rollback(0, snapshot, ())
        items = tuple(record for record in records if record is not None)
        next_cursor = None
        if chosen and len(chosen) == limit:
            next_cursor = encode_storage_query_cursor(command, chosen[-1][0])
        return local_operator.OperatorPage(items, next_cursor)


operator_list_runs_ties_in_key_order = mutant_harness(_OperatorTiesDriver)


class _TombstonedChildDriver(BlindDriver):
    """get_run for a child run reads through the parent's join, which forgot the tombstone filter."""

    def get_run(self, environment: str, run_id: str) -> Any:
        shown = self.inner.get_run(environment, run_id)
        if shown is not None:
            return shown
        store: LocalStore = self.inner.store
        [raw] = store.read(store.latest_seq(), [run_record_key(environment, run_id).encoded])
        if raw is not None and raw.document.value.get("parentRunId") is not None:
            return raw
        return None


operator_get_run_shows_tombstoned_child = mutant_harness(_TombstonedChildDriver)


class _OperatorCacheDriver(BlindDriver):
    """list_runs pages are cached per instance until this instance commits (a read-model cache)."""

    def __init__(self, inner: Any, store: Any) -> None:
        super().__init__(inner, store)
        self.pages: dict[tuple[str, int, str | None], Any] = {}

    def transaction(self, callback: Callable[[Any], T]) -> T:
        result = super().transaction(callback)
        self.pages.clear()
        return result

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        key = (environment, limit, cursor)
        cached = self.pages.get(key)
        if cached is None:
            cached = self.pages[key] = super().list_runs(environment, limit=limit, cursor=cursor)
        return cached


operator_list_runs_cached_per_instance = mutant_harness(_OperatorCacheDriver)


# --- a second instance's clock --------------------------------------------------------------------


class _FirstClockStore(WrappedStore):
    """The clock is configured on the pool: the first instance's clock serves every later instance."""

    def _clock(self, clock: Any) -> Any:
        if "clock" not in self.shared:
            self.shared["clock"] = clock
        return self.shared["clock"]

    def connect(self, *, clock: Any = None) -> WrappedDriver:
        return self.driver_class(self.inner.connect(clock=self._clock(clock)), self)

    def connect_with_faults(self, hook: Any, *, clock: Any = None) -> WrappedDriver:
        return super().connect_with_faults(hook, clock=self._clock(clock))


class _FirstClockHarness(WrappedHarness):
    def open_store(self) -> WrappedStore:
        return _FirstClockStore(self.inner.open_store(), self.driver_class)

    def attach(self, address: object) -> WrappedStore:
        return _FirstClockStore(self.inner.attach(address), self.driver_class)


def clock_of_the_first_instance(options: Mapping[str, str]) -> WrappedHarness:
    return _FirstClockHarness(load_harness("local", options), BlindDriver)


# --- an append deferred to commit -----------------------------------------------------------------


class _DeferredAppendTransaction(BlindTransaction):
    """append() only queues the batch; it is sent with the commit, so the read phase stays open."""

    pending: Any = None

    def append(self, command: Any) -> None:
        if self.inner._rules.ended or self.pending is not None:
            self.flush()
            self.inner.append(command)
            return
        self.pending = parse_append_records_command(command)

    def flush(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            self.inner.append(pending)


class _DeferredAppendDriver(BlindDriver):
    transaction_class = _DeferredAppendTransaction

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> T:
            wrapped = _DeferredAppendTransaction(tx, self)
            result = callback(wrapped)
            wrapped.flush()
            return result

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]


append_deferred_keeps_reads_open = mutant_harness(_DeferredAppendDriver)


# --- the second chunk of a batched point read -----------------------------------------------------


class _ChunkedGetTransaction(BlindTransaction):
    """get() sends keys in chunks of 32; chunks after the first are mapped back by row order."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        records = super().get(keys)
        if len(records) <= 32:
            return records
        head, tail = records[:32], records[32:]
        return [*head, *[r for r in tail if r is not None], *[r for r in tail if r is None]]


point_reads_second_chunk_by_row_order = mutant_harness(BlindDriver, transaction_class=_ChunkedGetTransaction)


# --- JSON shapes ----------------------------------------------------------------------------------


def _through_double(value: object) -> object:
    """Integers beyond 2^53 pass through a double (a JSON parser with one number type)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        return int(float(value))
    return value


def _text_column(value: object) -> object:
    """Strings longer than a MySQL TEXT column (65535 bytes) come back cut at that length."""
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        if len(data) > 65535:
            return data[:65535].decode("utf-8", "ignore")
    return value


json_integers_past_2_53_through_double = _mangling(_through_double)
json_strings_cut_at_64_kib = _mangling(_text_column)


# --- limits advertised one off ----------------------------------------------------------------------


class _AdvertisesOneFewerRecordsDriver(BlindDriver):
    """The profile says maxTransactionRecords - 1 (a 'safety margin'); the store enforces the real value."""

    @property
    def profile(self) -> Any:
        profile = self.inner.profile
        limits = profile.limits
        return dc_replace(
            profile, limits=dc_replace(limits, max_transaction_records=limits.max_transaction_records - 1)
        )


limits_transaction_records_advertised_one_low = mutant_harness(_AdvertisesOneFewerRecordsDriver)


_DEFAULT_RECORD_BYTES = 400 * 1024
_DEFAULT_TRANSACTION_BYTES = 4 * 1024 * 1024


class _CharacterCountTransaction(BlindTransaction):
    """The record size is checked as ``len(text)`` (characters), not UTF-8 bytes."""

    def _check(self, record: Any) -> None:
        parsed = parse_new_storage_record(record)
        limit = self.driver.profile.limits.max_record_bytes
        if len(parsed.document.text) > limit:
            raise create_storage_limit_error(StorageLimitName.RECORD_BYTES, limit, len(parsed.document.text))

    def create(self, record: Any) -> None:
        self._check(record)
        super().create(record)

    def replace(self, current: Any, record: Any) -> None:
        self._check(record)
        super().replace(current, record)


class _CharacterCountDriver(BlindDriver):
    transaction_class = _CharacterCountTransaction
    advertised = _DEFAULT_RECORD_BYTES

    @property
    def profile(self) -> Any:
        profile = self.inner.profile
        return dc_replace(profile, limits=dc_replace(profile.limits, max_record_bytes=self.advertised))


def limits_record_bytes_counted_in_characters(options: Mapping[str, str]) -> WrappedHarness:
    advertised = int(options.get("max_record_bytes", _DEFAULT_RECORD_BYTES))
    transaction = int(options.get("max_transaction_bytes", _DEFAULT_TRANSACTION_BYTES))
    inner = {**options, "max_record_bytes": str(min(4 * advertised, transaction))}
    driver = type("CharacterCountDriver", (_CharacterCountDriver,), {"advertised": advertised})
    return WrappedHarness(load_harness("local", inner), driver)


class _LimitBoundaryTransaction(BlindTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        self.driver.check_limit(command)  # type: ignore[attr-defined]
        return super().query_candidates(command, **kwargs)


class _LimitBoundaryDriver(BlindDriver):
    """A page limit equal to maxQueryResults is refused (``>=`` where ``>`` was meant)."""

    transaction_class = _LimitBoundaryTransaction

    def check_limit(self, command: Any) -> None:
        maximum = self.profile.limits.max_query_results
        limit = getattr(command, "limit", 0)
        if isinstance(limit, int) and limit >= maximum:
            raise create_storage_limit_error(StorageLimitName.QUERY_RESULTS, maximum, limit)

    def query(self, command: Any) -> Any:
        self.check_limit(command)
        return super().query(command)


limits_query_page_at_maximum_refused = mutant_harness(_LimitBoundaryDriver)


# =================================================================================================
# Patching
# =================================================================================================


# --- one index's plan -------------------------------------------------------------------------------


class _LookaheadStore(PatchedStore):
    """WaitTokenLinksByToken fetches limit + 1 rows to decide on a cursor and forgets to trim the extra."""

    def custom_plan(self, command: QueryRecordsCommand) -> bool:
        return command.index is StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN

    def custom_page(
        self, snapshot: int, command: QueryRecordsCommand, position: StorageCursorPosition | None
    ) -> tuple[QueryRecordsResult, RangeDependency]:
        arranged = self.plan_arrange(self.plan_entries(snapshot, command), command)
        page = self.plan_select(arranged, command, position)
        start = arranged.index(page[0]) if page else len(arranged)
        page = arranged[start : start + command.limit + 1]
        references = tuple(reference for reference, _ekey in page)
        cursor = None
        if len(references) > command.limit:
            cursor = encode_storage_query_cursor(command, references[command.limit - 1])
        dependency = RangeDependency(
            command.index, command.partition, command.range, StorageQueryDirection.ASCENDING, None, None
        )
        return QueryRecordsResult(references, cursor), dependency


links_by_token_lookahead_row_returned = patched_local(store=_LookaheadStore)


def _code_units(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


class _Utf16OrderStore(PatchedStore):
    """Sorts compare in UTF-16 code units (a JVM/.NET collation): astral characters sort below U+E000."""

    def custom_plan(self, command: QueryRecordsCommand) -> bool:
        return True

    def plan_arrange(self, entries: list[_Entry], command: QueryRecordsCommand) -> list[_Entry]:
        def units(entry: _Entry) -> tuple[tuple[bytes, ...], str]:
            return tuple(_code_units(c) for c in storage_tuple_codec.decode(entry[0].sort)), entry[1]

        return _arranged(entries, command, units)


sort_astral_characters_in_utf16_order = patched_local(store=_Utf16OrderStore)


def _seconds(component: str) -> str:
    """An ISO timestamp as a DATETIME(0) column keeps it: the fraction is dropped."""
    if len(component) == 27 and component[19] == "." and component.endswith("Z"):
        return component[:19] + ".000000Z"
    return component


def _truncated(encoded: str) -> str:
    if not storage_tuple_codec.is_valid(encoded):
        return encoded
    return storage_tuple_codec.encode(tuple(_seconds(c) for c in storage_tuple_codec.decode(encoded)))


class _DatetimeSecondsStore(PatchedStore):
    """SchedulesByNextOccurrence lives in a DATETIME(0) column: comparisons and order ignore sub-seconds."""

    def custom_plan(self, command: QueryRecordsCommand) -> bool:
        return command.index is StorageIndexName.SCHEDULES_BY_NEXT_OCCURRENCE

    def plan_entries(self, snapshot: int, command: QueryRecordsCommand) -> list[_Entry]:
        page = self.scan(
            snapshot,
            command.index,
            command.partition,
            StorageQueryRange(),
            StorageQueryDirection.ASCENDING,
            None,
            _HUGE,
        )
        lower, upper = command.range.lower, command.range.upper
        truncated = StorageQueryRange(
            None if lower is None else StorageRangeBound(_truncated(lower.value), lower.inclusive),
            None if upper is None else StorageRangeBound(_truncated(upper.value), upper.inclusive),
        )
        return [
            (reference, ekey)
            for reference, ekey in zip(page.references, page.ekeys, strict=True)
            if truncated.contains(_truncated(reference.sort))
        ]

    def plan_arrange(self, entries: list[_Entry], command: QueryRecordsCommand) -> list[_Entry]:
        return _arranged(entries, command, lambda entry: (_truncated(entry[0].sort), entry[1]))


schedules_next_occurrence_in_whole_seconds = patched_local(store=_DatetimeSecondsStore)


class _InsertionTiesStore(PatchedStore):
    """OutboxByAvailability breaks ties by insertion order (an auto-increment id), not by key."""

    def __init__(self, *, index_lag: int = 0) -> None:
        super().__init__(index_lag=index_lag)
        self.inserted: dict[str, int] = {}

    def _apply(self, writes: Sequence[tuple[str, NewStorageRecord | None]]) -> None:
        for ekey, new in writes:
            if new is None:
                self.inserted.pop(ekey, None)
            elif ekey not in self.inserted:
                self.inserted[ekey] = len(self.inserted) + 1_000_000 - len(ekey)
        super()._apply(writes)

    def custom_plan(self, command: QueryRecordsCommand) -> bool:
        return command.index is StorageIndexName.OUTBOX_BY_AVAILABILITY

    def plan_arrange(self, entries: list[_Entry], command: QueryRecordsCommand) -> list[_Entry]:
        with self._lock:
            order = dict(self.inserted)
        return _arranged(entries, command, lambda entry: (entry[0].sort, order.get(entry[1], 0)))


outbox_availability_ties_in_insertion_order = patched_local(store=_InsertionTiesStore)


def _int32(decimal: str) -> int:
    number = int(decimal) & 0xFFFFFFFF
    return number - (1 << 32) if number >= 1 << 31 else number


class _Int32SequenceStore(PatchedStore):
    """EventsByRun orders by an INT column: sequences past 2^31 - 1 wrap negative and sort first."""

    def custom_plan(self, command: QueryRecordsCommand) -> bool:
        return command.index is StorageIndexName.EVENTS_BY_RUN

    def plan_arrange(self, entries: list[_Entry], command: QueryRecordsCommand) -> list[_Entry]:
        def column(entry: _Entry) -> tuple[str, int, str]:
            parts = storage_tuple_codec.decode(entry[0].sort)
            return parts[0], _int32(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0, entry[1]

        return _arranged(entries, command, column)


events_sequence_in_int32_column = patched_local(store=_Int32SequenceStore)


class _UnsignedEpochStore(PatchedStore):
    """WaitTokensByTimeout stores an unsigned epoch: a timeout before 1970 wraps and sorts last."""

    def custom_plan(self, command: QueryRecordsCommand) -> bool:
        return command.index is StorageIndexName.WAIT_TOKENS_BY_TIMEOUT

    def plan_arrange(self, entries: list[_Entry], command: QueryRecordsCommand) -> list[_Entry]:
        def column(entry: _Entry) -> tuple[bool, str, str]:
            moment = storage_tuple_codec.decode(entry[0].sort)[0]
            return moment < "1970", entry[0].sort, entry[1]

        return _arranged(entries, command, column)


wait_token_timeouts_before_1970_sort_last = patched_local(store=_UnsignedEpochStore)


# --- key columns that fold distinct keys together ---------------------------------------------------


class _FoldingKeyStore(PatchedStore):
    """Key columns of ``table`` compare under a collation that folds components with ``fold``."""

    table: StorageTableName | None = StorageTableName.SCHEDULES

    @staticmethod
    def fold(component: str) -> str:
        return component

    def folded(self, ekey: str) -> str:
        parts = storage_tuple_codec.decode(ekey)
        if self.table is not None and parts[0] != self.table.value:
            return ekey
        return storage_tuple_codec.encode((parts[0], *(self.fold(c) for c in parts[1:])))

    def read(self, snapshot: int, ekeys: Sequence[str]) -> list[StoredRecord | None]:
        return super().read(snapshot, [self.folded(ekey) for ekey in ekeys])

    def commit(self, plan: CommitPlan) -> None:
        super().commit(
            dc_replace(
                plan,
                reads={self.folded(ekey): record for ekey, record in plan.reads.items()},
                creates=[(self.folded(ekey), record) for ekey, record in plan.creates],
                replaces=[(self.folded(ekey), record) for ekey, record in plan.replaces],
                deletes=[self.folded(ekey) for ekey in plan.deletes],
            )
        )


class _CaseInsensitiveSchedules(_FoldingKeyStore):
    """Schedule ids live in a case-insensitive column (MySQL's default collation)."""

    table = StorageTableName.SCHEDULES
    fold = staticmethod(str.casefold)


class _PadSpaceOwners(_FoldingKeyStore):
    """Idempotency keys live in a PAD SPACE column: trailing spaces do not tell keys apart."""

    table = StorageTableName.OWNERS
    fold = staticmethod(lambda component: component.rstrip(" "))


class _NormalisingKeys(_FoldingKeyStore):
    """Every key is stored NFC-normalised (a file-system or ORM layer normalises names)."""

    table = None
    fold = staticmethod(lambda component: unicodedata.normalize("NFC", component))


keys_schedule_ids_case_insensitive = patched_local(store=_CaseInsensitiveSchedules)
keys_owner_idempotency_pad_space = patched_local(store=_PadSpaceOwners)
keys_unicode_normalised = patched_local(store=_NormalisingKeys)


# --- versions that restart after a delete -----------------------------------------------------------


class _RowVersionStore(PatchedStore):
    """Versions are a per-row counter (``version = version + 1``): a re-created row starts at 1 again.

    Validation compares versions, as an ``UPDATE ... WHERE version = ?`` does, so a row deleted and
    re-created between a read and the commit looks unchanged.
    """

    def __init__(self, *, index_lag: int = 0) -> None:
        super().__init__(index_lag=index_lag)
        self.rows: dict[str, int] = {}

    def _validate(self, plan: CommitPlan) -> None:
        for ekey, seen in plan.reads.items():
            chain = self._chains.get(ekey)
            latest = None if chain is None else chain[-1][1]
            if (latest is None) != (seen is None) or (
                latest is not None and seen is not None and latest.version != seen.version
            ):
                raise StoreConflict(f"record {ekey} changed after this attempt read it")
        super()._validate(dc_replace(plan, reads={}))

    def _apply(self, writes: Sequence[tuple[str, NewStorageRecord | None]]) -> None:
        super()._apply(writes)
        for ekey, new in writes:
            if new is None:
                self.rows.pop(ekey, None)
                continue
            count = self.rows[ekey] = self.rows.get(ekey, 0) + 1
            chain = self._chains[ekey]
            seq, stored, entries = chain[-1]
            assert stored is not None
            chain[-1] = (seq, _with_version(stored, str(count)), entries)


versions_per_row_restart_after_delete = patched_local(store=_RowVersionStore)


# --- cascading deletes ------------------------------------------------------------------------------


class _CascadeStore(PatchedStore):
    """Deleting a run also deletes rows of another table (a foreign key with ON DELETE CASCADE)."""

    def dependents(self, environment: str, run_id: str) -> list[str]:
        return []

    def _writes(self, plan: CommitPlan) -> list[tuple[str, NewStorageRecord | None]]:
        writes = super()._writes(plan)
        written = {ekey for ekey, _new in writes}
        for ekey in plan.deletes:
            parts = storage_tuple_codec.decode(ekey)
            if parts[0] != StorageTableName.RUNS.value:
                continue
            for dependent in self.dependents(parts[1], parts[2]):
                chain = self._chains.get(dependent)
                if dependent not in written and chain is not None and chain[-1][1] is not None:
                    writes.append((dependent, None))
                    written.add(dependent)
        return writes


class _EventsCascadeStore(_CascadeStore):
    def dependents(self, environment: str, run_id: str) -> list[str]:
        prefix = storage_tuple_codec.encode((StorageTableName.EVENTS.value, environment, run_id)) + "/"
        return [ekey for ekey in self._chains if ekey.startswith(prefix)]


class _MarkerCascadeStore(_CascadeStore):
    def dependents(self, environment: str, run_id: str) -> list[str]:
        return [run_completion_wait_presence_record_key(environment, run_id).encoded]


run_delete_cascades_to_events = patched_local(store=_EventsCascadeStore)
run_delete_cascades_to_completion_marker = patched_local(store=_MarkerCascadeStore)


# --- scanned ranges as dependencies -----------------------------------------------------------------


class _DescendingNoDependency(LocalTransaction):
    """A descending scan takes no range lock (the driver's gap lock is written for ascending scans)."""

    def query_candidates(self, command: Any, *, mode: Any = StorageCandidateMode.ADVISORY) -> Any:
        before = len(self._ranges)
        result = super().query_candidates(command, mode=mode)
        if getattr(command, "direction", None) is StorageQueryDirection.DESCENDING:
            del self._ranges[before:]
        return result


descending_scan_not_a_dependency = patched_local(_DescendingNoDependency)


class _RowLocksOnly(LocalTransaction):
    """A short page locks the rows it returned and the gaps between them, not the range past the last."""

    def query_candidates(self, command: Any, *, mode: Any = StorageCandidateMode.ADVISORY) -> Any:
        before = len(self._ranges)
        result = super().query_candidates(command, mode=mode)
        if len(self._ranges) > before and result.items:
            dependency = self._ranges[-1]
            if dependency.stop is None:
                last = result.items[-1]
                self._ranges[-1] = dependency._replace(stop=(last.sort, last.key.encoded))
        return result


short_page_range_stops_at_last_row = patched_local(_RowLocksOnly)


# --- after replays --------------------------------------------------------------------------------


class _NumberedDriver(PatchedDriver):
    """Numbers each attempt of a transaction (per thread) and remembers the first attempt's time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.local = threading.local()

    def transaction(self, callback: Callable[[Any], T]) -> T:
        self.local.number = 0
        self.local.first_now = None
        return super().transaction(callback)

    def new_attempt(self) -> LocalTransaction:
        attempt = super().new_attempt()
        self.local.number = getattr(self.local, "number", 0) + 1
        attempt.number = self.local.number  # type: ignore[attr-defined]
        return attempt


class _ReusedTime(LocalTransaction):
    """A replayed attempt reuses the time the first attempt sampled (the callback's 'now' is cached)."""

    driver: _NumberedDriver

    def now(self) -> Any:
        moment = super().now()
        local = self.driver.local
        if getattr(local, "first_now", None) is None:
            local.first_now = moment
        return local.first_now


replayed_attempt_reuses_first_time = patched_local(_ReusedTime, driver=_NumberedDriver)


class _ThirdAttemptWritesOnly(LocalTransaction):
    """From the third attempt on, the driver goes 'pessimistic' and validates only the keys it writes."""

    number = 1

    def _commit(self) -> None:
        if self.number >= 3:
            rules = self._rules
            mutated = set(rules.mutated)
            for ekey in [ekey for ekey in rules.reads if ekey not in mutated]:
                del rules.reads[ekey]
            self._ranges.clear()
        super()._commit()


third_attempt_validates_only_writes = patched_local(_ThirdAttemptWritesOnly, driver=_NumberedDriver)


# --- exclusive holds --------------------------------------------------------------------------------


class _ExclusiveDescendingAdvisory(LocalTransaction):
    """Exclusive selection is only written for ascending scans: descending ones select advisorily."""

    def query_candidates(self, command: Any, *, mode: Any = StorageCandidateMode.ADVISORY) -> Any:
        if mode == StorageCandidateMode.EXCLUSIVE and getattr(command, "direction", None) is (
            StorageQueryDirection.DESCENDING
        ):
            mode = StorageCandidateMode.ADVISORY
        return super().query_candidates(command, mode=mode)


exclusive_descending_is_advisory = patched_local(_ExclusiveDescendingAdvisory)


class _ReleaseOnSeal(LocalTransaction):
    """Holds are taken in a short selection transaction that ends with the read phase."""

    def _release(self) -> None:
        store = self._store
        with store._lock:
            for ekey in self._held:
                if store._holds.get(ekey) == self._token:
                    del store._holds[ekey]
        self._held = set()

    def now(self) -> Any:
        moment = super().now()
        self._release()
        return moment

    def create(self, record: Any) -> None:
        super().create(record)
        self._release()

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        self._release()

    def delete(self, current: Any) -> None:
        super().delete(current)
        self._release()

    def append(self, command: Any) -> None:
        super().append(command)
        self._release()


exclusive_released_when_read_phase_ends = patched_local(_ReleaseOnSeal)


class _LeakOnError(LocalTransaction):
    """When the callback raises, the connection goes back to the pool without ROLLBACK: holds stay."""

    def _rollback(self) -> None:
        self._held = set()
        super()._rollback()


exclusive_holds_leak_after_callback_error = patched_local(_LeakOnError)


# --- stream positions -------------------------------------------------------------------------------


class _StreamStore(PatchedStore):
    def place(self, start: int, count: int) -> int:
        return start

    def _writes(self, plan: CommitPlan) -> list[tuple[str, NewStorageRecord | None]]:
        command = plan.append
        if command is None:
            return super()._writes(plan)
        head_key = command.layout.head_key(command.partition).encoded
        head_chain = self._chains.get(head_key)
        head = None if head_chain is None else head_chain[-1][1]
        start = read_storage_stream_position(command.stream, command.partition, head)
        placed = materialize_storage_append(command, self.place(start, len(command.values)))
        writes: list[tuple[str, NewStorageRecord | None]] = [*plan.creates, *plan.replaces]
        writes.extend((ekey, None) for ekey in plan.deletes)
        writes.extend((record.key.encoded, record) for record in placed.records)
        writes.append((head_key, placed.head))
        return writes


class _DoubleHeadStore(_StreamStore):
    """The head is read into a double: past 2^53 the next position rounds (and rows are overwritten)."""

    def place(self, start: int, count: int) -> int:
        return int(float(start)) if start > 2**53 else start


class _LastPositionStore(_StreamStore):
    """The bound check reads ``next head < 2^64 - 1``: a batch ending at the last usable position fails."""

    def place(self, start: int, count: int) -> int:
        if start + count >= U64_MAX:
            raise StorageStreamExhaustedError(f"stream exhausted: {start} + {count} reaches {U64_MAX}")
        return start


append_head_through_a_double = patched_local(store=_DoubleHeadStore)
append_refuses_the_last_usable_position = patched_local(store=_LastPositionStore)


# =================================================================================================
# The batch
# =================================================================================================

_M = "tests.mutants.blind_batch5"

PAGE_N = "N-th page of a scan"
ONE_INDEX = "one index of the catalogue"
DESCENDING = "descending direction"
OPERATOR = "operator read model"
INSTANCE = "second driver instance"
REPLAY = "after a replay"
APPEND = "append in the attempt"
CHUNK = "batched point reads past a chunk"
VALUE = "value shape (large numbers, long strings)"
LIMITS = "limits at the boundary"
UNICODE = "unicode beyond the BMP / normalisation"
KEY_COLLATION = "key column collation of one table"
CLOCK = "clock precision / distance"
DELETE = "after a delete"
CASCADE = "one table's delete reaching another"
RANGE_LOCK = "range dependency extent"
EXCLUSIVE = "exclusive hold lifetime"
STREAM = "stream positions near 2^53 / 2^64"
TIES = "ties on one index"


def _blind(name: str, kills: str, dimension: str, breaks: str) -> BlindMutant:
    return BlindMutant(name, f"{_M}:{name}", kills, dimension, breaks)


BLIND5_MUTANTS: list[BlindMutant] = [
    _blind(
        "page_three_loses_its_last_row",
        "cursors.pages-join-to-one-scan",
        PAGE_N,
        "the third page of any scan drops its last row but keeps the cursor past it",
    ),
    _blind(
        "links_by_token_lookahead_row_returned",
        "limits.query-results-boundary",
        ONE_INDEX,
        "WaitTokenLinksByToken returns limit + 1 rows (the lookahead row) with a cursor at the limit-th",
    ),
    _blind(
        "operator_list_runs_ties_in_key_order",
        "operator_reads.list-shows-each-visible-run-once",
        OPERATOR,
        "list_runs orders runs created in the same instant by ascending key",
    ),
    _blind(
        "operator_get_run_shows_tombstoned_child",
        "operator_reads.tombstone-hides-run-and-history",
        OPERATOR,
        "get_run returns a tombstoned run when it has a parent",
    ),
    _blind(
        "operator_list_runs_cached_per_instance",
        "operator_reads.committed-run-visible-at-once",
        INSTANCE,
        "list_runs pages are cached per instance until that instance commits",
    ),
    _blind(
        "clock_of_the_first_instance",
        "sealing.now-uses-injected-client-clock",
        INSTANCE,
        "every instance of a store uses the clock the first instance was given",
    ),
    _blind(
        "append_deferred_keeps_reads_open",
        "append.seals-reads",
        APPEND,
        "append() queues the batch for the commit, so reads after it are still accepted",
    ),
    _blind(
        "point_reads_second_chunk_by_row_order",
        "point_reads.exact-positions",
        CHUNK,
        "get() of more than 32 keys puts the second chunk's misses after its hits",
    ),
    _blind(
        "json_integers_past_2_53_through_double",
        "json_boundary.numbers-kept-exactly",
        VALUE,
        "integers beyond 2^53 read back rounded through a double",
    ),
    _blind(
        "json_strings_cut_at_64_kib",
        "point_reads.returns-committed-content",
        VALUE,
        "strings longer than 65535 UTF-8 bytes read back cut at 65535 bytes",
    ),
    _blind(
        "limits_transaction_records_advertised_one_low",
        "limits.transaction-records-boundary",
        LIMITS,
        "the profile advertises maxTransactionRecords - 1 but the store accepts one more",
    ),
    _blind(
        "limits_record_bytes_counted_in_characters",
        "limits.record-bytes-boundary",
        LIMITS,
        "the record size limit is checked in characters, so multi-byte records over it are accepted",
    ),
    _blind(
        "limits_query_page_at_maximum_refused",
        "limits.query-results-boundary",
        LIMITS,
        "a query whose limit equals maxQueryResults is refused",
    ),
    _blind(
        "sort_astral_characters_in_utf16_order",
        "cursors.ascending-order",
        UNICODE,
        "sorts compare in UTF-16 code units: astral characters sort below U+E000..U+FFFF",
    ),
    _blind(
        "schedules_next_occurrence_in_whole_seconds",
        "cursors.range-bounds",
        CLOCK,
        "SchedulesByNextOccurrence compares and orders times truncated to whole seconds",
    ),
    _blind(
        "outbox_availability_ties_in_insertion_order",
        "cursors.ties-broken-by-key",
        TIES,
        "OutboxByAvailability orders equal availability times by insertion, not by key",
    ),
    _blind(
        "events_sequence_in_int32_column",
        "cursors.ascending-order",
        VALUE,
        "EventsByRun orders sequences as signed 32-bit integers",
    ),
    _blind(
        "wait_token_timeouts_before_1970_sort_last",
        "cursors.ascending-order",
        CLOCK,
        "WaitTokensByTimeout orders timeouts before 1970 after every later one",
    ),
    _blind(
        "keys_schedule_ids_case_insensitive",
        "point_reads.keys-of-any-shape",
        KEY_COLLATION,
        "schedule keys that differ only in case are the same row",
    ),
    _blind(
        "keys_owner_idempotency_pad_space",
        "point_reads.keys-of-any-shape",
        KEY_COLLATION,
        "owner keys that differ only in trailing spaces are the same row",
    ),
    _blind(
        "keys_unicode_normalised",
        "point_reads.keys-of-any-shape",
        UNICODE,
        "key components are NFC-normalised, so composed and decomposed forms are one key",
    ),
    _blind(
        "versions_per_row_restart_after_delete",
        "conflicts.versions-never-reused",
        DELETE,
        "versions count per row and restart at 1 after a delete; validation compares versions",
    ),
    _blind(
        "run_delete_cascades_to_events",
        "mutations.exact-delete",
        CASCADE,
        "deleting a run deletes its events too",
    ),
    _blind(
        "run_delete_cascades_to_completion_marker",
        "completion_waits.marker-outlives-waiters",
        CASCADE,
        "deleting a run deletes the completion-wait marker of that run id",
    ),
    _blind(
        "descending_scan_not_a_dependency",
        "conflicts.index-phantom",
        DESCENDING,
        "a descending scan's range is not validated at commit",
    ),
    _blind(
        "short_page_range_stops_at_last_row",
        "conflicts.index-phantom",
        RANGE_LOCK,
        "a short page protects its range only up to its last row",
    ),
    _blind(
        "replayed_attempt_reuses_first_time",
        "replay.each-attempt-starts-fresh",
        REPLAY,
        "a replayed attempt's now() returns the first attempt's time",
    ),
    _blind(
        "third_attempt_validates_only_writes",
        "conflicts.present-read-then-replace-elsewhere",
        REPLAY,
        "from the third attempt on, only mutated keys are validated (no reads, no ranges)",
    ),
    _blind(
        "exclusive_descending_is_advisory",
        "exclusive_selection.disjoint-across-instances",
        DESCENDING,
        "exclusive selection on a descending scan takes no holds",
    ),
    _blind(
        "exclusive_released_when_read_phase_ends",
        "exclusive_selection.disjoint-across-instances",
        EXCLUSIVE,
        "exclusive holds are released at now() or the first mutation instead of at commit",
    ),
    _blind(
        "exclusive_holds_leak_after_callback_error",
        "exclusive_selection.released-at-rollback",
        EXCLUSIVE,
        "when the callback raises, its exclusive holds are never released",
    ),
    _blind(
        "append_head_through_a_double",
        "append.positions-contiguous",
        STREAM,
        "the next position is computed through a double: past 2^53 it rounds and overwrites",
    ),
    _blind(
        "append_refuses_the_last_usable_position",
        "append.position-bounds",
        STREAM,
        "a batch whose next head would be exactly 2^64 - 1 is refused as exhausted",
    ),
]
