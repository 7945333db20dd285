"""Scan helpers shared by the cursor, model and exclusive-selection suites.

Every page a driver returns goes through ``parse_query_records_result``
before a check looks at it, so a malformed page (wrong order, an item
outside the range, a cursor that does not point at the last item) fails the
check with the contract's own diagnosis. ``expected_scan`` is the contract's
ordering written out plainly, so checks compare a driver against an
independent model instead of against itself.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from enum import StrEnum
from importlib import resources
from typing import Any

from ..contract.catalog import StorageCandidateMode, StorageIndexName, StorageQueryDirection, StorageTableName
from ..contract.cursors import parse_query_records_result
from ..contract.encodings import iso_date_codec
from ..contract.errors import StorageError
from ..contract.json_boundary import thaw_json
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.records import build_storage_record
from ..contract.table_definitions import schedule_occurrence_id, step_token
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageQueryRange,
)
from ..fixtures.convergence import settle_indexes

__all__ = [
    "ScanItem",
    "Via",
    "catalog_records",
    "crossed_catalog_records",
    "expected_scan",
    "in_transaction_scan",
    "index_entries",
    "page_items",
    "read_page",
    "scan_all",
    "write_records",
]

#: (encoded sort, encoded record key): the contract orders index results by exactly this pair.
ScanItem = tuple[str, str]


class Via(StrEnum):
    """The two ways to read an index: advisory ``driver.query`` or ``tx.query_candidates``."""

    QUERY = "query"
    CANDIDATES = "query_candidates"


def read_page(
    driver: StorageDriver,
    command: QueryRecordsCommand,
    via: Via,
    *,
    mode: StorageCandidateMode = StorageCandidateMode.ADVISORY,
) -> QueryRecordsResult:
    """One page through ``via`` (candidates run in their own read-only transaction), validated."""
    if via is Via.QUERY:
        result: object = driver.query(command)
    else:
        result = driver.transaction(lambda tx: tx.query_candidates(command, mode=mode))
    return parse_query_records_result(command, result)


def page_items(result: QueryRecordsResult) -> list[ScanItem]:
    """The (sort, encoded key) pairs of a validated page, in the order returned."""
    return [(item.sort, item.key.encoded) for item in result.items]


def scan_all(
    read: Callable[[QueryRecordsCommand], QueryRecordsResult],
    command: QueryRecordsCommand,
    *,
    max_pages: int,
) -> tuple[list[ScanItem], list[QueryRecordsResult]]:
    """Follow cursors from ``command`` until a page comes back without one.

    ``read`` must validate each page (``read_page`` does). A valid page with a
    cursor always holds at least one item, so the scan makes progress; it is
    still bounded by ``max_pages`` so a driver that keeps handing out
    cursors fails the check instead of hanging it.
    """
    items: list[ScanItem] = []
    pages: list[QueryRecordsResult] = []
    current = command
    while True:
        page = read(current)
        pages.append(page)
        items.extend(page_items(page))
        if page.cursor is None:
            return items, pages
        if len(pages) >= max_pages:
            raise AssertionError(
                f"the scan kept returning cursors after {max_pages} pages "
                f"(only {len(items)} items were returned so far)"
            )
        current = command.with_cursor(page.cursor)


def in_transaction_scan(
    tx: StorageTransaction,
    command: QueryRecordsCommand,
    *,
    mode: StorageCandidateMode = StorageCandidateMode.ADVISORY,
) -> QueryRecordsResult:
    """One validated ``query_candidates`` page inside an attempt the caller already holds."""
    return parse_query_records_result(command, tx.query_candidates(command, mode=mode))


def index_entries(
    records: Iterable[NewStorageRecord], index: StorageIndexName, partition: str
) -> list[ScanItem]:
    """The (sort, encoded key) entries that ``records`` place in ``index``/``partition``."""
    found: list[ScanItem] = []
    for record in records:
        for entry in record.indexes:
            if entry.index is index and entry.partition == partition:
                found.append((entry.sort, record.key.encoded))
    return found


def expected_scan(
    entries: Iterable[ScanItem],
    *,
    query_range: StorageQueryRange | None = None,
    direction: StorageQueryDirection = StorageQueryDirection.ASCENDING,
) -> list[ScanItem]:
    """The contract's answer: entries inside the range, by encoded sort then encoded key.

    Written with plain string comparisons on the encodings, which is the
    order the contract defines; descending is the exact reverse of the whole
    ascending order (not of each page).
    """
    bounds = query_range or StorageQueryRange()
    chosen = sorted(
        (sort, key)
        for sort, key in entries
        if (
            bounds.lower is None
            or sort > bounds.lower.value
            or (bounds.lower.inclusive and sort == bounds.lower.value)
        )
        and (
            bounds.upper is None
            or sort < bounds.upper.value
            or (bounds.upper.inclusive and sort == bounds.upper.value)
        )
    )
    if direction is StorageQueryDirection.DESCENDING:
        chosen.reverse()
    return chosen


def write_records(driver: StorageDriver, records: Sequence[NewStorageRecord], *, batch: int) -> None:
    """Create ``records`` in transactions of at most ``batch`` records (and no more bytes than the driver
    allows) each, then let the indexes settle.

    The checks that follow compare index scans with exactly these records, so
    on a driver with eventual indexes they must first have caught up (see
    ``settle_indexes``; a no-op on strong drivers).
    """
    budget = driver.profile.limits.max_transaction_bytes
    for start in range(0, len(records), batch):
        chunk = records[start : start + batch]
        # Split further only where the chunk's documents are more bytes than one transaction may hold.
        parts: list[list[NewStorageRecord]] = [[]]
        size = 0
        for record in chunk:
            if parts[-1] and size + record.document.size > budget:
                parts.append([])
                size = 0
            parts[-1].append(record)
            size += record.document.size
        for part in parts:

            def create(tx: StorageTransaction, part: Sequence[NewStorageRecord] = part) -> None:
                for record in part:
                    tx.create(record)

            driver.transaction(create)
    settle_indexes(driver)


def catalog_records() -> list[NewStorageRecord]:
    """Valid records of every table (the golden document vectors), together carrying every catalogued index.

    Observations come from the stream vectors' materialised records, written here as ordinary point
    creates (the path a driver without native append takes).
    """
    vectors = resources.files("runlane_conformance.fixtures").joinpath("vectors")
    values: list[tuple[str, object]] = []
    for entry in sorted(vectors.joinpath("documents").iterdir(), key=lambda item: item.name):
        data = json.loads(entry.read_text(encoding="utf-8"))
        values.extend((data["table"], case["value"]) for case in data["valid"])
    streams = json.loads(vectors.joinpath("streams.json").read_text(encoding="utf-8"))
    for materialization in streams["materializations"]:
        for record in materialization["records"]:
            values.append((record["key"]["table"], record["document"]["value"]))
    records: dict[str, NewStorageRecord] = {}
    for table, value in values:
        built = build_storage_record(table, value)
        records.setdefault(built.key.encoded, built)
    return list(records.values())


#: How far ``crossed_catalog_records`` moves every date of a template: before 1970 (where an unsigned epoch
#: column wraps), fractions of a second (which a DATETIME(0) column drops) and past 2038 (where a 32-bit
#: timestamp wraps).
CROSSED_SHIFTS = (
    timedelta(days=-365 * 70),
    timedelta(0),
    timedelta(milliseconds=250),
    timedelta(milliseconds=500, microseconds=7),
    timedelta(days=365 * 12),
)
#: Spellings of a template's own name (or run id): case, a high BMP character next to an astral one (their
#: UTF-16 order differs from code point order), and a prefix of the others.
CROSSED_NAMES = ("R", "r", "r\uff5e", "r\U0001f600")
#: Event and step sequences: small, and past the signed and unsigned 32-bit ranges.
CROSSED_SEQUENCES = (1, 2**31, 2**32 + 1)


def _swapped(value: Any, swaps: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return swaps.get(value, value)
    if isinstance(value, dict):
        return {key: _swapped(child, swaps) for key, child in value.items()}
    if isinstance(value, list):
        return [_swapped(child, swaps) for child in value]
    return value


def _moved(value: Any, delta: timedelta) -> Any:
    if isinstance(value, str):
        if iso_date_codec.is_valid(value):
            try:
                return iso_date_codec.encode(iso_date_codec.decode(value) + delta)
            except (StorageError, ValueError, OverflowError):
                return value
        return value
    if isinstance(value, dict):
        return {key: _moved(child, delta) for key, child in value.items()}
    if isinstance(value, list):
        return [_moved(child, delta) for child in value]
    return value


def _derived_again(table: StorageTableName, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with the identities the contract derives from other fields computed again."""
    if table is StorageTableName.STEPS:
        value["token"] = step_token(
            value["environment"], value["runId"], value["stepName"], int(value["sequence"])
        )
    elif table is StorageTableName.SCHEDULES:
        for at, identity in (
            ("nextOccurrenceAt", "nextOccurrenceId"),
            ("lastOccurrenceAt", "lastOccurrenceId"),
        ):
            if isinstance(value.get(at), str):
                value[identity] = schedule_occurrence_id(value["environment"], value["scheduleId"], value[at])
    return value


