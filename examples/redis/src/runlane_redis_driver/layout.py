"""Where a store's data lives in Redis, and how contract values become Redis keys and members.

Every key of one store starts with the same prefix ``{runlane:<uuid>}:``. The
braces are a Redis Cluster hash tag: only the text between them is hashed,
so every key of a store maps to one slot, which is what lets a single
``MULTI``/``EXEC`` touch any of them (a single-slot topology on a cluster).

Per store:

* ``<prefix>v:<encoded key>``: the record's version (decimal string);
  present exactly while the record is present. It is the one key a reader
  depends on, so a whole read set is re-checked with one ``MGET``.
* ``<prefix>r:<encoded key>``: a hash with ``d`` (the canonical document
  JSON) and ``x`` (the index entries as JSON ``[[index, partition, sort], ...]``).
* ``<prefix>i:<index>:<hex partition>``: a sorted set, every score 0, one
  member ``sort \\x00 encoded key`` per index entry. Encoded sorts and keys
  use only ``0-9a-f/``, and ``\\x00`` sorts below all of them, so Redis's
  byte order over members is exactly (encoded sort, encoded key) order.
* ``<prefix>rv:<index>:<hex partition>``: the partition's range version, a
  counter every commit that changes that index partition increments. A scan
  depends on it, so a scan (even one that returned nothing) conflicts with
  any later write to the partition.
* ``<prefix>h:<encoded key>``: an exclusive hold on a record, holding the
  owning attempt's token, with an expiry so that a crashed owner cannot hold
  a row forever.
* ``<prefix>versions``: the counter versions are drawn from with ``INCRBY``;
  it only grows, so a version is never handed out twice.
* ``<prefix>c:<attempt token>``: a writing attempt's commit marker, set to
  ``1`` inside its ``MULTI``/``EXEC`` and expiring after ten minutes. After a
  lost ``EXEC`` reply it is read back to learn whether the commit happened.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache

from runlane_conformance import (
    QueryRecordsCommand,
    StorageCorruptionError,
    StorageCursorPosition,
    StorageIndexEntry,
    StorageIndexName,
    StorageQueryDirection,
    StorageRangeBound,
    StorageRecordKey,
    StorageRecordVersion,
    StorageValidationError,
    StoredRecord,
    parse_storage_document,
    storage_record_key_codec,
)

__all__ = ["KeyLayout", "key_from_encoded", "lex_window", "member", "split_member", "stored_record"]

#: A lex bound as ZRANGEBYLEX takes it: ``-``/``+`` or ``[value``/``(value``.
LexBound = bytes


class KeyLayout:
    """The Redis key names of one store (``prefix`` is ``{runlane:<uuid>}:``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.versions = f"{prefix}versions"

    def version(self, ekey: str) -> str:
        return f"{self.prefix}v:{ekey}"

    def record(self, ekey: str) -> str:
        return f"{self.prefix}r:{ekey}"

    def index(self, index: StorageIndexName, partition: str) -> str:
        return f"{self.prefix}i:{index.value}:{encode_partition(partition)}"

    def range_version(self, index: StorageIndexName, partition: str) -> str:
        return f"{self.prefix}rv:{index.value}:{encode_partition(partition)}"

    def hold(self, ekey: str) -> str:
        return f"{self.prefix}h:{ekey}"

    def commit_marker(self, token: str) -> str:
        return f"{self.prefix}c:{token}"


def encode_partition(partition: str) -> str:
    """Partitions are arbitrary text (NUL, lone surrogates, colons); hex keeps key names plain."""
    return partition.encode("utf-8", "surrogatepass").hex()


def member(sort: str, ekey: str) -> bytes:
    """The sorted-set member of one index entry."""
    return f"{sort}\x00{ekey}".encode("ascii")


def split_member(raw: bytes) -> tuple[str, str]:
    """``(encoded sort, encoded key)`` back from a member."""
    sort, sep, ekey = raw.decode("ascii").partition("\x00")
    if not sep:
        raise StorageCorruptionError(f"index member {raw!r} has no separator")
    return sort, ekey


def encode_entries(entries: Sequence[StorageIndexEntry]) -> str:
    return json.dumps([[entry.index.value, entry.partition, entry.sort] for entry in entries])


@lru_cache(maxsize=8192)
def key_from_encoded(encoded: str) -> StorageRecordKey:
    table, ident = storage_record_key_codec.decode_parts(encoded)
    return StorageRecordKey(table, ident)  # type: ignore[arg-type]


def stored_record(key: StorageRecordKey, version: bytes, document: bytes, entries: bytes) -> StoredRecord:
    """Rebuild a committed record from its keys; anything that does not validate is corruption."""
    try:
        return StoredRecord(
            key,
            StorageRecordVersion(version.decode("ascii")),
            parse_storage_document(document.decode("utf-8")),
            tuple(StorageIndexEntry(idx, part, sort) for idx, part, sort in json.loads(entries)),
        )
    except (StorageValidationError, ValueError, TypeError) as error:
        raise StorageCorruptionError(f"stored record {key} does not validate: {error}") from error


# -- lex ranges ------------------------------------------------------------------------------------
#
# A member is S \x00 K with S and K over "0-9a-f/" (K non-empty). For a bound
# value B without NUL: S >= B  <=>  member >= B;  S > B  <=>  member >= B\x01;
# S <= B  <=>  member < B\x01;  S < B  <=>  member < B. A bound with a NUL at
# position j sits strictly between every sort equal to its first j characters
# and every longer sort with that prefix, so it is replaced by the NUL-free
# stand-in B[:j] + \x01, which no sort equals (its inclusivity then no longer
# matters). Other characters need nothing: UTF-8 bytes (with surrogatepass)
# order exactly as code points, which is how the contract compares strings.


def _raw(value: str) -> tuple[bytes, bool]:
    """The bound's bytes, and whether a sort can be equal to it."""
    nul = value.find("\x00")
    if nul >= 0:
        return (value[:nul] + "\x01").encode("utf-8", "surrogatepass"), False
    return value.encode("utf-8", "surrogatepass"), True


def _lower(bound: StorageRangeBound | None) -> tuple[bytes, bool] | None:
    """(value, exclusive) over members, or None for an open end."""
    if bound is None:
        return None
    raw, exact = _raw(bound.value)
    if exact and not bound.inclusive:
        return raw + b"\x01", False
    return raw, False


def _upper(bound: StorageRangeBound | None) -> tuple[bytes, bool] | None:
    if bound is None:
        return None
    raw, exact = _raw(bound.value)
    if exact and bound.inclusive:
        return raw + b"\x01", True
    return raw, True


def _tighter(
    first: tuple[bytes, bool] | None, second: tuple[bytes, bool] | None, *, lower: bool
) -> tuple[bytes, bool] | None:
    if first is None:
        return second
    if second is None:
        return first
    if first[0] == second[0]:
        return (first[0], first[1] or second[1])
    if lower:
        return first if first[0] > second[0] else second
    return first if first[0] < second[0] else second


def _lex(bound: tuple[bytes, bool] | None, open_end: bytes) -> LexBound:
    if bound is None:
        return open_end
    return (b"(" if bound[1] else b"[") + bound[0]


def lex_window(command: QueryRecordsCommand, position: StorageCursorPosition | None) -> tuple[bytes, bytes]:
    """``(min, max)`` for ZRANGEBYLEX: the command's range, narrowed past the cursor position."""
    lower = _lower(command.range.lower)
    upper = _upper(command.range.upper)
    if position is not None:
        after = (member(position.sort, position.key), True)
        if command.direction is StorageQueryDirection.DESCENDING:
            upper = _tighter(upper, after, lower=False)
        else:
            lower = _tighter(lower, after, lower=True)
    return _lex(lower, b"-"), _lex(upper, b"+")
