"""Builders and readers shared by the pruning and wait-token suites.

Runs, children, tokens and links are written only through the core slices
(``runlane_conformance.core``), in transactions sized to the driver's
advertised limits, so a suite exercises exactly the work core would give the
driver. Readers compare what the driver stores with what the suite built:
counters against the children that really exist (point reads, never index
pages), and index scans against the entries the stored records must carry.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..contract.catalog import StorageIndexName
from ..contract.cursors import parse_query_records_result
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.table_definitions import (
    event_record_key,
    outbox_message_record_key,
    owner_record_key,
    run_record_key,
    step_record_key,
    step_token,
    tombstone_record_key,
    wait_token_link_record_key,
    wait_token_record_key,
)
from ..contract.tables import get_storage_table
from ..contract.values import QueryRecordsCommand, StorageRecordKey, StoredRecord
from ..core.pruning import CleanupPass, prune_run
from ..core.runs import ChildKind, RunChildren, add_run_children, child_counts, create_run, finish_run
from ..core.wait_tokens import WaitTokenSpec, create_wait_token, link_run
from ..fixtures.convergence import index_waiter
from ..fixtures.interleave import Competitor, compete

__all__ = [
    "BuiltRun",
    "build_run",
    "counted_children",
    "fresh_environment",
    "index_scan",
    "make_token",
    "owner_key_of",
    "prune_fully",
    "read_all",
    "start_rival",
    "stored_entries",
    "token_spec",
    "tombstone_counts",
]

T = TypeVar("T")

#: How long a rival transaction gets to enter its callback, and then to finish, before the first goes on.
RIVAL_START_GRACE = 0.05
RIVAL_FINISH_GRACE = 1.0

#: Rough upper bounds on one child document and one run document, for sizing write batches.
_CHILD_BYTES = 800
_RUN_BYTES = 1200


def fresh_environment(prefix: str) -> str:
    """An environment no other check (or Hypothesis example) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def read_all(driver: StorageDriver, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
    """Point-read ``keys`` in as many read-only transactions as the driver's limits need."""
    limits = driver.profile.limits
    chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records))
    found: list[StoredRecord | None] = []
    for start in range(0, len(keys), chunk):
        part = list(keys[start : start + chunk])
        found.extend(driver.transaction(lambda tx, part=part: tx.get(part)))  # type: ignore[misc]
    return found


def _batch(driver: StorageDriver) -> int:
    """How many children one ``add_run_children`` commit may create within the advertised limits."""
    limits = driver.profile.limits
    by_bytes = (limits.max_transaction_bytes - _RUN_BYTES) // _CHILD_BYTES
    return max(1, min(limits.max_transaction_records - 1, by_bytes, 50))


def token_spec(environment: str, token_id: str, creator: str, **fields: object) -> WaitTokenSpec:
    """A token spec whose idempotency key is derived from the token id (one key per token)."""
    return WaitTokenSpec(environment, token_id, creator, f"key-{token_id}", **fields)  # type: ignore[arg-type]


def make_token(driver: StorageDriver, spec: WaitTokenSpec) -> str:
    return driver.transaction(lambda tx: create_wait_token(tx, spec))


@dataclass(frozen=True)
class BuiltRun:
    """A run a suite built, and every child record key it created for it, by kind."""

    environment: str
    run_id: str
    children: dict[ChildKind, tuple[StorageRecordKey, ...]] = field(default_factory=dict)
    tokens: tuple[str, ...] = ()

    @property
    def key(self) -> StorageRecordKey:
        return run_record_key(self.environment, self.run_id)

    @property
    def tombstone_key(self) -> StorageRecordKey:
        return tombstone_record_key(self.environment, self.run_id)

    @property
    def all_children(self) -> list[StorageRecordKey]:
        return [key for kind in ChildKind for key in self.children.get(kind, ())]

    @property
    def token_keys(self) -> list[StorageRecordKey]:
        return [wait_token_record_key(self.environment, token) for token in self.tokens]


