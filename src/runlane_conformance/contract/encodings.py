"""Canonical string encodings that make storage order equal contract order.

A tuple of strings is encoded as the lowercase hex of each component's UTF-8
bytes, joined by ``/``. Because ``/`` sorts below every hex digit, plain
string comparison of two encodings equals component-wise comparison of the
UTF-8 bytes, so any store that can sort strings (B-trees, sorted sets, SQL
``ORDER BY`` in the C collation) sorts records exactly as the contract does.

Dates use a fixed-width UTC form and unsigned integers never pass through a
float, so both survive every runtime unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from .errors import StorageValidationError

__all__ = [
    "U64_MAX",
    "IsoDateCodec",
    "StorageRecordKeyCodec",
    "StorageTupleCodec",
    "StorageUnsignedIntegerCodec",
    "compare_storage_encoded_values",
    "encode_storage_tuple_prefix_upper_bound",
    "iso_date_codec",
    "storage_record_key_codec",
    "storage_tuple_codec",
    "storage_unsigned_integer_codec",
]

U64_MAX = 2**64 - 1
"""The largest unsigned 64-bit integer, ``2**64 - 1``: the upper end of stream positions and counters."""
_HEX_COMPONENT = re.compile(r"(?:[0-9a-f]{2})*")


class StorageTupleCodec:
    """Encodes a non-empty tuple of strings; order-preserving and reversible."""

    def encode(self, components: Sequence[str]) -> str:
        if isinstance(components, str) or len(components) == 0:
            raise StorageValidationError("a storage tuple needs at least one string component")
        parts = []
        for component in components:
            if not isinstance(component, str):
                raise StorageValidationError(f"tuple component {component!r} is not a string")
            try:
                parts.append(component.encode("utf-8").hex())
            except UnicodeEncodeError as error:
                raise StorageValidationError(f"tuple component is not valid Unicode: {error}") from error
        return "/".join(parts)

    def decode(self, encoded: str) -> tuple[str, ...]:
        if not isinstance(encoded, str):
            raise StorageValidationError("an encoded tuple is a string")
        components = []
        for part in encoded.split("/"):
            if not _HEX_COMPONENT.fullmatch(part):
                raise StorageValidationError(f"not a canonical tuple encoding: {encoded!r}")
            try:
                components.append(bytes.fromhex(part).decode("utf-8"))
            except UnicodeDecodeError as error:
                raise StorageValidationError(f"tuple component is not UTF-8: {encoded!r}") from error
        return tuple(components)

    def is_valid(self, encoded: object) -> bool:
        if not isinstance(encoded, str):
            return False
        try:
            self.decode(encoded)
        except StorageValidationError:
            return False
        return True


storage_tuple_codec = StorageTupleCodec()
"""Tuples of strings as ordered text: lowercase hex of each component's UTF-8 bytes, joined by ``/``.

``encode(components) -> str``, ``decode(encoded) -> tuple[str, ...]`` and ``is_valid(encoded) -> bool``.
Plain string order of two encodings equals component-wise UTF-8 byte order of the tuples, so a
driver can sort and range-scan the encoded text natively (docs/contract.md, section 3).
"""


def encode_storage_tuple_prefix_upper_bound(prefix: Sequence[str]) -> str:
    """The smallest string above every encoding that starts with ``prefix``'s components.

    Use it as the *exclusive* upper bound of a range whose inclusive lower
    bound is ``storage_tuple_codec.encode(prefix)``. Longer tuples continue
    with ``/`` and ``/`` < ``0``, so appending ``0`` closes the range without
    any Unicode sentinel (which could never be a true maximum anyway).
    """
    return storage_tuple_codec.encode(prefix) + "0"


def compare_storage_encoded_values(left: str, right: str) -> int:
    """-1, 0 or 1: the contract order of two encoded values (plain string order)."""
    if left < right:
        return -1
    return 1 if left > right else 0


class StorageRecordKeyLike(Protocol):
    """Anything shaped like a record key (``StorageRecordKey`` lives in ``values``)."""

    @property
    def table(self) -> str: ...

    @property
    def id(self) -> tuple[str, ...]: ...


class StorageRecordKeyCodec:
    """Encodes a record key as the tuple (table, *id) for maps and native stores."""

    def encode(self, key: StorageRecordKeyLike) -> str:
        return storage_tuple_codec.encode((key.table, *key.id))

    def decode_parts(self, encoded: str) -> tuple[str, tuple[str, ...]]:
        parts = storage_tuple_codec.decode(encoded)
        if len(parts) < 2:
            raise StorageValidationError(f"a record key needs a table and an id: {encoded!r}")
        return parts[0], parts[1:]


storage_record_key_codec = StorageRecordKeyCodec()
"""Record keys as ordered text: the tuple encoding of ``(table, *id)``.

