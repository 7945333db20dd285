"""Ordered-append streams: the command, the layout, and the helpers every driver shares.

A stream partition is a head record (the next position to allocate) plus one
record per allocated position. A driver may offer a native ``append``; a
driver that does not is driven by core through the ordinary head read and
conditional point writes. Both paths must leave the *same* durable state, so
everything that decides that state lives here and not in drivers:

* ``parse_append_records_command`` freezes and validates the caller's batch
  once, at the boundary;
* ``read_storage_stream_position`` turns the stored head (or its absence)
  into the first position of the next batch, refusing corrupt or exhausted
  heads;
* ``materialize_storage_append`` produces the exact head, records, keys and
  index entries for a batch placed at a given start;
* ``measure_storage_append`` sizes the batch *before* positions are known,
  as an upper bound, so limit checks never depend on where the batch lands.

Positions are Python ints checked against the unsigned 64-bit range and
written as canonical decimal strings; they are never floats.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from .catalog import StorageIndexName, StorageStreamName, StorageTableName
from .encodings import U64_MAX, storage_tuple_codec, storage_unsigned_integer_codec
from .errors import (
    StorageCorruptionError,
    StorageLimitName,
    StorageStreamExhaustedError,
    StorageValidationError,
    create_storage_limit_error,
)
from .json_boundary import FrozenJson, FrozenJsonObject, StorageDocument, freeze_json
from .limits import StorageTransactionMeter
from .tables import StorageDocumentRuleError, StorageTable, get_storage_table
from .values import NewStorageRecord, StorageIndexEntry, StorageLimits, StorageRecordKey, StoredRecord

__all__ = [
    "AppendRecordsCommand",
    "MaterializedStorageAppend",
    "StorageAppendMeasurement",
    "StorageStreamLayout",
    "StorageStreamName",
    "materialize_storage_append",
    "measure_storage_append",
    "parse_append_records_command",
    "read_storage_stream_position",
    "storage_stream_layouts",
]


_WIDEST_POSITION = storage_unsigned_integer_codec.encode(U64_MAX)


def _check_position(position: int, what: str) -> int:
    if type(position) is not int or not 1 <= position <= U64_MAX:
        raise StorageValidationError(f"{what} must be an integer in 1..2**64-1, got {position!r}")
    return position


@dataclass(frozen=True)
class StorageStreamLayout:
    """Where one stream keeps its head and records, and which fields carry position and partition.

    Drivers translate this layout into their native representation; they must
    not invent another. Record keys are (partition, 20-digit position), so key
    order and index order are both position order.
    """

    stream: StorageStreamName
    """The stream this layout describes."""
    record_table: StorageTableName
    """The table every appended record is stored in."""
    head_table: StorageTableName
    """The table of each partition's head, which holds the next position."""
    index: StorageIndexName
    """The index the records are scanned by, in position order."""
    position_field: str
    """The document field storage fills with the position (callers leave it out)."""
    partition_field: str
    """The document field that carries the partition."""

    def head_key(self, partition: str) -> StorageRecordKey:
        """The key of the partition's head record."""
        return StorageRecordKey(self.head_table, (self.stream.value, partition))

    def record_key(self, partition: str, position: int) -> StorageRecordKey:
        """The key of the record stored at ``position`` in ``partition``."""
        _check_position(position, "a stream position")
        return StorageRecordKey(
            self.record_table, (partition, storage_unsigned_integer_codec.encode_ordered(position))
        )

    def record_index(self, partition: str, position: int) -> StorageIndexEntry:
        """The index entry of the record at ``position``: sorted by position within the partition."""
        _check_position(position, "a stream position")
        return StorageIndexEntry.of(
            self.index, partition, storage_unsigned_integer_codec.encode_ordered(position)
        )

    def head_value(self, partition: str, next_position: int) -> dict[str, str]:
        """The head document value that allocates ``next_position`` next."""
        return {
            "stream": self.stream.value,
            "partition": partition,
            "next": storage_unsigned_integer_codec.encode(next_position),
        }

    def owns_key(self, partition: str, key: StorageRecordKey) -> bool:
        """True when ``key`` is this stream's head or one of its records in ``partition``.

        A driver uses it to refuse point reads or mutations of the stream an
        attempt appends to, which the contract forbids in the same attempt.
        """
        if key.table is self.head_table:
            return key.id == (self.stream.value, partition)
        return key.table is self.record_table and key.id[0] == partition