def _template_name(record: NewStorageRecord) -> str | None:
    """The most specific key component the template's document spells out, other than its environment."""
    value = record.document.value
    fields = {child for child in value.values() if isinstance(child, str)}
    for component in reversed(record.key.id[1:]):
        if component in fields and component != value.get("environment"):
            return component
    return None


@functools.cache
def crossed_catalog_records(environment: str) -> tuple[NewStorageRecord, ...]:
    """Every indexed template of the catalogue moved to ``environment``, crossed with ``CROSSED_NAMES``,
    ``CROSSED_SHIFTS`` and (for events and steps) ``CROSSED_SEQUENCES``: sorts that fall on each side of
    1970 and 2038, differ by fractions of a second, hold astral and high-BMP characters, and tie on
    different keys, in every index of the catalogue at once. Returned in descending key order, so a
    driver that breaks ties by insertion order shows it. Variants the table's rules refuse are left out.
    Cached: every check runs on a fresh store, so checks may share an environment name.
    """
    made: dict[str, NewStorageRecord] = {}
    for number, template in enumerate(catalog_records()):
        if not template.indexes:
            continue
        old_environment = template.document.value.get("environment")
        if not isinstance(old_environment, str):
            continue
        name = _template_name(template)
        table = template.key.table
        base: Any = thaw_json(template.document.value)
        sequences = CROSSED_SEQUENCES if "sequence" in base else (None,)
        for spelling in CROSSED_NAMES:
            for shift, delta in enumerate(CROSSED_SHIFTS):
                swaps = {old_environment: environment}
                if name is not None:
                    swaps[name] = f"{spelling}{shift}-{number}"
                for sequence in sequences:
                    value = _moved(_swapped(base, swaps), delta)
                    if sequence is not None:
                        value["sequence"] = sequence if isinstance(base["sequence"], int) else str(sequence)
                    try:
                        record = build_storage_record(table, _derived_again(table, value))
                    except (StorageError, ValueError, KeyError, TypeError):
                        continue
                    made.setdefault(record.key.encoded, record)
    return tuple(made[key] for key in sorted(made, reverse=True))
