"""The primitive values records are made of: a record key, a version, an index entry.

They sit below the table definitions (which build keys and index entries) and below the record values
(``values``), which check a whole record against its table: so the tables never import the values that
consult them, and the contract's modules import each other in one direction only. ``values``
re-exports every name here; import them from there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from .catalog import StorageIndexName, StorageTableName
from .encodings import storage_record_key_codec, storage_tuple_codec
from .errors import StorageValidationError

__all__ = [
    "StorageIndexEntry",
    "StorageRecordKey",
    "StorageRecordVersion",
    "have_equal_storage_record_keys",
    "index_tuple",
]


@dataclass(frozen=True, order=False)
class StorageRecordKey:
    """A logical record key: the table plus a non-empty tuple of id components."""

    table: StorageTableName
    """The logical table the record belongs to."""
    id: tuple[str, ...]
    """The id components, in order; each is a string the tuple codec can encode."""

    def __post_init__(self) -> None:
        try:
            table = StorageTableName(self.table)
        except ValueError as error:
            raise StorageValidationError(f"unknown table {self.table!r}") from error
        object.__setattr__(self, "table", table)
        if isinstance(self.id, str) or not isinstance(self.id, (tuple, list)) or not self.id:
            raise StorageValidationError("a record key id is a non-empty tuple of strings")
        ident = tuple(self.id)
        storage_tuple_codec.encode(ident)  # validates every component
        object.__setattr__(self, "id", ident)

    @cached_property
    def encoded(self) -> str:
        """The canonical encoding; its string order is the contract's key order (computed once)."""
        return storage_record_key_codec.encode(self)

    def __str__(self) -> str:
        return f"{self.table.value}:{'/'.join(self.id)}"


def have_equal_storage_record_keys(left: StorageRecordKey, right: StorageRecordKey) -> bool:
    """True when two validated keys name the same record, without encoding either."""
    return left.table == right.table and left.id == right.id


_VERSION = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True)
class StorageRecordVersion:
    """An opaque positive decimal the driver assigns when a mutation commits.

    Callers only compare versions for equality. A driver must never hand out
    the same version twice for one key, even after delete and re-create.
    """

    value: str
    """The decimal digits; compare it only for equality."""

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not _VERSION.fullmatch(self.value):
            raise StorageValidationError(f"a record version is a positive decimal string: {self.value!r}")

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class StorageIndexEntry:
    """One derived index entry: which index, which partition, and the encoded sort value."""

    index: StorageIndexName
    """The named index this entry belongs to."""
    partition: str
    """The partition within that index; scans never cross partitions."""
    sort: str
    """The encoded sort tuple; its string order is the scan order."""

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "index", StorageIndexName(self.index))
        except ValueError as error:
            raise StorageValidationError(f"unknown index {self.index!r}") from error
        if not isinstance(self.partition, str):
            raise StorageValidationError("an index partition is a string")
        if not storage_tuple_codec.is_valid(self.sort):
            raise StorageValidationError(f"index sort must be an encoded tuple: {self.sort!r}")

    @classmethod
    def of(cls, index: StorageIndexName, partition: str, *components: str) -> StorageIndexEntry:
        """Build an entry from raw sort components (encodes them)."""
        return cls(index, partition, storage_tuple_codec.encode(components))


def index_tuple(indexes: Sequence[StorageIndexEntry]) -> tuple[StorageIndexEntry, ...]:
    """``indexes`` as a tuple sorted by index name; refuses anything but entries, and two for one index."""
    entries = tuple(indexes)
    for entry in entries:
        if not isinstance(entry, StorageIndexEntry):
            raise StorageValidationError(f"{entry!r} is not a StorageIndexEntry")
    names = [entry.index for entry in entries]
    if len(set(names)) != len(names):
        raise StorageValidationError("a record has at most one entry per index")
    return tuple(sorted(entries, key=lambda entry: entry.index.value))
