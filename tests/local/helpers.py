"""Record builders shared by the reference driver's tests (lease records throughout)."""

from __future__ import annotations

from datetime import UTC, datetime

from runlane_conformance.contract.catalog import StorageIndexName, StorageQueryDirection
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageQueryRange,
    StorageRecordKey,
)
from runlane_conformance.local import LocalStorageDriver

FIXED = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def lease(
    name: str,
    *,
    holder: str | None = "worker",
    expires: str = "2024-01-01T00:00:00.000000Z",
    environment: str = "env",
) -> NewStorageRecord:
    """A lease record; a held lease is indexed by expiry in its environment, a released one is not."""
    return build_storage_record(
        "leases", {"environment": environment, "name": name, "holder": holder, "expiresAt": expires}
    )


def lease_key(name: str, environment: str = "env") -> StorageRecordKey:
    return StorageRecordKey("leases", (environment, name))


def expiry(minute: int) -> str:
    """A distinct, ordered expiry per minute."""
    return f"2024-01-01T00:{minute:02d}:00.000000Z"


def by_expiry(
    limit: int = 10,
    *,
    environment: str = "env",
    query_range: StorageQueryRange | None = None,
    direction: StorageQueryDirection = StorageQueryDirection.ASCENDING,
    cursor: str | None = None,
) -> QueryRecordsCommand:
    """A LeasesByExpiry scan of one environment."""
    return QueryRecordsCommand(
        StorageIndexName.LEASES_BY_EXPIRY,
        environment,
        limit,
        query_range or StorageQueryRange(),
        direction,
        cursor,
    )


def names(result: object) -> list[str]:
    """The lease names of a query page, in page order."""
    return [item.key.id[1] for item in result.items]  # type: ignore[attr-defined]


def seed(driver: LocalStorageDriver, *records: NewStorageRecord) -> None:
    """Commit ``records`` in one transaction."""

    def work(tx: StorageTransaction) -> None:
        for record in records:
            tx.create(record)

    driver.transaction(work)
