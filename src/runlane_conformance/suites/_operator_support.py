"""Run, event and tombstone builders, and readers for whatever an operator read returns.

The run and completion-wait suites write canonical ``runs``/``events`` records
through the ordinary transaction API, then look at them through the operator
read model or the waiter index. Every builder goes through the table codecs,
so a record a suite writes is one core could have written.

``OperatorReadDriver`` leaves its return types open (``object``), so the
readers here accept the shapes a driver may reasonably hand back: a record
with a ``document`` (a ``StorageDocument`` or a plain mapping) or the run or
event document itself as a mapping; a page with ``items`` and ``cursor`` as
attributes or as mapping keys.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..contract.catalog import StorageTableName
from ..contract.encodings import iso_date_codec
from ..contract.json_boundary import FrozenJsonObject, StorageDocument, thaw_json
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.records import build_storage_record
from ..contract.table_definitions import TERMINAL_RUN_STATUSES, RunStatus, tombstone_for_run
from ..contract.values import NewStorageRecord, StorageRecordKey, StoredRecord

__all__ = [
    "T0",
    "collect_pages",
    "document_of",
    "event_record",
    "event_value",
    "fresh_environment",
    "page_of",
    "read_keys",
    "run_record",
    "run_value",
    "scribble",
    "tombstoned",
    "write",
]

#: Base time of every run a suite builds; offsets make creation order explicit.
T0 = datetime(2031, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)
_ZERO_COUNTS = {"events": "0", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"}


def fresh_environment(prefix: str = "ops") -> str:
    """An environment no other check (or Hypothesis example) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _iso(moment: datetime) -> str:
    return iso_date_codec.encode(moment)


def run_value(
    environment: str,
    run_id: str,
    *,
    status: RunStatus = RunStatus.RUNNING,
    created: int = 0,
    waiting_for: str | None = None,
    events: int = 0,
    note: str = "",
) -> dict[str, Any]:
    """A canonical run document created ``created`` seconds after ``T0``.

    ``note`` lands in nested ``input`` so two otherwise equal summaries can be
    told apart, and nested values give defensive-copy checks something deep.
    """
    created_at = T0 + timedelta(seconds=created)
    terminal = status in TERMINAL_RUN_STATUSES
    return {
        "environment": environment,
        "runId": run_id,
        "workflow": "conformance-wf",
        "status": status.value,
        "input": {"note": note, "nested": {"list": [1, 2, {"deep": "value"}]}},
        "output": {"result": [note]} if terminal else None,
        "error": None,
        "parentRunId": None,
        "waitingForRunId": waiting_for,
        "createdAt": _iso(created_at),
        "updatedAt": _iso(created_at),
        "completedAt": _iso(created_at) if terminal else None,
        "tombstonedAt": None,
        "counts": {**_ZERO_COUNTS, "events": str(events)},
    }


def run_record(environment: str, run_id: str, **fields: Any) -> NewStorageRecord:
    """The run record for ``run_value(environment, run_id, **fields)``."""
    return build_storage_record(StorageTableName.RUNS, run_value(environment, run_id, **fields))


def event_value(environment: str, run_id: str, sequence: int, kind: str = "step") -> dict[str, Any]:
    """Event ``sequence`` of a run; its type and data name the sequence so order mix-ups show."""
    return {
        "environment": environment,
        "runId": run_id,
        "sequence": str(sequence),
        "type": f"{kind}-{sequence}",
        "occurredAt": _iso(T0 + timedelta(milliseconds=sequence)),
        "data": {"sequence": sequence, "payload": {"items": [sequence, "x"]}},
    }


def event_record(environment: str, run_id: str, sequence: int, kind: str = "step") -> NewStorageRecord:
    return build_storage_record(StorageTableName.EVENTS, event_value(environment, run_id, sequence, kind))


def tombstoned(run: Mapping[str, Any], *, after: int = 60) -> tuple[NewStorageRecord, NewStorageRecord]:
    """The tombstoned replacement of a terminal ``run`` and its tombstone record, for one commit."""
    at = T0 + timedelta(seconds=after)
    value = {**run, "tombstonedAt": _iso(at)}
    stone = tombstone_for_run(run, tombstoned_at=at, prune_after=at + timedelta(days=1))
    return (
        build_storage_record(StorageTableName.RUNS, value),
        build_storage_record(StorageTableName.TOMBSTONES, stone),
    )


