"""The bookkeeping every transaction attempt needs, whatever the storage under it.

A driver's attempt object answers for its storage: how records are fetched,
how staged work is written and how a lost race is detected. The rules about
*using* an attempt are the same for every driver, and ``StorageAttemptRules``
keeps them in one place:

* one thread at a time: every method claims the attempt without blocking
  (``with rules:``), so a second thread gets ``StorageConcurrentUseError``
  instead of silently interleaving with the first;
* nothing after the end: once the attempt ended (committed, rolled back or
  lost) every call gets ``StorageAttemptEndedError``;
* reads first: ``now()``, the first mutation and an append seal the read set;
  a later ``get``/``query_candidates`` gets ``StorageSealedError``;
* one time per attempt: the clock is sampled at the first ``now()`` and that
  timezone-aware value is returned until the attempt ends;
* mutations only against what was read: each key is mutated at most once, a
  create may not target a key read as present, and replace/delete need the
  record at exactly the version this attempt read (a replacement keeps its key);
* an appending attempt owns the appended stream partition: at most one batch,
  no earlier point reads of that partition and no point mutations of it;
* metering: all of it is counted with ``StorageTransactionMeter``; a limit
  error is remembered, so an attempt whose callback swallowed one still
  refuses to commit (``check_within_limits``).

The object knows nothing about the storage: it holds the reads (encoded key
-> the record seen, ``None`` for absent) and the staged creates, replacements,
deletes and append, each list in staging order, for the driver to write when
it commits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from types import TracebackType

from .catalog import StorageCandidateMode
from .encodings import storage_tuple_codec
from .errors import (
    StorageAttemptEndedError,
    StorageConcurrentUseError,
    StorageDuplicateMutationError,
    StorageKeyChangeError,
    StorageLimitError,
    StorageSealedError,
    StorageUsageError,
    StorageValidationError,
)
from .limits import StorageTransactionMeter
from .records import parse_new_storage_record
from .streams import AppendRecordsCommand, measure_storage_append, parse_append_records_command
from .values import NewStorageRecord, QueryRecordsCommand, StorageLimits, StorageRecordKey, StoredRecord

__all__ = ["StorageAttemptRules"]

_ENDED = "this transaction attempt has ended; it cannot be used again"


class StorageAttemptRules:
    """The contract's rules for one transaction attempt, with its reads and staged mutations.

    Typical use inside a driver's attempt class::

        def get(self, keys):
            with self._rules:                       # concurrency guard + ended check
                keys = self._rules.begin_get(keys)  # validate, sealed check, meter
                records = fetch(...)
                self._rules.record_reads(ekeys, records)
                return records

        def create(self, record):
            with self._rules:
                self._rules.stage_create(record)

    and at the end ``end_for_commit()`` (then ``check_within_limits()`` and
    write ``creates``/``replaces``/``deletes``/``append``) or ``end()`` on rollback.

    ``meter`` may be given to use a subclass of the shared meter; it is
    replaceable (``rules.meter = ...``) until the attempt ends.
    """

    __slots__ = (
        "_clock",
        "_handed",
        "_now",
        "_stream_keys",
        "_use",
        "append",
        "creates",
        "deletes",
        "ended",
        "limit_error",
        "meter",
        "mutated",
        "reads",
        "replaces",
        "sealed",
    )

    def __init__(
        self,
        limits: StorageLimits,
        clock: Callable[[], datetime],
        *,
        meter: StorageTransactionMeter | None = None,
    ) -> None:
        self._clock = clock
        self._use = threading.Lock()
        self._now: datetime | None = None
        self._handed: dict[int, str] = {}  # id of each present record read -> its encoded key
        self._stream_keys: tuple[str, str] | None = None  # (head key, record key prefix) once appended
        self.meter = StorageTransactionMeter(limits) if meter is None else meter
        #: True once the attempt ended; every later call is refused.
        self.ended = False
        #: True once now(), a mutation or an append sealed the read set.
        self.sealed = False
        #: Encoded key -> the record this attempt read there (``None``: read as absent).
        self.reads: dict[str, StoredRecord | None] = {}
        #: Staged creates in staging order: (encoded key, parsed new record).
        self.creates: list[tuple[str, NewStorageRecord]] = []
        #: Staged replacements in staging order: (encoded key, the record read, parsed new record).
        self.replaces: list[tuple[str, StoredRecord, NewStorageRecord]] = []
        #: Staged deletes in staging order: (encoded key, the record read).
        self.deletes: list[tuple[str, StoredRecord]] = []
        #: Encoded keys of every staged point mutation.
        self.mutated: set[str] = set()
        #: The one staged append batch, if any.
        self.append: AppendRecordsCommand | None = None
        #: The first limit error this attempt raised; it can never commit after one.
        self.limit_error: StorageLimitError | None = None

    # -- the guard -------------------------------------------------------------------------------

    def __enter__(self) -> StorageAttemptRules:
        """Claim the attempt for this call; refuse an ended attempt or one another thread is inside."""
        if self.ended:
            raise StorageAttemptEndedError(_ENDED)
        if not self._use.acquire(blocking=False):
            raise StorageConcurrentUseError("this transaction attempt is already in use by another thread")
        if self.ended:  # ended while we were claiming it
            self._use.release()
            raise StorageAttemptEndedError(_ENDED)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._use.release()

    def end(self) -> None:
        """End the attempt (rollback path): every later call is refused."""
        self.ended = True

    def end_for_commit(self) -> None:
        """End the attempt before committing it.

        Raises ``StorageConcurrentUseError`` (the attempt is still ended) when
        another thread is inside the attempt: the callback returned while its
        attempt was still in use, so nothing of it may commit.
        """
        if not self._use.acquire(blocking=False):
            self.ended = True
            raise StorageConcurrentUseError(
                "the callback returned while another thread was using its attempt"
            )
        self.ended = True
        self._use.release()

    # -- metering --------------------------------------------------------------------------------

    def charge(self, action: Callable[[], None]) -> None:
        """Run a meter call, remembering a limit error so the attempt can never commit after it."""
        try:
            action()
        except StorageLimitError as error:
            self.limit_error = error
            raise

    def check_within_limits(self) -> None:
        """Raise the limit error this attempt hit, even if its callback swallowed it."""
        if self.limit_error is not None:
            raise self.limit_error

    # -- reads -----------------------------------------------------------------------------------

    def check_readable(self, operation: str) -> None:
        """Refuse a read once the read set is sealed."""
        if self.sealed:
            raise StorageSealedError(
                f"{operation}() after now() or a mutation: the read set of this attempt is sealed"
            )

    def begin_get(self, keys: Sequence[StorageRecordKey]) -> tuple[StorageRecordKey, ...]:
        """Validate ``get()``'s argument, check the read set is open and count the point reads."""
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
            raise StorageValidationError("get() takes a sequence of StorageRecordKey")
        keys = tuple(keys)
        for key in keys:
            if not isinstance(key, StorageRecordKey):
                raise StorageValidationError(f"{key!r} is not a StorageRecordKey")
        if self.sealed:
            self.check_readable("get")
        try:  # inline rather than charge(): this is every read's hot path
            self.meter.add_point_reads(keys)
        except StorageLimitError as error:
            self.limit_error = error
            raise
        return keys

    def begin_query(self, command: QueryRecordsCommand, mode: object) -> StorageCandidateMode:
        """Validate ``query_candidates()``'s arguments, check the read set is open, check the limit."""
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query_candidates() takes a QueryRecordsCommand")
        if mode is StorageCandidateMode.ADVISORY or mode is StorageCandidateMode.EXCLUSIVE:
            parsed = mode
        else:
            try:
                parsed = StorageCandidateMode(mode)  # type: ignore[arg-type]
            except ValueError as error:
                raise StorageValidationError(f"unknown candidate mode {mode!r}") from error
        if self.sealed:
            self.check_readable("query_candidates")
        try:
            self.meter.check_query(command)
        except StorageLimitError as error:
            self.limit_error = error
            raise
        return parsed

    def record_read(self, ekey: str, record: StoredRecord | None) -> None:
        """Remember what this attempt saw at one encoded key (``None``: absent)."""
        self.reads[ekey] = record
        if record is not None:
            self._handed[id(record)] = ekey

    def record_reads(self, ekeys: Sequence[str], records: Sequence[StoredRecord | None]) -> None:
        """``record_read`` for matching sequences of encoded keys and results."""
        reads = self.reads
        handed = self._handed
        for ekey, record in zip(ekeys, records, strict=True):
            reads[ekey] = record
            if record is not None:
                handed[id(record)] = ekey

    # -- time ------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The attempt's one time: sampled at the first call (timezone-aware), then frozen. Seals reads."""
        if self._now is None:
            sampled = self._clock()
            if not isinstance(sampled, datetime) or sampled.utcoffset() is None:
                raise StorageValidationError("the clock must return a timezone-aware datetime")
            self._now = sampled
        self.sealed = True
        return self._now

    # -- mutations -------------------------------------------------------------------------------

    def _check_mutable(self, ekey: str, key: StorageRecordKey) -> None:
        if ekey in self.mutated:
            raise StorageDuplicateMutationError(f"{key} is already mutated in this attempt")
        owned = self._stream_keys
        if owned is not None and (ekey == owned[0] or ekey.startswith(owned[1])):
            raise StorageDuplicateMutationError(
                f"{key} belongs to the stream partition this attempt appends to; the append owns it"
            )

    def _check_current(self, current: StoredRecord, operation: str) -> str:
        if not isinstance(current, StoredRecord):
            raise StorageValidationError(f"{operation}() needs the StoredRecord this attempt read")
        # The record object this attempt handed out names its key without encoding it again;
        # the identity check makes a stale id (a collected record's) harmless.
        ekey = self._handed.get(id(current))
        if ekey is None or self.reads.get(ekey) is not current:
            ekey = current.key.encoded
        read = self.reads.get(ekey)
        if read is None or read.version != current.version:
            raise StorageKeyChangeError(
                f"{operation}() of {current.key} at version {current.version}: "
                "this attempt did not read that record at that version"
            )
        self._check_mutable(ekey, current.key)
        return ekey

    def _charge_write(self, ekey: str, record: NewStorageRecord | None) -> None:
        try:
            self.meter.add_encoded_write(ekey, record)
        except StorageLimitError as error:
            self.limit_error = error
            raise

    def stage_create(self, record: NewStorageRecord) -> NewStorageRecord:
        """Check and stage a conditional insert; returns the parsed record.

        The key may be unread or read as absent; the driver must still commit
        it only while the key is absent.
        """
        parsed = parse_new_storage_record(record)
        key = parsed.key
        ekey = key.encoded
        self._check_mutable(ekey, key)
        if self.reads.get(ekey) is not None:
            raise StorageDuplicateMutationError(
                f"{key} was read as present in this attempt, so it cannot be created"
            )
        self._charge_write(ekey, parsed)
        self.creates.append((ekey, parsed))
        self.mutated.add(ekey)
        self.sealed = True
        return parsed

    def stage_replace(self, current: StoredRecord, record: NewStorageRecord) -> NewStorageRecord:
        """Check and stage a replacement of exactly ``current`` (same key); returns the parsed record."""
        parsed = parse_new_storage_record(record)
        if isinstance(current, StoredRecord) and current.key != parsed.key:
            raise StorageKeyChangeError(f"a replacement cannot change the key {current.key} to {parsed.key}")
        ekey = self._check_current(current, "replace")
        self._charge_write(ekey, parsed)
        self.replaces.append((ekey, current, parsed))
        self.mutated.add(ekey)
        self.sealed = True
        return parsed

    def stage_delete(self, current: StoredRecord) -> str:
        """Check and stage a delete of exactly ``current``; returns its encoded key."""
        ekey = self._check_current(current, "delete")
        self._charge_write(ekey, None)
        self.deletes.append((ekey, current))
        self.mutated.add(ekey)
        self.sealed = True
        return ekey

    def stage_append(self, command: AppendRecordsCommand) -> AppendRecordsCommand:
        """Check, meter and stage the attempt's one append batch; returns the parsed command.

        The appended partition (its head and records) must be neither point-read
        nor mutated by this attempt, before or after the append.
        """
        parsed = parse_append_records_command(command)
        if self.append is not None:
            raise StorageDuplicateMutationError("an attempt may stage only one append batch")
        layout = parsed.layout
        head = layout.head_key(parsed.partition).encoded
        prefix = storage_tuple_codec.encode((layout.record_table.value, parsed.partition)) + "/"
        if any(ekey == head or ekey.startswith(prefix) for ekey in self.mutated):
            raise StorageDuplicateMutationError(
                f"this attempt already mutated {parsed.stream.value}/{parsed.partition}; "
                "it cannot also append to it"
            )
        if any(ekey == head or ekey.startswith(prefix) for ekey in self.reads):
            raise StorageUsageError(
                f"this attempt point-read {parsed.stream.value}/{parsed.partition}; "
                "an appending attempt may not depend on the stream it appends to"
            )
        limits = self.meter.limits
        meter = self.meter
        self.charge(lambda: measure_storage_append(parsed, limits).charge(meter))
        self.append = parsed
        self._stream_keys = (head, prefix)
        self.sealed = True
        return parsed

    @property
    def has_writes(self) -> bool:
        """True when the attempt staged any point mutation or an append."""
        return bool(self.mutated) or self.append is not None