storage_stream_layouts: Mapping[StorageStreamName, StorageStreamLayout] = types.MappingProxyType(
    {
        StorageStreamName.OBSERVATIONS: StorageStreamLayout(
            stream=StorageStreamName.OBSERVATIONS,
            record_table=StorageTableName.OBSERVATIONS,
            head_table=StorageTableName.STREAM_HEADS,
            index=StorageIndexName.OBSERVATIONS_BY_POSITION,
            position_field="position",
            partition_field="environment",
        ),
    }
)
"""The canonical layout of every stream: its record and head tables, position index and fields.

A driver with native append and one without must both lay records out exactly as described here.
"""


def _stream(stream: object) -> StorageStreamName:
    if isinstance(stream, StorageStreamName):
        return stream
    if isinstance(stream, str):
        try:
            return StorageStreamName(stream)
        except ValueError:
            pass
    raise StorageValidationError(f"unknown stream {stream!r}")


def _table(name: StorageTableName) -> StorageTable:
    return get_storage_table(name)


def _check_head_value(layout: StorageStreamLayout, partition: object) -> str:
    """Validate a partition by building the head it would have (the head table owns the rules)."""
    if not isinstance(partition, str):
        raise StorageValidationError("a stream partition is a string")
    try:
        _table(layout.head_table).check_value(_frozen_object(layout.head_value(partition, 1), "partition"))
    except StorageCorruptionError as error:
        raise StorageValidationError(f"invalid partition {partition!r} for {layout.stream.value}") from error
    return partition


def _frozen_object(value: object, where: str) -> FrozenJsonObject:
    frozen = freeze_json(value, where=where)
    if not isinstance(frozen, FrozenJsonObject):
        raise StorageValidationError(f"{where} must be a JSON object")
    return frozen


def _placed(
    layout: StorageStreamLayout, partition: str, value: FrozenJsonObject, position: str
) -> dict[str, FrozenJson]:
    items: dict[str, FrozenJson] = dict(value)
    items[layout.partition_field] = partition
    items[layout.position_field] = position
    return items


@dataclass(frozen=True)
class AppendRecordsCommand:
    """One ordered batch for one stream partition, frozen and validated when built.

    ``values`` are copied into immutable JSON objects, so nothing the caller
    does to its own lists or dicts afterwards can reach storage. Each value
    must omit the position field (storage assigns it); it may carry the
    partition field only if it equals ``partition``, and it must be a valid
    record of the stream's table once partition and position are added.
    The widest-position size of every record is measured here once and
    reused by ``measure_storage_append``.
    """

    stream: StorageStreamName
    """The stream to append to."""
    partition: str
    """The partition within the stream (for observations, the environment name)."""
    values: tuple[FrozenJsonObject, ...]
    """The documents in order, frozen, each without the position field."""
    widest_sizes: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """Each record's size with the widest possible position, for metering before commit."""

    def __post_init__(self) -> None:
        stream = _stream(self.stream)
        layout = storage_stream_layouts[stream]
        partition = _check_head_value(layout, self.partition)
        raw = self.values
        if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, (list, tuple)):
            raise StorageValidationError("append values must be an array of JSON objects")
        if not raw:
            raise StorageValidationError("an append batch needs at least one value")
        table = _table(layout.record_table)
        values: list[FrozenJsonObject] = []
        sizes: list[int] = []
        for index, item in enumerate(raw):
            where = f"values[{index}]"
            value = _frozen_object(item, where)
            if layout.position_field in value:
                raise StorageValidationError(
                    f"{where} already has {layout.position_field!r}; storage assigns positions"
                )
            if layout.partition_field in value and value[layout.partition_field] != partition:
                raise StorageValidationError(
                    f"{where}.{layout.partition_field} disagrees with the command partition {partition!r}"
                )
            widest = StorageDocument(_placed(layout, partition, value, _WIDEST_POSITION))
            try:
                table.check_value(widest.value)
            except StorageCorruptionError as error:
                raise StorageValidationError(
                    f"{where} is not a valid {table.name.value} value: {error}"
                ) from error
            values.append(value)
            sizes.append(widest.size)
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "widest_sizes", tuple(sizes))

    @property
    def layout(self) -> StorageStreamLayout:
        """The stream's canonical layout: where its head and records live and how they are indexed."""
        return storage_stream_layouts[self.stream]