def build_run(
    driver: StorageDriver,
    environment: str,
    run_id: str,
    *,
    events: int = 0,
    steps: int = 0,
    outbox: int = 0,
    tokens: Iterable[str] = (),
    finish: bool = True,
    parent: str | None = None,
) -> BuiltRun:
    """Create a run (a child of ``parent`` when given), its children (batched to the limits) and links
    to ``tokens`` (created if new)."""
    driver.transaction(lambda tx: create_run(tx, environment, run_id, parent_run_id=parent))
    batch = _batch(driver)
    plan = [RunChildren(events=1)] * events
    plan += [RunChildren(steps=(f"step-{n}",)) for n in range(steps)]
    plan += [RunChildren(outbox_messages=(f"message-{n}",)) for n in range(outbox)]
    for start in range(0, len(plan), batch):
        part = plan[start : start + batch]
        merged = RunChildren(
            events=sum(item.events for item in part),
            steps=tuple(name for item in part for name in item.steps),
            outbox_messages=tuple(name for item in part for name in item.outbox_messages),
        )
        driver.transaction(lambda tx, merged=merged: add_run_children(tx, environment, run_id, merged))  # type: ignore[misc]
    token_ids = tuple(tokens)
    for token in token_ids:
        spec = token_spec(environment, token, run_id)
        make_token(driver, spec)
        driver.transaction(lambda tx, token=token: link_run(tx, environment, token, run_id))  # type: ignore[misc]
    if finish:
        driver.transaction(lambda tx: finish_run(tx, environment, run_id))
    children = {
        ChildKind.EVENTS: tuple(event_record_key(environment, run_id, n) for n in range(1, events + 1)),
        ChildKind.STEPS: tuple(
            step_record_key(environment, run_id, step_token(environment, run_id, f"step-{n}", 1))
            for n in range(steps)
        ),
        ChildKind.OUTBOX_MESSAGES: tuple(
            outbox_message_record_key(environment, run_id, f"message-{n}") for n in range(outbox)
        ),
        ChildKind.WAIT_TOKEN_LINKS: tuple(
            wait_token_link_record_key(environment, token, run_id) for token in token_ids
        ),
    }
    return BuiltRun(environment, run_id, children, token_ids)


def counted_children(driver: StorageDriver, built: BuiltRun) -> dict[ChildKind, int]:
    """How many of the run's children still exist, by kind (point reads)."""
    present = read_all(driver, built.all_children)
    found = iter(present)
    return {
        kind: sum(1 for _ in built.children.get(kind, ()) if next(found) is not None) for kind in ChildKind
    }


def prune_fully(driver: StorageDriver, environment: str, run_id: str) -> list[CleanupPass]:
    """Cleanup passes until the run is gone, letting an eventual index catch up (boundedly) on stalls."""
    waiter = index_waiter(driver)
    return prune_run(driver, environment, run_id, wait_for_index=waiter, max_stalls=waiter.max_calls)


def index_scan(
    driver: StorageDriver, index: StorageIndexName, environment: str
) -> dict[str, list[tuple[str, str]]]:
    """Every (sort, encoded key) of one index partition, via ``query`` and via ``query_candidates``."""
    limit = min(50, driver.profile.limits.max_query_results)
    command = QueryRecordsCommand(index, environment, limit)

    def candidates(current: QueryRecordsCommand) -> object:
        return driver.transaction(lambda tx: tx.query_candidates(current))

    readers: dict[str, Callable[[QueryRecordsCommand], object]] = {
        "query": driver.query,
        "query_candidates": candidates,
    }
    scans: dict[str, list[tuple[str, str]]] = {}
    for name, read in readers.items():
        items: list[tuple[str, str]] = []
        current = command
        for _page in range(1000):
            page = parse_query_records_result(current, read(current))
            items.extend((item.sort, item.key.encoded) for item in page.items)
            if page.cursor is None:
                break
            current = command.with_cursor(page.cursor)
        scans[name] = items
    return scans


def stored_entries(records: Iterable[StoredRecord | None], index: StorageIndexName) -> list[tuple[str, str]]:
    """The (sort, encoded key) entries that ``index`` must hold for these stored records, in index order.

    Derived from each record's document with its table's codec, so an entry a
    driver dropped, kept after a change, or filed under a stale sort shows as
    a difference against the scan.
    """
    entries = []
    for record in records:
        if record is None:
            continue
        table = get_storage_table(record.key.table)
        for entry in table.derive_indexes(record.document.value):
            if entry.index is index:
                entries.append((entry.sort, record.key.encoded))
    return sorted(entries)


def owner_key_of(environment: str, token: str) -> StorageRecordKey:
    return owner_record_key(environment, "wait_token", f"key-{token}")


def tombstone_counts(driver: StorageDriver, built: BuiltRun) -> dict[ChildKind, int] | None:
    [stone] = read_all(driver, [built.tombstone_key])
    return None if stone is None else child_counts(stone)


def start_rival(other: StorageDriver, callback: Callable[[StorageTransaction], T]) -> Competitor[T]:
    """Start ``callback`` as a transaction on ``other`` from inside a first transaction, boundedly.

    An optimistic driver lets the rival enter its callback at once, and it is
    then given ``RIVAL_FINISH_GRACE`` to commit, so the interleaving is the
    same on every run. A locking driver keeps it from even starting while
    the first transaction holds its lock; after ``RIVAL_START_GRACE`` the
    first transaction goes on, and the rival's outcome is collected once it
    ended (``Competitor.outcome``). Either order is serializable; the checks
    judge the outcome, not the order.
    """
    entered = threading.Event()

    def body(tx: StorageTransaction) -> T:
        entered.set()
        return callback(tx)

    rival = compete(lambda: other.transaction(body), grace=0)
    if entered.wait(RIVAL_START_GRACE):
        rival.wait_briefly(RIVAL_FINISH_GRACE)
    return rival
