"""The JSON forms of contract values on the wire, both ways.

Each value travels in the contract's own canonical form, built with the
contract's codecs rather than a second representation:

* a record key is its ``storage_record_key_codec`` encoding (lowercase hex
  UTF-8 components joined by ``/``, the table first);
* a document is its canonical envelope *text* (a JSON string holding
  ``{"schemaVersion":1,"value":...}``), so no runtime ever re-reads its
  numbers: a backend stores and returns that text as it is;
* versions and stream positions are decimal strings, dates are
  ``iso_date_codec`` text, index sorts and range bounds are encoded tuples;
* cursors are the contract's opaque cursor strings.

Decoding validates everything, because a backend is outside the toolkit:
a value that is not a valid contract value raises ``StorageCorruptionError``
(for data a backend returned) or ``StorageValidationError`` (for a request),
exactly as the contract's own constructors do.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from ..contract.catalog import StorageCandidateMode, StorageQueryDirection
from ..contract.encodings import iso_date_codec, storage_record_key_codec
from ..contract.errors import StorageCorruptionError, StorageError, StorageValidationError
from ..contract.json_boundary import StorageDocument, parse_canonical_storage_document, thaw_json
from ..contract.streams import AppendRecordsCommand
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageIndexEntry,
    StorageIndexReference,
    StorageLimits,
    StorageProfile,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StorageRecordVersion,
    StoredRecord,
)

__all__ = [
    "append_from_wire",
    "append_to_wire",
    "date_from_wire",
    "date_to_wire",
    "key_from_wire",
    "key_to_wire",
    "new_record_from_wire",
    "new_record_to_wire",
    "page_from_wire",
    "page_to_wire",
    "profile_from_wire",
    "profile_to_wire",
    "query_from_wire",
    "query_to_wire",
    "stored_record_from_wire",
    "stored_record_to_wire",
]

Wire = dict[str, Any]
V = TypeVar("V")


def _object(value: object, what: str, members: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StorageValidationError(f"{what} must be a JSON object")
    missing = [name for name in members if name not in value]
    if missing:
        raise StorageValidationError(f"{what} lacks {', '.join(missing)}")
    return value


# -- keys, index entries, records --------------------------------------------------------------


def key_to_wire(key: StorageRecordKey) -> str:
    return key.encoded


class _Parsed(Generic[V]):
    """Values already parsed from the wire, by the text (or tuple of texts) they came from.

    The same texts cross the pipe again and again (a record written, read back, replaced,
    deleted; a key in every request of a check), and every value kept here is immutable, so the
    one parsed from a text is the one that text gives every time. Only what parsed is kept (an
    invalid text raises every time), and the memo is emptied when it is full: bounded in count,
    and never a reason for a different answer.
    """

    def __init__(self, most: int = 4096) -> None:
        self._values: dict[Hashable, V] = {}
        self._most = most

    def get(self, text: Hashable) -> V | None:
        return self._values.get(text)

    def keep(self, text: Hashable, value: V) -> V:
        if len(self._values) >= self._most:
            self._values.clear()
        self._values[text] = value
        return value


_KEYS: _Parsed[StorageRecordKey] = _Parsed()


def key_from_wire(text: object) -> StorageRecordKey:
    if not isinstance(text, str):
        raise StorageValidationError("a record key on the wire is its encoded string")
    key = _KEYS.get(text)
    if key is None:
        table, ident = storage_record_key_codec.decode_parts(text)
        key = _KEYS.keep(text, StorageRecordKey(table, ident))  # type: ignore[arg-type]
    return key


def _index_to_wire(entry: StorageIndexEntry) -> Wire:
    return {"index": entry.index.value, "partition": entry.partition, "sort": entry.sort}


_ENTRIES: _Parsed[StorageIndexEntry] = _Parsed()


def _index_entry_from_wire(item: object) -> StorageIndexEntry:
    wire = _object(item, "an index entry", ("index", "partition", "sort"))
    fields = (wire["index"], wire["partition"], wire["sort"])
    if not all(isinstance(field, str) for field in fields):
        return StorageIndexEntry(*fields)  # raises: every field of an entry is a string
    entry = _ENTRIES.get(fields)
    return entry if entry is not None else _ENTRIES.keep(fields, StorageIndexEntry(*fields))


def _indexes_from_wire(value: object) -> tuple[StorageIndexEntry, ...]:
    """Index entries, each validated, sorted by index name as records keep them, one per index at most."""
    if not isinstance(value, list):
        raise StorageValidationError("record indexes is an array")
    entries = [_index_entry_from_wire(item) for item in value]
    if len({entry.index for entry in entries}) != len(entries):
        raise StorageValidationError("a record has at most one entry per index")
    return tuple(sorted(entries, key=lambda entry: entry.index.value))


#: Documents already parsed; a text longer than this is parsed each time rather than kept.
_DOCUMENTS: _Parsed[StorageDocument] = _Parsed()
_DOCUMENT_LONGEST = 8192


def _document_from_wire(value: object) -> StorageDocument:
    if not isinstance(value, str):
        raise StorageValidationError("a document on the wire is its canonical envelope text")
    document = _DOCUMENTS.get(value)
    if document is None:
        document = parse_canonical_storage_document(value)  # raises for an invalid one, never kept
        if len(value) <= _DOCUMENT_LONGEST:
            _DOCUMENTS.keep(value, document)
    return document


def new_record_to_wire(record: NewStorageRecord) -> Wire:
    return {
        "key": record.key.encoded,
        "document": record.document.text,
        "indexes": [_index_to_wire(entry) for entry in record.indexes],
    }


def new_record_from_wire(value: object) -> NewStorageRecord:
    """A write input from the toolkit, shape-checked but not re-checked against its table.

    Only the toolkit sends new records, and it built each one as a
    ``NewStorageRecord`` (which ran the table's rules) before encoding it,
    so running those rules again on the other side would only double the
    cost of every write.
    """
    wire = _object(value, "a new record", ("key", "document", "indexes"))
    record = object.__new__(NewStorageRecord)
    record.__dict__.update(
        key=key_from_wire(wire["key"]),
        document=_document_from_wire(wire["document"]),
        indexes=_indexes_from_wire(wire["indexes"]),
    )
    return record


def stored_record_to_wire(record: StoredRecord) -> Wire:
    return {
        "key": record.key.encoded,
        "version": record.version.value,
        "document": record.document.text,
        "indexes": [_index_to_wire(entry) for entry in record.indexes],
    }


def stored_record_from_wire(value: object) -> StoredRecord:
    """A stored record from the wire; a value with no contract form raises ``StorageCorruptionError``.

    The key, version, envelope and index entries must each be valid contract
    values (otherwise there is no ``StoredRecord`` to hand over: the data
    cannot be trusted, which is what corruption means in the contract). The
    table's rules are *not* run again, exactly as an in-process driver hands
    back what it stored without re-checking it: whether a driver returns the
    records it was given is what the suites judge, not this codec.
    """
    try:
        wire = _object(value, "a stored record", ("key", "version", "document", "indexes"))
        record = object.__new__(StoredRecord)
        record.__dict__.update(
            key=key_from_wire(wire["key"]),
            version=StorageRecordVersion(wire["version"]),
            document=_document_from_wire(wire["document"]),
            indexes=_indexes_from_wire(wire["indexes"]),
        )
        return record
    except StorageError as error:
        raise StorageCorruptionError(f"the backend returned an invalid stored record: {error}") from error


# -- queries -----------------------------------------------------------------------------------


def _bound_to_wire(bound: StorageRangeBound | None) -> Wire | None:
    return None if bound is None else {"value": bound.value, "inclusive": bound.inclusive}


def _bound_from_wire(value: object) -> StorageRangeBound | None:
    if value is None:
        return None
    wire = _object(value, "a range bound", ("value", "inclusive"))
    if not isinstance(wire["inclusive"], bool):
        raise StorageValidationError("a range bound's inclusive is a boolean")
    return StorageRangeBound(wire["value"], wire["inclusive"])


def query_to_wire(command: QueryRecordsCommand) -> Wire:
    return {
        "index": command.index.value,
        "partition": command.partition,
        "limit": command.limit,
        "range": {"lower": _bound_to_wire(command.range.lower), "upper": _bound_to_wire(command.range.upper)},
        "direction": command.direction.value,
        "cursor": command.cursor,
    }


def query_from_wire(value: object) -> QueryRecordsCommand:
    wire = _object(value, "a query command", ("index", "partition", "limit", "range", "direction", "cursor"))
    scope = _object(wire["range"], "a query range", ("lower", "upper"))
    try:
        direction = StorageQueryDirection(wire["direction"])
    except ValueError as error:
        raise StorageValidationError(f"unknown query direction {wire['direction']!r}") from error
    return QueryRecordsCommand(
        wire["index"],
        wire["partition"],
        wire["limit"],
        StorageQueryRange(_bound_from_wire(scope["lower"]), _bound_from_wire(scope["upper"])),
        direction,
        wire["cursor"],
    )


def mode_from_wire(value: object) -> StorageCandidateMode:
    try:
        return StorageCandidateMode(value)  # type: ignore[arg-type]
    except ValueError as error:
        raise StorageValidationError(f"unknown candidate mode {value!r}") from error


def page_to_wire(result: QueryRecordsResult) -> Wire:
    return {
        "items": [{"key": item.key.encoded, "sort": item.sort} for item in result.items],
        "cursor": result.cursor,
    }


def page_from_wire(value: object) -> QueryRecordsResult:
    """A query page from the wire; a malformed one raises ``StorageCorruptionError``.

    Only the shape is checked here: order, range, limit and cursor placement
    are what the suites judge (with ``parse_query_records_result``), so a
    wrong page reaches them as the driver produced it.
    """
    try:
        wire = _object(value, "a query page", ("items", "cursor"))
        if not isinstance(wire["items"], list):
            raise StorageValidationError("a query page's items is an array")
        items = []
        for item in wire["items"]:
            reference = _object(item, "a query item", ("key", "sort"))
            if not isinstance(reference["sort"], str):
                raise StorageValidationError("a query item's sort is a string")
            items.append(StorageIndexReference(key_from_wire(reference["key"]), reference["sort"]))
        cursor = wire["cursor"]
        if cursor is not None and not isinstance(cursor, str):
            raise StorageValidationError("a query page's cursor is a string or null")
        return QueryRecordsResult(tuple(items), cursor)
    except StorageCorruptionError:
        raise
    except StorageError as error:
        raise StorageCorruptionError(f"the backend returned an invalid query page: {error}") from error


# -- appends, dates, profiles ------------------------------------------------------------------


def append_to_wire(command: AppendRecordsCommand) -> Wire:
    return {
        "stream": command.stream.value,
        "partition": command.partition,
        "values": [thaw_json(value) for value in command.values],
    }


def append_from_wire(value: object) -> AppendRecordsCommand:
    wire = _object(value, "an append command", ("stream", "partition", "values"))
    return AppendRecordsCommand(wire["stream"], wire["partition"], wire["values"])


def date_to_wire(moment: datetime) -> str:
    return iso_date_codec.encode(moment)


def date_from_wire(value: object) -> datetime:
    if not isinstance(value, str):
        raise StorageValidationError("a date on the wire is an ISO string")
    return iso_date_codec.decode(value)


_LIMIT_FIELDS = (
    "max_point_reads",
    "max_query_results",
    "max_transaction_records",
    "max_record_bytes",
    "max_transaction_bytes",
)


def profile_to_wire(profile: StorageProfile) -> Wire:
    return {
        "durability": profile.durability.value,
        "clock_authority": profile.clock_authority.value,
        "index_consistency": profile.index_consistency.value,
        "exclusive_candidates": profile.exclusive_candidates,
        "append": profile.append,
        "limits": {name: getattr(profile.limits, name) for name in _LIMIT_FIELDS},
    }


def profile_from_wire(value: object) -> StorageProfile:
    """A profile from the wire; ``StorageProfileError`` when it is incoherent or incomplete."""
    wire = _object(
        value,
        "a profile",
        ("durability", "clock_authority", "index_consistency", "exclusive_candidates", "append", "limits"),
    )
    limits = _object(wire["limits"], "profile limits", _LIMIT_FIELDS)
    return StorageProfile(
        durability=wire["durability"],
        clock_authority=wire["clock_authority"],
        index_consistency=wire["index_consistency"],
        limits=StorageLimits(**{name: limits[name] for name in _LIMIT_FIELDS}),
        exclusive_candidates=wire["exclusive_candidates"],
        append=wire["append"],
    )