def write(driver: StorageDriver, *records: NewStorageRecord) -> None:
    """Create ``records`` in one committed transaction, or in as few as the driver's limits allow when
    they are more records or bytes than one transaction may hold (a check's setup, read only after)."""
    from ._mutations_support import batches

    for group in batches(records, driver.profile.limits):

        def callback(tx: StorageTransaction, group: list[NewStorageRecord] = group) -> None:
            for record in group:
                tx.create(record)

        driver.transaction(callback)


def read_keys(driver: StorageDriver, keys: list[StorageRecordKey]) -> list[StoredRecord | None]:
    """Point-read ``keys`` in one committed transaction."""
    return driver.transaction(lambda tx: list(tx.get(keys)))


def document_of(item: object) -> dict[str, Any]:
    """The JSON value of one returned run or event, as a fresh plain dict (for comparing)."""
    inner: object = getattr(item, "document", item)
    if isinstance(item, Mapping) and "document" in item and "runId" not in item:
        inner = item["document"]
    if isinstance(inner, StorageDocument):
        inner = inner.value
    elif isinstance(inner, Mapping) and "value" in inner and "runId" not in inner:
        inner = inner["value"]
    if isinstance(inner, FrozenJsonObject):
        thawed = thaw_json(inner)
    elif isinstance(inner, Mapping):
        thawed = _plain(inner)
    else:
        raise AssertionError(f"an operator read returned {type(item).__name__}, not a run or event record")
    assert isinstance(thawed, dict), (
        f"an operator read's document must thaw to a JSON object, got {type(thawed).__name__}"
    )
    return thawed


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain(child) for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(child) for child in value]
    return value


def page_of(page: object) -> tuple[list[object], str | None]:
    """Items and continuation of one operator list page."""
    if isinstance(page, Mapping):
        items, cursor = page.get("items"), page.get("cursor")
    else:
        items, cursor = getattr(page, "items", None), getattr(page, "cursor", None)
    assert items is not None, f"an operator list returned {type(page).__name__} without items"
    assert cursor is None or isinstance(cursor, str), f"a page cursor is a string or None, not {cursor!r}"
    return list(items), cursor


def collect_pages(fetch: Callable[[str | None], object], *, limit: int, bound: int = 1000) -> list[object]:
    """Every item of a listing, following cursors; each page must respect ``limit``."""
    found: list[object] = []
    cursor: str | None = None
    for _ in range(bound):
        items, cursor = page_of(fetch(cursor))
        assert len(items) <= limit, f"a page of limit {limit} returned {len(items)} items"
        found.extend(items)
        if cursor is None:
            return found
    raise AssertionError(f"a listing did not end within {bound} pages")


def _scribble_mapping(target: MutableMapping[str, Any]) -> None:
    for key, value in list(target.items()):
        if isinstance(value, MutableMapping):
            _scribble_mapping(value)
        elif isinstance(value, MutableSequence):
            value.append("scribbled")
        else:
            target[key] = "scribbled"
    target["scribbled"] = True


def scribble(item: object) -> None:
    """Try to change everything reachable from a returned value; immutable parts simply refuse."""
    candidates: list[object] = [item]
    for name in ("document", "value", "items"):
        try:
            candidates.append(getattr(item, name))
        except Exception:
            continue
    document = getattr(item, "document", None)
    if document is not None:
        candidates.append(getattr(document, "value", None))
    for candidate in candidates:
        if isinstance(candidate, MutableMapping):
            _scribble_mapping(candidate)
        elif isinstance(candidate, MutableSequence):
            for child in list(candidate):
                scribble(child)
            candidate.clear()
        elif isinstance(candidate, Sequence) and not isinstance(candidate, (str, bytes)):
            # An immutable page (a tuple) may still hold mutable runs or events: change each of them.
            for child in candidate:
                scribble(child)
        for name in ("document", "key", "version", "items", "cursor"):
            try:
                setattr(candidate, name, None)
            except Exception:
                continue
