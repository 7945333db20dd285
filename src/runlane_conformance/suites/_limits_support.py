"""Planning work of an exact size from a driver's advertised limits.

The limit checks must build "exactly N" and "N + 1" of one measure while
staying inside every other advertised limit, whatever the driver advertises.
These helpers do that arithmetic once, and say plainly when a combination of
limits makes a size unreachable, so a check can skip with that reason
instead of tripping over the wrong limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract.values import NewStorageRecord, StorageLimits, StorageRecordKey
from ..fixtures.records import Leases

__all__ = [
    "PRACTICAL_BYTES",
    "PRACTICAL_COUNT",
    "KeyPlan",
    "lease_floor",
    "plan_distinct_keys",
    "sized_leases",
    "split_sizes",
]

#: Beyond this many records or reads a check would take minutes on a real store; it skips instead.
PRACTICAL_COUNT = 100_000
#: Beyond this many bytes in one transaction a check would mostly measure memory; it skips instead.
PRACTICAL_BYTES = 64 * 1024 * 1024

#: Every planned record name has this length, so every planned lease has the same smallest size.
_NAME_WIDTH = 8


def _name(prefix: str, index: int) -> str:
    return f"{prefix}{index:0{_NAME_WIDTH - len(prefix)}d}"


def lease_floor(leases: Leases, prefix: str = "k") -> int:
    """The byte size of the smallest lease document a planned name can have."""
    return leases.record(_name(prefix, 0), holder="").document.size


def split_sizes(total: int, lowest: int, highest: int, max_count: int) -> list[int] | None:
    """As few sizes as possible, each in [lowest, highest], summing to ``total``; None if impossible."""
    if total < lowest or highest < lowest:
        return None
    count = max(1, -(-total // highest))
    if count > max_count or count * lowest > total:
        return None
    base, extra = divmod(total, count)
    return [base + 1] * extra + [base] * (count - extra)


def sized_leases(leases: Leases, sizes: list[int], prefix: str = "b") -> list[NewStorageRecord]:
    """One lease per size, each document exactly that many bytes, with distinct equal-length names."""
    return [leases.sized(_name(prefix, i), size) for i, size in enumerate(sizes)]


@dataclass(frozen=True)
class KeyPlan:
    """Work that touches a given number of distinct keys: absent-key reads plus small creates."""

    reads: tuple[StorageRecordKey, ...]
    creates: tuple[NewStorageRecord, ...]

    @property
    def distinct_keys(self) -> int:
        return len(self.reads) + len(self.creates)


def plan_distinct_keys(leases: Leases, count: int, limits: StorageLimits) -> KeyPlan | None:
    """Touch exactly ``count`` distinct keys without exceeding point-read or byte limits.

    Creates of the smallest lease are preferred (they are what a transaction
    record limit is mostly about); when the byte limit cannot hold that many,
    reads of absent keys make up the rest. None when no mix fits.
    """
    floor = lease_floor(leases, "c")
    creates = min(count, limits.max_transaction_bytes // floor)
    reads = count - creates
    if reads > limits.max_point_reads:
        return None
    return KeyPlan(
        tuple(leases.key(_name("r", i)) for i in range(reads)),
        tuple(leases.record(_name("c", i), holder="") for i in range(creates)),
    )
