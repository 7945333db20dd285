"""The value types that cross the driver boundary.

All of them are frozen and validate themselves when built, so an instance
is proof of validity: a driver that receives a ``NewStorageRecord`` does not
need to check it again, and a caller cannot change one after handing it over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .catalog import StorageIndexName, StorageQueryDirection
from .encodings import storage_tuple_codec
from .errors import StorageProfileError, StorageValidationError
from .json_boundary import StorageDocument
from .keys import (
    StorageIndexEntry,
    StorageRecordKey,
    StorageRecordVersion,
    have_equal_storage_record_keys,
    index_tuple,
)
from .tables import get_storage_table

__all__ = [
    "NewStorageRecord",
    "QueryRecordsCommand",
    "QueryRecordsResult",
    "StorageClockAuthority",
    "StorageDurability",
    "StorageIndexConsistency",
    "StorageIndexEntry",
    "StorageIndexReference",
    "StorageLimits",
    "StorageProfile",
    "StorageQueryRange",
    "StorageRangeBound",
    "StorageRecordKey",
    "StorageRecordVersion",
    "StoredRecord",
    "have_equal_storage_record_keys",
]


@dataclass(frozen=True)
class NewStorageRecord:
    """A record to write: key, document and *all* its index entries.

    Construction runs the table definition's checks, so an instance always
    has a document, key and index entries that agree; disagreement raises
    ``StorageCorruptionError``.
    """

    key: StorageRecordKey
    """Where the record is written."""
    document: StorageDocument
    """The immutable document to store."""
    indexes: tuple[StorageIndexEntry, ...] = ()
    """Every index entry of the record, at most one per index, sorted by index name."""

    def __post_init__(self) -> None:
        if not isinstance(self.key, StorageRecordKey):
            raise StorageValidationError("record key must be a StorageRecordKey")
        if not isinstance(self.document, StorageDocument):
            raise StorageValidationError("record document must be a StorageDocument")
        object.__setattr__(self, "indexes", index_tuple(self.indexes))
        get_storage_table(self.key.table).check_record(self.key, self.document, self.indexes)


@dataclass(frozen=True)
class StoredRecord:
    """A committed record as a read returns it, with the version that fences later writes."""

    key: StorageRecordKey
    """Where the record is stored."""
    version: StorageRecordVersion
    """The version its last committed write was given; replace and delete must present it."""
    document: StorageDocument
    """The committed document (immutable, so callers cannot change the driver's state)."""
    indexes: tuple[StorageIndexEntry, ...] = ()
    """Every index entry the record has, at most one per index, sorted by index name."""

    def __post_init__(self) -> None:
        if not isinstance(self.key, StorageRecordKey):
            raise StorageValidationError("record key must be a StorageRecordKey")
        if not isinstance(self.version, StorageRecordVersion):
            raise StorageValidationError("record version must be a StorageRecordVersion")
        if not isinstance(self.document, StorageDocument):
            raise StorageValidationError("record document must be a StorageDocument")
        object.__setattr__(self, "indexes", index_tuple(self.indexes))
        get_storage_table(self.key.table).check_record(self.key, self.document, self.indexes)

    @classmethod
    def committed(cls, record: NewStorageRecord, version: StorageRecordVersion) -> StoredRecord:
        """The stored form of an already validated write; skips re-checking the table rules."""
        stored = object.__new__(cls)
        # One dict update instead of four frozen-attribute writes: this runs for every committed write.
        stored.__dict__.update(
            key=record.key, version=version, document=record.document, indexes=record.indexes
        )
        return stored

    def as_new(self) -> NewStorageRecord:
        """The same content as a write input (for re-creating or comparing)."""
        return NewStorageRecord(self.key, self.document, self.indexes)


@dataclass(frozen=True)
class StorageRangeBound:
    """One end of an index range over encoded sort values."""

    value: str
    """The encoded sort value at this end of the range."""
    inclusive: bool = True
    """Whether an entry sorting exactly at ``value`` is inside the range."""

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise StorageValidationError("a range bound is an encoded string")


@dataclass(frozen=True)
class StorageQueryRange:
    """Lower and upper bounds over the encoded sort value; ``None`` is an open end."""

    lower: StorageRangeBound | None = None
    """The low end (``None``: from the first entry)."""
    upper: StorageRangeBound | None = None
    """The high end (``None``: to the last entry)."""

    def contains(self, sort: str) -> bool:
        """True when the encoded sort value ``sort`` lies inside both bounds."""
        if self.lower is not None and (
            sort < self.lower.value or (sort == self.lower.value and not self.lower.inclusive)
        ):
            return False
        return not (
            self.upper is not None
            and (sort > self.upper.value or (sort == self.upper.value and not self.upper.inclusive))
        )

    @classmethod
    def prefix(cls, components: Sequence[str]) -> StorageQueryRange:
        """Every sort value whose tuple starts with ``components``."""
        from .encodings import encode_storage_tuple_prefix_upper_bound

        return cls(
            StorageRangeBound(storage_tuple_codec.encode(components), True),
            StorageRangeBound(encode_storage_tuple_prefix_upper_bound(components), False),
        )


@dataclass(frozen=True)
class QueryRecordsCommand:
    """An index scan: one index, one partition, a range, a direction and a page size."""

    index: StorageIndexName
    """The named index to scan."""
    partition: str
    """The one partition to scan."""
    limit: int
    """The most references one page may hold (at least 1)."""
    range: StorageQueryRange = field(default_factory=StorageQueryRange)
    """Which sort values are included; the whole partition by default."""
    direction: StorageQueryDirection = StorageQueryDirection.ASCENDING
    """Ascending or descending by (encoded sort, encoded key)."""
    cursor: str | None = None
    """Where the previous page of this same scope ended (``None``: from the start)."""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "index", StorageIndexName(self.index))
        except ValueError as error:
            raise StorageValidationError(f"{self.index!r} is not in the index catalog") from error
        object.__setattr__(self, "direction", StorageQueryDirection(self.direction))
        if not isinstance(self.partition, str):
            raise StorageValidationError("a query partition is a string")
        if type(self.limit) is not int or self.limit < 1:
            raise StorageValidationError("a query limit is a positive integer")
        if self.cursor is not None and not isinstance(self.cursor, str):
            raise StorageValidationError("a cursor is a string")

    def with_cursor(self, cursor: str | None) -> QueryRecordsCommand:
        """The same scope continued from ``cursor``."""
        from dataclasses import replace

        return replace(self, cursor=cursor)