def parse_append_records_command(source: object) -> AppendRecordsCommand:
    """Validate an append input: an ``AppendRecordsCommand`` or ``{stream, partition, values}``.

    A command is returned as it is: it validated and froze itself when built.
    A mapping is parsed from scratch. Bad input raises ``StorageValidationError``.
    """
    if isinstance(source, AppendRecordsCommand):
        return source
    if not isinstance(source, Mapping):
        raise StorageValidationError(f"an append command is a mapping, not {type(source).__name__}")
    if set(source) != {"stream", "partition", "values"}:
        raise StorageValidationError("an append command has exactly stream, partition and values")
    return AppendRecordsCommand(source["stream"], source["partition"], source["values"])


_POSITIVE_DECIMAL_DIGITS = frozenset("0123456789")


def _corrupt_head(message: str, rule: str) -> StorageDocumentRuleError:
    return StorageDocumentRuleError(message, table=StorageTableName.STREAM_HEADS, rule=rule)


def read_storage_stream_position(
    stream: StorageStreamName | str, partition: str, head: StoredRecord | None
) -> int:
    """The first position the next batch in ``partition`` will get.

    An absent head means nothing was ever appended: the answer is 1. A
    present head is checked again here even though ``StoredRecord`` checks
    itself, because drivers can build stored records without re-validation:
    a head under the wrong key, with other fields, or with a non-canonical
    ``next`` raises ``StorageCorruptionError``; a canonical ``next`` beyond
    2**64-1 raises ``StorageStreamExhaustedError``. Neither writes anything.
    """
    layout = storage_stream_layouts[_stream(stream)]
    if not isinstance(partition, str):
        raise StorageValidationError("a stream partition is a string")
    if head is None:
        return 1
    if not isinstance(head, StoredRecord):
        raise StorageValidationError(f"a stream head is a StoredRecord or None, not {type(head).__name__}")
    expected = layout.head_key(partition)
    if head.key.table is not expected.table or head.key.id != expected.id:
        raise _corrupt_head(f"stream head stored at {head.key}, expected {expected}", "key")
    value = head.document.value
    if set(value) != {"stream", "partition", "next"}:
        raise _corrupt_head(f"stream head {expected} has fields {sorted(value)}", "schema")
    if value["stream"] != layout.stream.value or value["partition"] != partition:
        raise _corrupt_head(f"stream head {expected} names another stream or partition", "ownership")
    text = value["next"]
    if not isinstance(text, str) or not text or text[0] == "0" or not set(text) <= _POSITIVE_DECIMAL_DIGITS:
        raise _corrupt_head(f"stream head {expected} has non-canonical next {text!r}", "stream-head")
    if len(text) > len(_WIDEST_POSITION) or int(text) > U64_MAX:
        raise StorageStreamExhaustedError(f"stream head {expected} is past the unsigned 64-bit range")
    return int(text)


@dataclass(frozen=True)
class MaterializedStorageAppend:
    """The exact durable result of one batch placed at ``first_position``.

    ``head`` allocates ``next_position``; ``records[i]`` sits at
    ``first_position + i`` with its key and index entry. A native append and
    a point-write fallback both write precisely these records.
    """

    stream: StorageStreamName
    """The stream appended to."""
    partition: str
    """The partition appended to."""
    head: NewStorageRecord
    """The head record to write, naming the next free position."""
    records: tuple[NewStorageRecord, ...]
    """The records to write, in batch order, with their positions filled in."""
    first_position: int
    """The position of the first record."""
    last_position: int
    """The position of the last record."""

    @property
    def next_position(self) -> int:
        """The position the head hands out after this batch."""
        return self.last_position + 1

    @property
    def positions(self) -> tuple[int, ...]:
        """The position of each record, in batch order."""
        return tuple(range(self.first_position, self.last_position + 1))


