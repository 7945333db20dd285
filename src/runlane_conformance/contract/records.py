"""Write inputs at the JSON boundary: documents and new records.

``parse_new_storage_record`` is what a driver calls on whatever core hands
to ``create`` or ``replace``: an already built ``NewStorageRecord`` is reused
as it is (it validated itself when built and is immutable), while a plain
mapping is parsed and checked from scratch, however frozen it looks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .catalog import StorageTableName
from .errors import StorageCorruptionError, StorageValidationError
from .json_boundary import StorageDocument, parse_storage_document
from .tables import StorageTable, get_storage_table
from .values import NewStorageRecord, StorageIndexEntry, StorageRecordKey

__all__ = [
    "build_storage_record",
    "encode_storage_document",
    "parse_new_storage_record",
    "parse_storage_record_key",
]


def encode_storage_document(table: StorageTable | StorageTableName | str, value: object) -> StorageDocument:
    """Validate ``value`` with its table's codec and return the canonical immutable document."""
    definition = table if isinstance(table, StorageTable) else get_storage_table(table)
    document = StorageDocument(value)
    try:
        definition.check_document(document)
    except StorageCorruptionError as error:
        raise StorageValidationError(str(error)) from error
    return document


def build_storage_record(table: StorageTable | StorageTableName | str, value: object) -> NewStorageRecord:
    """A complete new record whose key and index entries are derived from ``value``."""
    definition = table if isinstance(table, StorageTable) else get_storage_table(table)
    document = encode_storage_document(definition, value)
    return NewStorageRecord(
        definition.key_for(document.value), document, definition.derive_indexes(document.value)
    )


def parse_storage_record_key(source: object) -> StorageRecordKey:
    """A key from ``{"table": ..., "id": [...]}`` or an existing ``StorageRecordKey``."""
    if isinstance(source, StorageRecordKey):
        return source
    if not isinstance(source, Mapping) or set(source) != {"table", "id"}:
        raise StorageValidationError("a record key is an object with exactly table and id")
    ident = source["id"]
    if not isinstance(ident, (list, tuple)):
        raise StorageValidationError("a record key id is an array of strings")
    return StorageRecordKey(source["table"], tuple(ident))


def _parse_index_entry(source: object) -> StorageIndexEntry:
    if isinstance(source, StorageIndexEntry):
        return source
    if not isinstance(source, Mapping) or set(source) != {"index", "partition", "sort"}:
        raise StorageValidationError("an index entry is an object with exactly index, partition and sort")
    return StorageIndexEntry(source["index"], source["partition"], source["sort"])


def parse_new_storage_record(source: object) -> NewStorageRecord:
    """Validate a write input and return an immutable ``NewStorageRecord``.

    Shape errors (not JSON, wrong envelope, unknown table or index) raise
    ``StorageValidationError``; a document whose key or index entries do not
    match it raises ``StorageCorruptionError``.
    """
    if isinstance(source, NewStorageRecord):
        return source
    if not isinstance(source, Mapping):
        raise StorageValidationError(f"a new record is a mapping, not {type(source).__name__}")
    extra = set(source) - {"key", "document", "indexes"}
    if extra or "key" not in source or "document" not in source:
        raise StorageValidationError("a new record has key, document and optional indexes only")
    raw_indexes: Any = source.get("indexes", [])
    if not isinstance(raw_indexes, (list, tuple)):
        raise StorageValidationError("record indexes is an array")
    return NewStorageRecord(
        parse_storage_record_key(source["key"]),
        parse_storage_document(source["document"]),
        tuple(_parse_index_entry(entry) for entry in raw_indexes),
    )
