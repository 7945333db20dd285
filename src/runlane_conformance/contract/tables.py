"""The table catalogue: every table definition, by name, built once and explicitly here.

A table definition (``table_rules.StorageTable``) is the single place that says how a document's
``value`` determines its record key and its index entries; ``table_definitions`` defines core's tables
and ``stream_tables`` the tables of the ordered streams. This module lists them all, in one literal,
so nothing registers itself as a side effect of being imported: which tables exist is read here.
``NewStorageRecord`` and ``StoredRecord`` (``values``) check themselves against the definition found
here; the definitions never import those values, so the contract's modules import one way only.

The names of ``table_rules`` are re-exported, so ``StorageTable`` and ``StorageDocumentRuleError`` can
be imported from here as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .catalog import StorageTableName
from .stream_tables import STREAM_TABLES
from .table_definitions import CORE_TABLES
from .table_rules import StorageDocumentRuleError, StorageTable, iso, unsigned_integer

__all__ = [
    "StorageDocumentRuleError",
    "StorageTable",
    "get_storage_table",
    "iso",
    "storage_tables",
    "unsigned_integer",
]

#: Every table of the closed catalogue, by name: core's tables, then the streams' tables.
_TABLES: Mapping[StorageTableName, StorageTable] = MappingProxyType(
    {table.name: table for table in (*CORE_TABLES, *STREAM_TABLES)}
)
if set(_TABLES) != set(StorageTableName):  # pragma: no cover - a definition missing is a toolkit bug
    raise RuntimeError(f"tables without a definition: {sorted(set(StorageTableName) - set(_TABLES))}")


def get_storage_table(name: StorageTableName | str) -> StorageTable:
    """The definition for ``name``; every ``StorageTableName`` has one."""
    return _TABLES[StorageTableName(name)]


def storage_tables() -> Mapping[StorageTableName, StorageTable]:
    """All table definitions, keyed by name."""
    return dict(_TABLES)
