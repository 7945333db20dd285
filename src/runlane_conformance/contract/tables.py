"""Table definitions: the key layout, document schema and derived indexes of each collection.

A table definition is the single place that says how a document's ``value``
determines its record key and its index entries. JSON Schema (draft 2020-12)
checks the shape; ``check_identity`` checks what a schema cannot (tokens that
must be derived from other fields, ownership that must match the key ...).
``check_record`` combines both and raises ``StorageCorruptionError`` when the
document, the key and the index entries disagree, because such a record can
only come from a bug or from damaged storage.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from jsonschema import Draft202012Validator, FormatChecker

from .catalog import StorageIndexName, StorageTableName
from .encodings import iso_date_codec
from .errors import StorageCorruptionError
from .json_boundary import FrozenJsonObject, StorageDocument, thaw_json
from .values import StorageIndexEntry, StorageRecordKey

__all__ = [
    "StorageTable",
    "get_storage_table",
    "register_storage_table",
    "storage_tables",
]


class StorageTable(ABC):
    """How one collection's documents map to keys and index entries."""

    name: ClassVar[StorageTableName]
    schema: ClassVar[Mapping[str, Any]]
    indexes: ClassVar[tuple[StorageIndexName, ...]] = ()
    _validator: ClassVar[Draft202012Validator]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "schema" in cls.__dict__:
            Draft202012Validator.check_schema(cls.schema)
            cls._validator = Draft202012Validator(cls.schema, format_checker=FormatChecker())

    @abstractmethod
    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        """The record key id this document must be stored under."""

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        """Every index entry this document must have (none by default)."""
        return ()

    def check_identity(self, value: FrozenJsonObject) -> None:
        """Identity rules a JSON Schema cannot express; raise ``StorageCorruptionError``."""
        return None

    def check_value(self, value: FrozenJsonObject) -> None:
        """Schema plus identity checks for a document value of this table."""
        errors = sorted(self._validator.iter_errors(thaw_json(value)), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            where = "/".join(str(part) for part in first.absolute_path) or "(root)"
            raise StorageCorruptionError(f"{self.name.value} document invalid at {where}: {first.message}")
        self.check_identity(value)

    def key_for(self, value: FrozenJsonObject) -> StorageRecordKey:
        return StorageRecordKey(self.name, self.key_id(value))

    def check_record(
        self, key: StorageRecordKey, document: StorageDocument, indexes: Sequence[StorageIndexEntry]
    ) -> None:
        """Raise ``StorageCorruptionError`` unless document, key and indexes agree."""
        if key.table is not self.name:
            raise StorageCorruptionError(f"key table {key.table.value} is not {self.name.value}")
        self.check_value(document.value)
        expected_key = self.key_for(document.value)
        if expected_key != key:
            raise StorageCorruptionError(
                f"key {key} does not match the document, which belongs at {expected_key}"
            )
        expected = sorted(self.derive_indexes(document.value), key=lambda entry: entry.index.value)
        actual = sorted(indexes, key=lambda entry: entry.index.value)
        if expected != actual:
            raise StorageCorruptionError(
                f"index entries of {key} do not match its document: expected "
                f"{[(e.index.value, e.partition, e.sort) for e in expected]}, got "
                f"{[(e.index.value, e.partition, e.sort) for e in actual]}"
            )


_TABLES: dict[StorageTableName, StorageTable] = {}


def register_storage_table(table: StorageTable) -> StorageTable:
    """Add a table definition to the closed catalog (used by the definitions module)."""
    _TABLES[table.name] = table
    return table


def get_storage_table(name: StorageTableName | str) -> StorageTable:
    """The definition for ``name``; every ``StorageTableName`` has one."""
    from . import table_definitions  # noqa: F401  (registers every table on first use)

    return _TABLES[StorageTableName(name)]


def storage_tables() -> Mapping[StorageTableName, StorageTable]:
    """All table definitions, keyed by name."""
    from . import table_definitions  # noqa: F401

    return dict(_TABLES)


def iso(value: FrozenJsonObject, field: str) -> str:
    """Read a field that the schema guarantees is a canonical iso date string."""
    text = value[field]
    if not isinstance(text, str) or not iso_date_codec.is_valid(text):
        raise StorageCorruptionError(f"{field} is not a canonical iso date")
    return text