``encode(key) -> str`` and ``decode_parts(encoded) -> (table, id)``. Use the encoded form as the
key of maps and native indexes; two keys are equal exactly when their encodings are.
"""

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z", re.ASCII)


@dataclass(frozen=True)
class IsoDateCodec:
    """UTC timestamps as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: fixed width, so text order is time order.

    Microseconds are kept (Python's full precision); naive datetimes are refused
    because their instant is unknown.
    """

    def encode(self, value: datetime) -> str:
        if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
            raise StorageValidationError("iso dates need a timezone-aware datetime")
        try:
            utc = value.astimezone(UTC)
        except OverflowError as error:
            raise StorageValidationError(f"{value!r} has no UTC instant inside years 1-9999") from error
        # Formatted by hand: strftime("%Y") does not zero-pad years below 1000 on every platform.
        return (
            f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
            f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}Z"
        )

    def decode(self, text: str) -> datetime:
        if not isinstance(text, str):
            raise StorageValidationError("an iso date is a string")
        match = _ISO.fullmatch(text)
        if match is None:
            raise StorageValidationError(f"not a canonical iso date: {text!r}")
        try:
            year, month, day, hour, minute, second, micro = (int(g) for g in match.groups())
            return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
        except ValueError as error:
            raise StorageValidationError(f"not a real date: {text!r}") from error

    def is_valid(self, text: object) -> bool:
        try:
            self.decode(text)  # type: ignore[arg-type]
        except StorageValidationError:
            return False
        return True


iso_date_codec = IsoDateCodec()
"""Instants as fixed-width UTC text, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, whose string order is time order.

``encode(value: datetime) -> str`` refuses naive datetimes; ``decode(text) -> datetime`` accepts only
that exact form; ``is_valid(text) -> bool``. Microseconds are kept, so a round trip is exact.
"""

_U64 = re.compile(r"0|[1-9][0-9]{0,19}")


@dataclass(frozen=True)
class StorageUnsignedIntegerCodec:
    """Unsigned 64-bit integers as decimal strings, handled as exact integers only.

    ``encode`` gives the canonical decimal (no sign, no leading zeros);
    ``encode_ordered`` gives a 20-digit zero-padded form whose text order is
    numeric order, for sort components.
    """

    width: int = 20

    def _check(self, value: int) -> int:
        if type(value) is not int:
            raise StorageValidationError(f"{value!r} is not an integer")
        if not 0 <= value <= U64_MAX:
            raise StorageValidationError(f"{value} is outside the unsigned 64-bit range")
        return value

    def encode(self, value: int) -> str:
        return str(self._check(value))

    def encode_ordered(self, value: int) -> str:
        return str(self._check(value)).zfill(self.width)

    def decode(self, text: str) -> int:
        if not isinstance(text, str) or not _U64.fullmatch(text):
            raise StorageValidationError(f"not a canonical unsigned integer: {text!r}")
        value = int(text)
        if value > U64_MAX:
            raise StorageValidationError(f"{text} is outside the unsigned 64-bit range")
        return value

    def decode_ordered(self, text: str) -> int:
        if not isinstance(text, str) or len(text) != self.width or not text.isdigit():
            raise StorageValidationError(f"not a 20-digit ordered unsigned integer: {text!r}")
        return self.decode(text.lstrip("0") or "0")

    def is_valid(self, text: object) -> bool:
        try:
            self.decode(text)  # type: ignore[arg-type]
        except StorageValidationError:
            return False
        return True


storage_unsigned_integer_codec = StorageUnsignedIntegerCodec()
"""Unsigned 64-bit integers as canonical decimal text, never through a float.

``encode(value) -> str`` / ``decode(text) -> int`` for values (no sign, no leading zeros);
``encode_ordered`` / ``decode_ordered`` for the 20-digit zero-padded form used in sort components,
whose string order is numeric order; ``is_valid(text) -> bool``. Booleans, floats and values outside
``0 .. 2**64-1`` are refused.
"""
