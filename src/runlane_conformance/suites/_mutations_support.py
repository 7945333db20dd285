"""Small helpers the mutations, sealing, json_boundary, limits and profile suites share.

They only combine public driver calls (one transaction per helper), so a
failure inside one always points at the driver, never at hidden test logic.
Writes are split into batches that respect the driver's advertised limits,
so a driver with small limits can still be set up for a check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageLimits,
    StorageRecordKey,
    StoredRecord,
)

__all__ = [
    "batches",
    "create_all",
    "query_candidates_pairs",
    "query_pairs",
    "read",
    "read_one",
]


def batches(records: Sequence[NewStorageRecord], limits: StorageLimits) -> list[list[NewStorageRecord]]:
    """Split ``records`` into groups one transaction may write under ``limits``."""
    groups: list[list[NewStorageRecord]] = []
    current: list[NewStorageRecord] = []
    size = 0
    for record in records:
        grows = record.document.size
        if current and (
            len(current) + 1 > limits.max_transaction_records or size + grows > limits.max_transaction_bytes
        ):
            groups.append(current)
            current, size = [], 0
        current.append(record)
        size += grows
    if current:
        groups.append(current)
    return groups


def create_all(driver: StorageDriver, records: Sequence[NewStorageRecord]) -> None:
    """Create every record (blind creates), in as few limit-respecting transactions as needed."""
    for group in batches(records, driver.profile.limits):

        def create(tx: StorageTransaction, group: list[NewStorageRecord] = group) -> None:
            for record in group:
                tx.create(record)

        driver.transaction(create)


def read(driver: StorageDriver, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
    """Point-read ``keys`` in fresh transactions, batched under the advertised limits."""
    limits = driver.profile.limits
    step = max(1, min(limits.max_point_reads, limits.max_transaction_records))
    results: list[StoredRecord | None] = []
    for start in range(0, len(keys), step):
        chunk = list(keys[start : start + step])
        results.extend(driver.transaction(lambda tx, chunk=chunk: tx.get(chunk)))  # type: ignore[misc]
    return results


def read_one(driver: StorageDriver, key: StorageRecordKey) -> StoredRecord | None:
    """The committed record at ``key`` (None when absent)."""
    (record,) = read(driver, [key])
    return record


def within_page_limit(driver: StorageDriver, command: QueryRecordsCommand) -> QueryRecordsCommand:
    """``command`` asking for no larger a page than ``driver`` advertises (its other fields kept)."""
    limit = driver.profile.limits.max_query_results
    return command if command.limit <= limit else dataclasses.replace(command, limit=limit)


def query_pairs(driver: StorageDriver, command: QueryRecordsCommand) -> list[tuple[StorageRecordKey, str]]:
    """Every (key, sort) of an index scan through ``driver.query``, following cursors to the end."""
    command = within_page_limit(driver, command)
    found: list[tuple[StorageRecordKey, str]] = []
    cursor: str | None = None
    while True:
        page = driver.query(command.with_cursor(cursor))
        found.extend((item.key, item.sort) for item in page.items)
        if page.cursor is None or not page.items:
            return found
        cursor = page.cursor


def query_candidates_pairs(
    driver: StorageDriver, command: QueryRecordsCommand
) -> list[tuple[StorageRecordKey, str]]:
    """Every (key, sort) of an index scan through ``query_candidates`` in fresh transactions."""
    command = within_page_limit(driver, command)
    found: list[tuple[StorageRecordKey, str]] = []
    cursor: str | None = None
    while True:
        page = driver.transaction(
            lambda tx, cursor=cursor: tx.query_candidates(command.with_cursor(cursor))  # type: ignore[misc]
        )
        found.extend((item.key, item.sort) for item in page.items)
        if page.cursor is None or not page.items:
            return found
        cursor = page.cursor
