"""Small builders shared by the contract tests."""

from __future__ import annotations

from runlane_conformance import NewStorageRecord, StorageDocument, build_storage_record

EXPIRES_AT = "2024-01-01T00:00:00.000000Z"


def lease_value(
    name: str = "lease-1", *, environment: str = "env-a", holder: str | None = "worker-1"
) -> dict[str, object]:
    return {"environment": environment, "name": name, "holder": holder, "expiresAt": EXPIRES_AT}


def lease_record(
    name: str = "lease-1", *, environment: str = "env-a", holder: str | None = "worker-1"
) -> NewStorageRecord:
    """A valid held lease (one LeasesByExpiry entry); its size grows by one byte per ASCII name character."""
    return build_storage_record("leases", lease_value(name, environment=environment, holder=holder))


def lease_record_of_size(size: int, *, prefix: str = "l") -> NewStorageRecord:
    """A held lease whose document is exactly ``size`` UTF-8 bytes (names are ASCII, so 1 char = 1 byte)."""
    base = StorageDocument(lease_value(prefix)).size
    if size < base:
        raise ValueError(f"the smallest lease with prefix {prefix!r} is {base} bytes")
    record = lease_record(prefix + "x" * (size - base))
    assert record.document.size == size
    return record