@dataclass(frozen=True)
class StorageIndexReference:
    """One query result: only the record key and its encoded sort value."""

    key: StorageRecordKey
    """The key of the record the entry belongs to; point-read it to see the record."""
    sort: str
    """The entry's encoded sort value."""


@dataclass(frozen=True)
class QueryRecordsResult:
    """A page of index references in contract order, with a continuation if more may follow."""

    items: tuple[StorageIndexReference, ...]
    """The page, in contract order."""
    cursor: str | None = None
    """A continuation when more entries may follow, or ``None`` when the scan is complete."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))


class StorageDurability(StrEnum):
    """Whether committed data outlives the process (``durable``) or not (``process``)."""

    PROCESS = "process"
    """Committed data lives as long as the process holding the store."""
    DURABLE = "durable"
    """Committed data survives reconnects and a killed process."""


class StorageClockAuthority(StrEnum):
    """Where ``now()`` comes from and how strongly it is ordered with the read set."""

    CLIENT = "client"
    """``now()`` comes from the clock the harness injects into ``connect``."""
    SERVER_SAMPLED = "server_sampled"
    """``now()`` is sampled from the store's clock, with no ordering promise about the reads."""
    TRANSACTION_AUTHORITATIVE = "transaction_authoritative"
    """``now()`` is the store's time, ordered after every commit the attempt read."""


class StorageIndexConsistency(StrEnum):
    """Whether a committed record is queryable at once (``strong``) or later (``eventual``)."""

    STRONG = "strong"
    """A committed record is found by every scan that starts after its commit."""
    EVENTUAL = "eventual"
    """Scans may trail commits for a while."""


@dataclass(frozen=True)
class StorageLimits:
    """The sizes a driver promises to accept, and to refuse one unit past.

    The values must work together: one maximal record must fit in a
    transaction, and a maximal transaction must be reachable with at most
    ``max_transaction_records`` maximal records. Incoherent limits raise
    ``StorageProfileError`` naming the broken rule.
    """

    max_point_reads: int = 100
    """The most key positions one attempt may pass to ``get`` in all, duplicates included."""
    max_query_results: int = 100
    """The largest page ``limit`` a query may ask for."""
    max_transaction_records: int = 100
    """The most distinct keys one attempt may read or write (appended records and the stream head count)."""
    max_record_bytes: int = 400 * 1024
    """The largest encoded record one write may carry."""
    max_transaction_bytes: int = 4 * 1024 * 1024
    """The most document bytes one attempt may write in all; deletes and reads add none."""

    def __post_init__(self) -> None:
        for name in (
            "max_point_reads",
            "max_query_results",
            "max_transaction_records",
            "max_record_bytes",
            "max_transaction_bytes",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise StorageProfileError(f"{name} must be a positive integer, got {value!r}")
        if self.max_transaction_bytes < self.max_record_bytes:
            raise StorageProfileError(
                f"max_transaction_bytes ({self.max_transaction_bytes}) is smaller than "
                f"max_record_bytes ({self.max_record_bytes}): a maximal record could never commit"
            )
        reachable = self.max_transaction_records * self.max_record_bytes
        if self.max_transaction_bytes > reachable:
            raise StorageProfileError(
                f"max_transaction_bytes ({self.max_transaction_bytes}) cannot be reached with "
                f"{self.max_transaction_records} records of at most {self.max_record_bytes} bytes "
                f"({reachable} bytes)"
            )


@dataclass(frozen=True)
class StorageProfile:
    """What a driver truthfully says about its mechanics; suites gate on it and verify it."""

    durability: StorageDurability = StorageDurability.PROCESS
    """How long committed data lives."""
    clock_authority: StorageClockAuthority = StorageClockAuthority.CLIENT
    """Where ``now()`` comes from."""
    index_consistency: StorageIndexConsistency = StorageIndexConsistency.STRONG
    """Whether scans see a commit at once."""
    limits: StorageLimits = field(default_factory=StorageLimits)
    """The sizes the driver accepts, each verified at its exact boundary."""
    exclusive_candidates: bool = False
    """Whether ``query_candidates`` offers exclusive mode (its suite runs only then)."""
    append: bool = False
    """Whether ``append`` is offered (its suite runs only then)."""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "durability", StorageDurability(self.durability))
            object.__setattr__(self, "clock_authority", StorageClockAuthority(self.clock_authority))
            object.__setattr__(self, "index_consistency", StorageIndexConsistency(self.index_consistency))
        except ValueError as error:
            raise StorageProfileError(str(error)) from error
        if not isinstance(self.limits, StorageLimits):
            raise StorageProfileError("profile limits must be StorageLimits")
        if not isinstance(self.exclusive_candidates, bool) or not isinstance(self.append, bool):
            raise StorageProfileError("capability flags are booleans")

    def capabilities(self) -> tuple[str, ...]:
        """Names of the optional capabilities this profile offers."""
        offered = []
        if self.append:
            offered.append("append")
        if self.exclusive_candidates:
            offered.append("exclusive_candidates")
        return tuple(offered)
