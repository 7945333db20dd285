"""Shared measurement of transaction size against the advertised limits.

Every driver must count the same things, or "accepted at N, rejected at
N+1" would mean different work on different drivers. The rules:

* point reads: every key position passed to ``get`` in one attempt, duplicates included;
* query results: a command's ``limit`` may not exceed ``max_query_results``;
* record bytes: the UTF-8 size of a written document's canonical text;
* transaction records: distinct keys the attempt depends on or writes
  (point reads, mutations, appended records and the stream head);
* transaction bytes: the sum of written document sizes (creates, replacements,
  appended records and the head); deletes and reads add no bytes.

A ``StorageTransactionMeter`` raises the limit error the moment work grows
past a limit, before anything is committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter

from .errors import StorageLimitName, create_storage_limit_error
from .values import NewStorageRecord, QueryRecordsCommand, StorageLimits, StorageRecordKey

__all__ = ["StorageTransactionMeter", "check_storage_record_size", "measure_storage_record"]

_ENCODED = attrgetter("encoded")


def measure_storage_record(record: NewStorageRecord) -> int:
    """The size a record counts for against record and transaction byte limits."""
    return record.document.size


def check_storage_record_size(record: NewStorageRecord, limits: StorageLimits) -> int:
    """Raise the limit error if one record is too large; return its size."""
    size = measure_storage_record(record)
    if size > limits.max_record_bytes:
        raise create_storage_limit_error(StorageLimitName.RECORD_BYTES, limits.max_record_bytes, size)
    return size


class StorageTransactionMeter:
    """Running totals for one attempt; each ``add_*`` raises once a limit is exceeded."""

    def __init__(self, limits: StorageLimits) -> None:
        self.limits = limits
        self.point_reads = 0
        self.keys: set[str] = set()
        self.bytes = 0

    def _touch(self, encoded_keys: Iterable[str]) -> None:
        keys = self.keys
        keys.update(encoded_keys)
        if len(keys) > self.limits.max_transaction_records:
            raise create_storage_limit_error(
                StorageLimitName.TRANSACTION_RECORDS, self.limits.max_transaction_records, len(keys)
            )

    def _add_bytes(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.limits.max_transaction_bytes:
            raise create_storage_limit_error(
                StorageLimitName.TRANSACTION_BYTES, self.limits.max_transaction_bytes, self.bytes
            )

    # The add_* methods run on every read and write of every attempt, so they are written
    # flat (no helper calls on the path that stays within the limits).

    def add_point_reads(self, keys: Sequence[StorageRecordKey]) -> None:
        """Count one ``get`` call's key positions; raise the point-reads or records limit error past it."""
        total = self.point_reads + len(keys)
        if total > self.limits.max_point_reads:
            raise create_storage_limit_error(StorageLimitName.POINT_READS, self.limits.max_point_reads, total)
        self.point_reads = total
        self._touch(map(_ENCODED, keys))

    def check_query(self, command: QueryRecordsCommand) -> None:
        """Refuse a query whose page ``limit`` is larger than ``max_query_results``."""
        if command.limit > self.limits.max_query_results:
            raise create_storage_limit_error(
                StorageLimitName.QUERY_RESULTS, self.limits.max_query_results, command.limit
            )

    def add_write(self, key: StorageRecordKey, record: NewStorageRecord | None) -> None:
        """Count a create/replace (``record`` given) or a delete (``record`` None)."""
        self.add_encoded_write(key.encoded, record)

    def add_encoded_write(self, encoded_key: str, record: NewStorageRecord | None) -> None:
        """``add_write`` for a key the caller has already encoded (saves encoding it again)."""
        limits = self.limits
        size = 0 if record is None else check_storage_record_size(record, limits)
        keys = self.keys
        keys.add(encoded_key)
        if len(keys) > limits.max_transaction_records:
            raise create_storage_limit_error(
                StorageLimitName.TRANSACTION_RECORDS, limits.max_transaction_records, len(keys)
            )
        total = self.bytes + size
        self.bytes = total
        if total > limits.max_transaction_bytes:
            raise create_storage_limit_error(
                StorageLimitName.TRANSACTION_BYTES, limits.max_transaction_bytes, total
            )

    def add_appended(self, encoded_keys: Sequence[str], sizes: Sequence[int]) -> None:
        """Count an append batch: its records and head, with their widest possible sizes."""
        for size in sizes:
            if size > self.limits.max_record_bytes:
                raise create_storage_limit_error(
                    StorageLimitName.RECORD_BYTES, self.limits.max_record_bytes, size
                )
        self._touch(encoded_keys)
        self._add_bytes(sum(sizes))
