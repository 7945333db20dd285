"""Where a store's data lives in etcd, and how contract values become etcd keys.

Every key of one store starts with ``runlane/<32 hex digits>/``. Per store:

* ``<prefix>r/<encoded key>``: a record, valued ``{"d": document JSON, "x":
  [[index, partition, sort], ...]}``. Its version is etcd's own ``mod_revision``
  of that key: the cluster-wide revision of the commit that last wrote it,
  which only grows, so a version is never handed out twice for a key.
* ``<prefix>i/<index>/<hex partition>/<sort>\\x00<encoded key>``: one empty key
  per index entry. Encoded sorts and keys use only ``0-9a-f/`` and ``\\x00``
  sorts below them, so etcd's byte order over these keys is exactly the
  contract's (encoded sort, encoded key) order, and a page is one range read.
* ``<prefix>d/<index>/<hex partition>``: the partition's removal marker,
  written by every commit that removes an entry from the partition. A scan
  depends on it (a removal leaves nothing in the scanned range to compare).
* ``<prefix>h/<encoded key>``: an exclusive hold, valued with the owning
  attempt's token and attached to that attempt's lease (revoked at the end of
  the attempt; it expires on its own if the owner crashed).
* ``<prefix>c/<attempt token>``: a writing attempt's commit marker, put
  (``1``) in the commit's own transaction; after a lost reply it is fenced and
  read back to learn the outcome. Once the outcome is known the marker is
  deleted by the instance's next commit (or when the instance closes).
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

__all__ = ["KeyLayout", "encode_record", "entry_suffix", "key_from_encoded", "prefix_end", "stored_record"]


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (etcd's ``range_end`` for a prefix)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\x00"
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class KeyLayout:
    """The etcd key names of one store (``prefix`` is ``runlane/<uuid hex>/``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.encode("ascii")

    def record(self, ekey: str) -> bytes:
        return self.prefix + b"r/" + ekey.encode("ascii")

    def record_ekey(self, key: bytes) -> str:
        return key[len(self.prefix) + 2 :].decode("ascii")

    def partition(self, index: StorageIndexName, partition: str) -> bytes:
        """The common prefix of every entry key of one (index, partition)."""
        return self.prefix + b"i/" + _part(index, partition) + b"/"

    def entry(self, entry: StorageIndexEntry, ekey: str) -> bytes:
        return self.partition(entry.index, entry.partition) + entry_suffix(entry.sort, ekey)

    def removals(self, index: StorageIndexName, partition: str) -> bytes:
        return self.prefix + b"d/" + _part(index, partition)

    def hold(self, ekey: str) -> bytes:
        return self.prefix + b"h/" + ekey.encode("ascii")

    def commit_marker(self, token: str) -> bytes:
        return self.prefix + b"c/" + token.encode("ascii")


def _part(index: StorageIndexName, partition: str) -> bytes:
    # Partitions are arbitrary text (NUL, slashes, lone surrogates): hex keeps key names plain.
    return (
        index.value.encode("ascii") + b"/" + partition.encode("utf-8", "surrogatepass").hex().encode("ascii")
    )


def entry_suffix(sort: str, ekey: str) -> bytes:
    return f"{sort}\x00{ekey}".encode("ascii")


def split_entry(suffix: bytes) -> tuple[str, str]:
    """``(encoded sort, encoded key)`` back from an entry key with its partition prefix removed."""
    sort, sep, ekey = suffix.decode("ascii").partition("\x00")
    if not sep or not ekey:
        raise StorageCorruptionError(f"index key {suffix!r} has no separator")
    return sort, ekey


def encode_record(document: str, entries: Sequence[StorageIndexEntry]) -> bytes:
    body = {"d": document, "x": [[entry.index.value, entry.partition, entry.sort] for entry in entries]}
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


@lru_cache(maxsize=8192)
def key_from_encoded(encoded: str) -> StorageRecordKey:
    table, ident = storage_record_key_codec.decode_parts(encoded)
    return StorageRecordKey(table, ident)  # type: ignore[arg-type]


def stored_record(key: StorageRecordKey, mod_revision: int, value: bytes) -> StoredRecord:
    """Rebuild a committed record from its etcd value; anything that does not validate is corruption."""
    try:
        body = json.loads(value.decode("ascii"))
        return StoredRecord(
            key,
            StorageRecordVersion(str(mod_revision)),
            parse_storage_document(body["d"]),
            tuple(StorageIndexEntry(idx, part, sort) for idx, part, sort in body["x"]),
        )
    except (StorageValidationError, ValueError, TypeError, KeyError) as error:
        raise StorageCorruptionError(f"stored record {key} does not validate: {error}") from error


# -- windows ---------------------------------------------------------------------------------------
#
# An entry suffix is S \x00 K with S and K over "0-9a-f/" (K non-empty). For a bound value B without NUL:
# S >= B <=> suffix >= B;  S > B <=> suffix >= B\x01;  S <= B <=> suffix < B\x01;  S < B <=> suffix < B.
# A bound with a NUL at position j lies strictly between every sort equal to B[:j] and every longer sort
# with that prefix, so it is replaced by B[:j] + \x01, which no sort equals. UTF-8 bytes (with
# surrogatepass) order as code points, which is how the contract compares strings.


def _raw(value: str) -> tuple[bytes, bool]:
    nul = value.find("\x00")
    if nul >= 0:
        return (value[:nul] + "\x01").encode("utf-8", "surrogatepass"), False
    return value.encode("utf-8", "surrogatepass"), True


def _lower(bound: StorageRangeBound | None) -> bytes | None:
    """The smallest suffix inside the bound (inclusive start), or None for an open end."""
    if bound is None:
        return None
    raw, exact = _raw(bound.value)
    return raw + b"\x01" if exact and not bound.inclusive else raw


def _upper(bound: StorageRangeBound | None) -> bytes | None:
    """The first suffix beyond the bound (exclusive end), or None for an open end."""
    if bound is None:
        return None
    raw, exact = _raw(bound.value)
    return raw + b"\x01" if exact and bound.inclusive else raw


def window(
    layout: KeyLayout, command: QueryRecordsCommand, position: StorageCursorPosition | None
) -> tuple[bytes, bytes]:
    """``(key, range_end)`` of ``command``'s window, narrowed past the cursor position."""
    base = layout.partition(command.index, command.partition)
    lower = _lower(command.range.lower)
    upper = _upper(command.range.upper)
    if position is not None:
        at = entry_suffix(position.sort, position.key)
        if command.direction is StorageQueryDirection.DESCENDING:
            upper = at if upper is None else min(upper, at)
        else:
            after = at + b"\x00"  # the smallest suffix greater than the cursor's
            lower = after if lower is None else max(lower, after)
    start = base + (lower or b"")
    end = prefix_end(base) if upper is None else base + upper
    return start, max(start, end)
