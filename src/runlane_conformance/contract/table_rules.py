"""What a table definition is: the key layout, document schema and derived indexes of a collection.

The definitions themselves are in ``table_definitions`` and ``stream_tables``; the catalogue of them,
built once and explicitly, is ``tables`` (``get_storage_table``).

A table definition is the single place that says how a document's ``value``
determines its record key and its index entries. JSON Schema (draft 2020-12)
checks the shape; ``check_identity`` checks what a schema cannot (tokens that
must be derived from other fields, ownership that must match the key ...).
``check_record`` combines both and raises ``StorageCorruptionError`` when the
document, the key and the index entries disagree, because such a record can
only come from a bug or from damaged storage.

Every such failure is a ``StorageDocumentRuleError`` (a ``StorageCorruptionError``)
that names the table and the rule it broke, so tests and golden vectors can
prove *which* rule rejected a record without reading messages.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from jsonschema import Draft202012Validator, FormatChecker

from .catalog import StorageIndexName, StorageTableName
from .encodings import iso_date_codec, storage_unsigned_integer_codec
from .errors import StorageCorruptionError, StorageValidationError
from .json_boundary import FrozenJsonObject, StorageDocument, thaw_json
from .keys import StorageIndexEntry, StorageRecordKey

__all__ = [
    "StorageDocumentRuleError",
    "StorageTable",
    "iso",
    "unsigned_integer",
]


class StorageDocumentRuleError(StorageCorruptionError):
    """Corruption attributed to one named rule of one table.

    ``rule`` is a stable kebab-case name: ``schema``, ``table``, ``key``,
    ``indexes``, ``ownership`` and ``timestamp`` are shared by every table;
    identity rules add their own (``step-token``, ``outbox-claim`` ...).
    ``table`` is ``None`` when a helper cannot know the table.
    """

    def __init__(self, message: str, *, table: StorageTableName | None, rule: str) -> None:
        super().__init__(message)
        self.table = table
        self.rule = rule


class StorageTable(ABC):
    """How one collection's documents map to keys and index entries."""

    name: ClassVar[StorageTableName]
    """The table's name, also the first part of every key in it."""
    schema: ClassVar[Mapping[str, Any]]
    """The JSON Schema every document of this table must satisfy."""
    indexes: ClassVar[tuple[StorageIndexName, ...]] = ()
    """The named indexes a document of this table may have entries in."""
    #: Document fields whose values must equal the leading key components, in order
    #: (e.g. ``("environment", "runId")``); checked by ``check_record`` as rule ``ownership``.
    owner_fields: ClassVar[tuple[str, ...]] = ()
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
            raise StorageDocumentRuleError(
                f"{self.name.value} document invalid at {where}: {first.message}",
                table=self.name,
                rule="schema",
            )
        self.check_identity(value)

    def check_document(self, document: StorageDocument) -> None:
        """``check_value`` on a document's value, once per document object.

        A document is immutable, and building a record checks its document a second time
        (``build_storage_record`` checks the value, then ``NewStorageRecord`` checks the whole
        record); skipping the repeat saves about 8% of a quick certification's CPU. The memo holds
        the document objects themselves, so an entry can only ever match the very object that
        passed, never another one with a recycled ``id``.
        """
        marker = id(document)
        with _CHECKED_LOCK:
            seen = _CHECKED.get(marker)
            if seen is not None and seen[0] is document and seen[1] is self.name:
                _CHECKED.move_to_end(marker)
                return
        self.check_value(document.value)
        self._remember(document)

    def _remember(self, document: StorageDocument) -> None:
        with _CHECKED_LOCK:
            _CHECKED[id(document)] = (document, self.name)
            if len(_CHECKED) > _CHECKED_SIZE:
                _CHECKED.popitem(last=False)

    def check_ownership(self, key: StorageRecordKey, value: FrozenJsonObject) -> None:
        """Raise unless the owner fields of a (schema-valid) document lead its key."""
        if not self.owner_fields:
            return
        owners = tuple(value.get(field) for field in self.owner_fields)
        if key.id[: len(owners)] != owners:
            raise StorageDocumentRuleError(
                f"{self.name.value} document is owned by {owners} but stored under {key}",
                table=self.name,
                rule="ownership",
            )

    def key_for(self, value: FrozenJsonObject) -> StorageRecordKey:
        """The key a document of this table is stored under, taken from its id fields."""
        return StorageRecordKey(self.name, self.key_id(value))

    def check_record(
        self, key: StorageRecordKey, document: StorageDocument, indexes: Sequence[StorageIndexEntry]
    ) -> None:
        """Raise ``StorageCorruptionError`` unless document, key and indexes agree."""
        if key.table is not self.name:
            raise StorageDocumentRuleError(
                f"key table {key.table.value} is not {self.name.value}", table=self.name, rule="table"
            )
        self.check_document(document)
        self.check_ownership(key, document.value)
        expected_key = self.key_for(document.value)
        if expected_key != key:
            raise StorageDocumentRuleError(
                f"key {key} does not match the document, which belongs at {expected_key}",
                table=self.name,
                rule="key",
            )
        expected = sorted(self.derive_indexes(document.value), key=lambda entry: entry.index.value)
        actual = sorted(indexes, key=lambda entry: entry.index.value)
        if expected != actual:
            raise StorageDocumentRuleError(
                f"index entries of {key} do not match its document: expected "
                f"{[(e.index.value, e.partition, e.sort) for e in expected]}, got "
                f"{[(e.index.value, e.partition, e.sort) for e in actual]}",
                table=self.name,
                rule="indexes",
            )


#: Documents that passed their table's checks, most recent last (see ``StorageTable.check_document``).
_CHECKED: OrderedDict[int, tuple[StorageDocument, StorageTableName]] = OrderedDict()
_CHECKED_LOCK = threading.Lock()
_CHECKED_SIZE = 4096


def iso(value: FrozenJsonObject, field: str, table: StorageTableName | None = None) -> str:
    """Read a field that the schema guarantees is a canonical iso date string."""
    text = value[field]
    if not isinstance(text, str) or not iso_date_codec.is_valid(text):
        raise StorageDocumentRuleError(f"{field} is not a canonical iso date", table=table, rule="timestamp")
    return text


def unsigned_integer(
    value: FrozenJsonObject,
    field: str,
    table: StorageTableName | None = None,
    *,
    minimum: int = 0,
    rule: str = "unsigned-integer",
) -> int:
    """Decode a canonical unsigned 64-bit decimal string field, at least ``minimum``.

    A pattern can bound the digits but not the value, so the exact range
    check (and the lower bound) lives here; a failure is the named ``rule``.
    """
    text = value[field]
    try:
        if not isinstance(text, str):
            raise StorageValidationError(f"{field} is not a decimal string")
        number = storage_unsigned_integer_codec.decode(text)
    except StorageValidationError as error:
        raise StorageDocumentRuleError(
            f"{field} is not an unsigned 64-bit decimal: {text!r}", table=table, rule=rule
        ) from error
    if number < minimum:
        raise StorageDocumentRuleError(
            f"{field} must be at least {minimum}, got {text}", table=table, rule=rule
        )
    return number
