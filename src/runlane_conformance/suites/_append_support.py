"""Builders and readers for the append suite: observation batches, the point-writer path, stream reads.

The point writer here is what core does on a driver without native append:
read the head, ask ``read_storage_stream_position`` where the batch starts,
and create the records and the head that ``materialize_storage_append``
describes. Native and point appends must leave identical durable state, so
checks read streams back only through the canonical layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract.cursors import parse_query_records_result
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.streams import (
    AppendRecordsCommand,
    MaterializedStorageAppend,
    StorageStreamName,
    materialize_storage_append,
    read_storage_stream_position,
    storage_stream_layouts,
)
from ..contract.values import (
    QueryRecordsCommand,
    StorageRecordKey,
    StoredRecord,
)
from ..fixtures.convergence import settle_indexes

# The append work the limit gates measure too lives with them (fixtures.limit_plans); re-exported.
from ..fixtures.limit_plans import append_byte_plan, batch, observation_values

__all__ = [
    "LAYOUT",
    "OBSERVATIONS",
    "StreamView",
    "append_byte_plan",
    "batch",
    "observation_values",
    "point_append",
    "read_stream",
    "stage_point_append",
]

OBSERVATIONS = StorageStreamName.OBSERVATIONS
LAYOUT = storage_stream_layouts[OBSERVATIONS]


def point_append(tx: StorageTransaction, command: AppendRecordsCommand) -> MaterializedStorageAppend:
    """Append ``command`` the way core does without native append: head read plus conditional writes."""
    (head,) = tx.get([LAYOUT.head_key(command.partition)])
    return stage_point_append(tx, command, head)


def stage_point_append(
    tx: StorageTransaction, command: AppendRecordsCommand, head: StoredRecord | None
) -> MaterializedStorageAppend:
    """``point_append`` for an attempt that already read ``head`` (in a call with its other reads)."""
    start = read_storage_stream_position(OBSERVATIONS, command.partition, head)
    placed = materialize_storage_append(command, start)
    for record in placed.records:
        tx.create(record)
    if head is None:
        tx.create(placed.head)
    else:
        tx.replace(head, placed.head)
    return placed


@dataclass(frozen=True)
class StreamView:
    """A partition as committed: its head (None when absent) and its records in position order."""

    partition: str
    head: StoredRecord | None
    records: tuple[StoredRecord, ...]

    @property
    def next_position(self) -> int:
        return read_storage_stream_position(OBSERVATIONS, self.partition, self.head)

    @property
    def positions(self) -> list[int]:
        return [int(str(record.document.value[LAYOUT.position_field])) for record in self.records]

    @property
    def sources(self) -> list[str]:
        found = []
        for record in self.records:
            value: Any = record.document.to_json()["value"]
            found.append(str(value["source"]["id"]))
        return found


def _get(driver: StorageDriver, keys: list[StorageRecordKey]) -> list[StoredRecord | None]:
    return driver.transaction(lambda tx: tx.get(keys))


def read_stream(driver: StorageDriver, partition: str) -> StreamView:
    """Every record of the partition's ``ObservationsByPosition`` index, point-read, plus the head.

    Callers read a stream after they stopped writing to it, so an eventual
    index is first allowed to catch up (``settle_indexes``; nothing to wait
    for on strong drivers).
    """
    settle_indexes(driver)
    limits = driver.profile.limits
    page_size = min(limits.max_query_results, 50)
    command = QueryRecordsCommand(LAYOUT.index, partition, page_size)
    keys: list[StorageRecordKey] = []
    current = command
    while True:
        page = parse_query_records_result(current, driver.query(current))
        keys.extend(item.key for item in page.items)
        if page.cursor is None:
            break
        current = command.with_cursor(page.cursor)
    chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records) - 1)
    records: list[StoredRecord] = []
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        found = _get(driver, part)
        missing = [key for key, record in zip(part, found, strict=True) if record is None]
        assert not missing, f"index entries without records: {missing}"
        records.extend(record for record in found if record is not None)
    (head,) = driver.transaction(lambda tx: tx.get([LAYOUT.head_key(partition)]))
    return StreamView(partition, head, tuple(records))