def materialize_storage_append(
    command: AppendRecordsCommand | Mapping[str, object], start: int
) -> MaterializedStorageAppend:
    """The head and records of ``command`` placed at ``start`` (from ``read_storage_stream_position``).

    The batch is contiguous. Both its last position and the head's next
    position must fit in 2**64-1; otherwise ``StorageStreamExhaustedError``
    is raised before anything is built, so a refused batch has no partial
    result to leak.
    """
    parsed = parse_append_records_command(command)
    layout = parsed.layout
    if type(start) is not int or start < 1:
        raise StorageValidationError(f"a start position is a positive integer, got {start!r}")
    last = start + len(parsed.values) - 1
    after = last + 1
    if after > U64_MAX:
        raise StorageStreamExhaustedError(
            f"{parsed.stream.value}/{parsed.partition}: a batch of {len(parsed.values)} at {start} "
            f"would need head {after}, beyond 2**64-1"
        )
    records = tuple(
        NewStorageRecord(
            layout.record_key(parsed.partition, position),
            StorageDocument(
                _placed(layout, parsed.partition, value, storage_unsigned_integer_codec.encode(position))
            ),
            (layout.record_index(parsed.partition, position),),
        )
        for position, value in enumerate(parsed.values, start)
    )
    head = NewStorageRecord(
        layout.head_key(parsed.partition), StorageDocument(layout.head_value(parsed.partition, after))
    )
    return MaterializedStorageAppend(parsed.stream, parsed.partition, head, records, start, last)


@dataclass(frozen=True)
class StorageAppendMeasurement:
    """An upper bound of what one append costs against the transaction limits.

    Sizes assume every position (and the head's next) has the widest
    unsigned 64-bit width, 20 digits, so the bound made before allocation
    holds wherever the batch lands. ``encoded_keys`` lines up with ``sizes``:
    one distinct placeholder per record (its real key is unknown until
    allocation, and it can never collide with another key because
    ``#`` is not part of any encoded key) and, last, the real head key.
    """

    stream: StorageStreamName
    """The stream measured."""
    partition: str
    """The partition measured."""
    record_sizes: tuple[int, ...]
    """An upper bound of each record's encoded size, in batch order."""
    head_size: int
    """An upper bound of the head's encoded size."""
    encoded_keys: tuple[str, ...]
    """The encoded keys the append may write (records and head), for the records limit."""

    @property
    def sizes(self) -> tuple[int, ...]:
        """Record sizes followed by the head size."""
        return (*self.record_sizes, self.head_size)

    @property
    def record_count(self) -> int:
        """Records the append adds to a transaction: every appended record plus the head."""
        return len(self.record_sizes) + 1

    @property
    def bytes(self) -> int:
        """Bytes the append adds to a transaction (upper bound)."""
        return sum(self.record_sizes) + self.head_size

    def charge(self, meter: StorageTransactionMeter) -> None:
        """Add this append to an attempt's running totals, with its point work."""
        meter.add_appended(self.encoded_keys, self.sizes)


def measure_storage_append(
    command: AppendRecordsCommand | Mapping[str, object], limits: StorageLimits
) -> StorageAppendMeasurement:
    """Size an append before positions are allocated, and refuse work no position could fit.

    Raises the ``max_record_bytes`` limit error for any record (or the head)
    whose widest form is too large, and the transaction limits when the
    append alone is already too big. Combining it with the attempt's other
    work is ``StorageAppendMeasurement.charge``.
    """
    parsed = parse_append_records_command(command)
    layout = parsed.layout
    head_key = layout.head_key(parsed.partition)
    head_size = StorageDocument(layout.head_value(parsed.partition, U64_MAX)).size
    slot = storage_tuple_codec.encode((layout.record_table.value, parsed.partition))
    measurement = StorageAppendMeasurement(
        stream=parsed.stream,
        partition=parsed.partition,
        record_sizes=parsed.widest_sizes,
        head_size=head_size,
        encoded_keys=(*(f"{slot}#{i}" for i in range(len(parsed.values))), head_key.encoded),
    )
    for size in measurement.sizes:
        if size > limits.max_record_bytes:
            raise create_storage_limit_error(StorageLimitName.RECORD_BYTES, limits.max_record_bytes, size)
    if measurement.record_count > limits.max_transaction_records:
        raise create_storage_limit_error(
            StorageLimitName.TRANSACTION_RECORDS, limits.max_transaction_records, measurement.record_count
        )
    if measurement.bytes > limits.max_transaction_bytes:
        raise create_storage_limit_error(
            StorageLimitName.TRANSACTION_BYTES, limits.max_transaction_bytes, measurement.bytes
        )
    return measurement
