"""The two tables behind ordered-append streams: observation records and stream heads.

An ordered stream is nothing more than ordinary records plus one head record
per partition, so a driver without a native ``append`` can produce exactly
the same durable state with point reads and conditional writes. These
definitions are what makes both paths byte-identical:

* ``observations``: one record per position, keyed by (environment,
  20-digit zero-padded position) so key order is position order, and indexed
  by ``ObservationsByPosition`` in the environment's partition;
* ``stream_heads``: one record per (stream, partition) holding the next
  position to allocate as a canonical unsigned 64-bit decimal.

Positions are exact integers throughout; they never pass through a float.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .catalog import StorageIndexName, StorageStreamName, StorageTableName
from .encodings import storage_unsigned_integer_codec
from .json_boundary import FrozenJsonObject
from .keys import StorageIndexEntry
from .table_rules import StorageDocumentRuleError, StorageTable, unsigned_integer

__all__ = ["STREAM_TABLES", "ObservationsTable", "StreamHeadsTable"]

_NAME = {"type": "string", "minLength": 1, "maxLength": 256}
_NON_EMPTY = {"type": "string", "minLength": 1}
# Canonical unsigned decimal: no sign, no leading zeros, at most 20 digits. The exact
# 2**64-1 upper bound is an identity check, because a pattern cannot express it.
_U64_DECIMAL = {"type": "string", "pattern": r"^(0|[1-9][0-9]{0,19})$"}


class ObservationsTable(StorageTable):
    """One appended observation: its environment, its position, who produced it and its opaque data.

    The key and the ``ObservationsByPosition`` sort both use the 20-digit
    ordered form of the position, so scanning either returns observations in
    append order. ``data`` is core's business and is never interpreted here.
    """

    name = StorageTableName.OBSERVATIONS
    owner_fields = ("environment",)
    indexes = (StorageIndexName.OBSERVATIONS_BY_POSITION,)
    schema: ClassVar[dict[str, Any]] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["environment", "position", "source", "data"],
        "properties": {
            "environment": _NAME,
            "position": _U64_DECIMAL,
            "source": {
                "type": "object",
                "additionalProperties": False,
                "required": ["kind", "id"],
                "properties": {"kind": _NON_EMPTY, "id": _NON_EMPTY},
            },
            "data": {"type": "object"},
        },
    }

    def _ordered_position(self, value: FrozenJsonObject) -> str:
        position = unsigned_integer(value, "position", self.name, minimum=1, rule="position")
        return storage_unsigned_integer_codec.encode_ordered(position)

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (str(value["environment"]), self._ordered_position(value))

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        return (
            StorageIndexEntry.of(
                StorageIndexName.OBSERVATIONS_BY_POSITION,
                str(value["environment"]),
                self._ordered_position(value),
            ),
        )

    def check_identity(self, value: FrozenJsonObject) -> None:
        unsigned_integer(value, "position", self.name, minimum=1, rule="position")
        source = value["source"]
        if not isinstance(source, FrozenJsonObject) or not all(
            isinstance(source.get(part), str) and source.get(part) for part in ("kind", "id")
        ):
            raise StorageDocumentRuleError(
                "an observation source needs a non-empty kind and id", table=self.name, rule="source-identity"
            )


class StreamHeadsTable(StorageTable):
    """The allocator of one stream partition: the next position it will hand out.

    ``next`` is at least 1 and at most 2**64-1. A head at 2**64-1 is still a
    valid record but can never grow, because the head after any batch would
    no longer fit; ``materialize_storage_append`` refuses such a batch.
    """

    name = StorageTableName.STREAM_HEADS
    owner_fields = ("stream", "partition")
    schema: ClassVar[dict[str, Any]] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["stream", "partition", "next"],
        "properties": {
            "stream": {"type": "string", "enum": [stream.value for stream in StorageStreamName]},
            "partition": _NAME,
            "next": _U64_DECIMAL,
        },
    }

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (str(value["stream"]), str(value["partition"]))

    def check_identity(self, value: FrozenJsonObject) -> None:
        unsigned_integer(value, "next", self.name, minimum=1, rule="stream-head")


#: The streams' table definitions; the catalogue (``tables``) lists them with core's.
STREAM_TABLES: tuple[StorageTable, ...] = (ObservationsTable(), StreamHeadsTable())
