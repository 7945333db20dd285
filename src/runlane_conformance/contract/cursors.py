"""Query continuations that are only valid for the exact scope that produced them.

A cursor records the schema version, index, partition, range, direction and
the (sort, key) of the last returned item. Decoding it checks every part
against the command it is used with, so a cursor can never silently move a
scan to another index, partition, range or direction. A checksum catches
garbled or hand-edited cursors; it is not a secret (cursors are not a
security boundary), only a guard against accidents.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quote

from .catalog import StorageQueryDirection
from .encodings import storage_record_key_codec, storage_tuple_codec
from .errors import StorageCorruptionError, StorageCursorError, StorageValidationError
from .json_boundary import SCHEMA_VERSION
from .values import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageIndexReference,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
)

__all__ = [
    "StorageCursorPosition",
    "decode_storage_query_cursor",
    "encode_storage_query_cursor",
    "is_after_cursor",
    "parse_query_records_result",
]

_PREFIX = "rlc1."
_URLSAFE = bytes.maketrans(b"+/", b"-_")


@dataclass(frozen=True)
class StorageCursorPosition:
    """Where a scan stopped: the encoded sort and encoded key of the last item returned."""

    sort: str
    """The encoded sort value of the last item returned."""
    key: str
    """The encoded record key of the last item returned (it breaks ties between equal sorts)."""


def _range_json(scope: StorageQueryRange) -> list[object]:
    lower = None if scope.lower is None else [scope.lower.value, scope.lower.inclusive]
    upper = None if scope.upper is None else [scope.upper.value, scope.upper.inclusive]
    return [lower, upper]


def _scope(command: QueryRecordsCommand) -> dict[str, object]:
    return {
        "v": SCHEMA_VERSION,
        "i": command.index.value,
        "p": command.partition,
        "r": _range_json(command.range),
        "d": command.direction.value,
    }


_SCOPE_PARTS = (
    ("v", "schema version"),
    ("i", "index"),
    ("p", "partition"),
    ("r", "range"),
    ("d", "direction"),
)


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]


def _bound_text(bound: StorageRangeBound | None) -> str:
    if bound is None:
        return "null"
    return f"[{_quote(bound.value)},{'true' if bound.inclusive else 'false'}]"


def encode_storage_query_cursor(command: QueryRecordsCommand, last: StorageIndexReference) -> str:
    """A continuation after ``last`` that is bound to ``command``'s whole scope.

    Every query page that fills up issues one, so the JSON body is written
    out directly (keys in sorted order, compact separators, ASCII escapes)
    instead of going through ``json.dumps``; the result is byte-for-byte
    what ``json.dumps(..., sort_keys=True, separators=(",", ":"))`` gives,
    which the cursor vectors pin.
    """
    scope = command.range
    text = (
        f'{{"d":{_quote(command.direction)},"i":{_quote(command.index)},'
        f'"k":{_quote(last.key.encoded)},"p":{_quote(command.partition)},'
        f'"r":[{_bound_text(scope.lower)},{_bound_text(scope.upper)}],'
        f'"s":{_quote(last.sort)},"v":{SCHEMA_VERSION}}}'
    )
    body = text.encode("ascii")
    token = binascii.b2a_base64(body, newline=False).translate(_URLSAFE).decode("ascii").rstrip("=")
    return f"{_PREFIX}{token}.{_digest(body)}"


def decode_storage_query_cursor(command: QueryRecordsCommand) -> StorageCursorPosition | None:
    """The position to continue after, or ``None`` when ``command`` has no cursor.

    Raises ``StorageCursorError`` for a malformed or tampered cursor and for
    one issued under any other schema version, index, partition, range or
    direction.
    """
    cursor = command.cursor
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not cursor.startswith(_PREFIX):
        raise StorageCursorError("not a storage query cursor")
    token, dot, digest = cursor[len(_PREFIX) :].partition(".")
    if not dot:
        raise StorageCursorError("garbled cursor")
    try:
        body = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError as error:
        raise StorageCursorError("garbled cursor") from error
    if _digest(body) != digest:
        raise StorageCursorError("cursor checksum mismatch: it was altered or truncated")
    try:
        payload = json.loads(body)
    except ValueError as error:
        raise StorageCursorError("garbled cursor") from error
    if not isinstance(payload, dict):
        raise StorageCursorError("garbled cursor")
    expected = _scope(command)
    # Compared as JSON text so that 1, 1.0 and true (equal in Python) stay different scopes.
    if _text({part: payload.get(part) for part in expected}) != _text(expected):
        for part, name in _SCOPE_PARTS:
            if _text(payload.get(part)) != _text(expected[part]):
                raise StorageCursorError(f"cursor was issued for another {name}")
    sort, key = payload.get("s"), payload.get("k")
    if not isinstance(sort, str) or not isinstance(key, str):
        raise StorageCursorError("garbled cursor")
    try:
        storage_tuple_codec.decode(sort)
        storage_record_key_codec.decode_parts(key)
    except StorageValidationError as error:
        raise StorageCursorError("cursor position is not a canonical sort and record key") from error
    return StorageCursorPosition(sort, key)


def is_after_cursor(
    sort: str, key: str, position: StorageCursorPosition, direction: StorageQueryDirection
) -> bool:
    """Whether (sort, key) comes strictly after ``position`` in scan ``direction``."""
    if direction is StorageQueryDirection.ASCENDING:
        return (sort, key) > (position.sort, position.key)
    return (sort, key) < (position.sort, position.key)


def parse_query_records_result(command: QueryRecordsCommand, result: object) -> QueryRecordsResult:
    """Check that a driver's page is a valid answer to ``command``.

    The page must be a ``QueryRecordsResult`` of at most ``limit`` distinct
    references, each inside the range and after the command's cursor, in
    strict (sort, encoded key) order for the direction; a returned cursor
    must decode under the same scope and point at the last item. Anything
    else is reported as ``StorageCorruptionError``.
    """
    if not isinstance(result, QueryRecordsResult):
        raise StorageCorruptionError(f"query returned {type(result).__name__}, not QueryRecordsResult")
    if len(result.items) > command.limit:
        raise StorageCorruptionError(f"query returned {len(result.items)} items for limit {command.limit}")
    start = decode_storage_query_cursor(command)
    previous: tuple[str, str] | None = None
    seen: set[str] = set()
    descending = command.direction is StorageQueryDirection.DESCENDING
    for item in result.items:
        if not isinstance(item, StorageIndexReference) or not isinstance(item.key, StorageRecordKey):
            raise StorageCorruptionError(f"query item {item!r} is not a StorageIndexReference")
        if not storage_tuple_codec.is_valid(item.sort):
            raise StorageCorruptionError(f"query item sort {item.sort!r} is not a canonical encoding")
        if not command.range.contains(item.sort):
            raise StorageCorruptionError(f"query item sort {item.sort!r} is outside the range")
        current = (item.sort, storage_record_key_codec.encode(item.key))
        # A record has at most one entry per index, so one key can appear only once per page.
        if current[1] in seen:
            raise StorageCorruptionError(f"query returned the record {item.key} twice")
        seen.add(current[1])
        if start is not None and not is_after_cursor(*current, start, command.direction):
            raise StorageCorruptionError("query item does not follow the cursor")
        if previous is not None and (current <= previous if not descending else current >= previous):
            raise StorageCorruptionError("query items are not in strict (sort, key) order")
        previous = current
    if result.cursor is not None:
        try:
            position = decode_storage_query_cursor(command.with_cursor(result.cursor))
        except (StorageCursorError, StorageValidationError) as error:
            raise StorageCorruptionError(f"query returned an invalid cursor: {error}") from error
        if previous is None or position is None or (position.sort, position.key) != previous:
            raise StorageCorruptionError("query cursor does not point at the last returned item")
    return result
