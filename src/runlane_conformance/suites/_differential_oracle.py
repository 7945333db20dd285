"""Running a differential program: each step on the driver under test and on the reference, then compared.

Each step runs on the driver under test and on a fresh reference store
(``runlane_conformance.local``, same limits), strictly one after the other, so
the contract allows exactly one outcome per step: the serial one. Overlapping
(competing) transactions are the one exception: the reference runs both serial
orders from the same state and the driver must match one of them.

Guarantees: every observable is compared (point reads position by position,
the joined pages of each scan, the error family of each failure, and at the
end every touched key, index scope, stream head and the operator read model);
versions are never compared by value, only checked against the contract's
rules on each side; an eventual index is settled before it is compared; the
first mismatch raises ``Divergence`` naming the family, the program up to the
diverging step and both answers in words.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from hypothesis import strategies as st

from runlane_conformance.contract.catalog import (
    StorageCandidateMode,
    StorageIndexName,
    StorageQueryDirection,
)
from runlane_conformance.contract.cursors import parse_query_records_result
from runlane_conformance.contract.errors import (
    StorageCommitUnknownError,
    StorageConflictError,
    StorageCorruptionError,
    StorageCursorError,
    StorageError,
    StorageLimitError,
    StorageUnavailableError,
    StorageUnsupportedError,
    StorageUsageError,
    StorageValidationError,
)
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import indexes_are_eventual, until_store_indexed
from runlane_conformance.fixtures.interleave import Competitor, CompetitorPace, compete
from runlane_conformance.fixtures.records import BASE_TIME
from runlane_conformance.suites._callback_errors import CallbackAbort
from runlane_conformance.suites._cursors_support import ScanItem
from runlane_conformance.suites._differential_programs import (
    COVERAGE,
    JUMPS,
    RAISES,
    READS,
    SCANS,
    SHIFTS,
    Append,
    Boom,
    Compete,
    Divergence,
    Draw,
    Elsewhere,
    Faulted,
    Hold,
    Jump,
    Program,
    Scan,
    Step,
    Transact,
    _cover,
    _decode_sort,
    _key,
)
from runlane_conformance.suites._retries_support import CALLER_ATTEMPTS

# -- running a step on one driver ----------------------------------------------------------------------------

Content = tuple[str, frozenset[Any]] | None


def _content(record: StoredRecord | NewStorageRecord | None) -> Content:
    return None if record is None else (record.document.text, frozenset(record.indexes))


@dataclass(frozen=True)
class Answer:
    """What one driver did with one transaction: the reads it returned, or the kind of error it raised."""

    reads: tuple[Content, ...] | None
    versions: tuple[str | None, ...]
    error: str | None

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {self.error}"
        shown = [_describe_content(content) for content in self.reads or ()]
        return f"committed, having read {shown}"


def _describe_content(content: Content) -> str:
    if content is None:
        return "absent"
    text, indexes = content
    return f"{text[:160]}{'...' if len(text) > 160 else ''} with {len(indexes)} index entries"


_ERROR_KINDS: tuple[type[BaseException], ...] = (
    StorageConflictError,
    StorageLimitError,
    StorageCursorError,
    StorageValidationError,
    StorageUnsupportedError,
    StorageCorruptionError,
    StorageUsageError,
    StorageCommitUnknownError,
    StorageUnavailableError,
    Boom,
    CallbackAbort,
)


def error_kind(error: BaseException) -> str:
    """The contract's name for what ``error`` means: its family, never its message or driver class."""
    for kind in _ERROR_KINDS:
        if isinstance(error, kind):
            return kind.__name__
    return f"{type(error).__name__} (not a contract error)"


def run_transact(
    driver: StorageDriver, step: Transact, *, after_reads: Callable[[int], None] | None = None
) -> Answer:
    """``step`` as one callback on ``driver``; errors (any ``BaseException``) become their kind.
    ``after_reads(attempt)`` runs in each attempt between the reads and the writes (attempts count
    from 1)."""
    keys = [s.template.key for s in step.read_slots]
    attempts = [0]

    def body(tx: StorageTransaction) -> list[StoredRecord | None]:
        attempts[0] += 1
        got = list(tx.get(keys)) if keys else []
        if after_reads is not None:
            after_reads(attempts[0])
        # The attempt's time seals the reads; a driver that keys housekeeping (expiry, retention) on the
        # attempt times it has seen now sees the injected clock's jumps.
        tx.now()
        current = {key.encoded: record for key, record in zip(keys, got, strict=True)}
        for write in step.writes:
            existing = current.get(write.record.key.encoded)
            if write.kind == "blind" or (write.kind == "put" and existing is None):
                tx.create(write.record)
            elif write.kind == "put" and existing is not None:
                tx.replace(existing, write.record)
            elif existing is not None:
                tx.delete(existing)
        if step.raises is not None:
            raise RAISES[step.raises]("the callback raised on purpose")
        return got

    try:
        got = driver.transaction(body)
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return Answer(None, (), error_kind(error))
    return Answer(
        tuple(_content(record) for record in got),
        tuple(None if record is None else record.version.value for record in got),
        None,
    )


def _candidates(tx: StorageTransaction, *, command: QueryRecordsCommand, mode: StorageCandidateMode) -> Any:
    return tx.query_candidates(command, mode=mode)


def run_scan(
    driver: StorageDriver, step: Scan, *, max_pages: int, family: str = SCANS
) -> tuple[list[ScanItem], list[int]]:
    """Every page of ``step`` joined, and each page's size; each page read in its own attempt."""
    command = step.command()
    items: list[ScanItem] = []
    sizes: list[int] = []
    current = command
    mode = StorageCandidateMode.EXCLUSIVE if step.via == "exclusive" else StorageCandidateMode.ADVISORY
    for _ in range(max_pages):
        if step.via == "query":
            raw: object = driver.query(current)
        else:
            page_command = current
            raw = driver.transaction(functools.partial(_candidates, command=page_command, mode=mode))
        try:
            page = parse_query_records_result(current, raw)
        except StorageError as error:
            raise Divergence(
                family,
                f"{step}: a page broke the query contract ({error_kind(error)}: {error})",
            ) from None
        assert len(page.items) <= step.limit, (
            f"a page of limit {step.limit} returned {len(page.items)} references"
        )
        items.extend((item.sort, item.key.encoded) for item in page.items)
        sizes.append(len(page.items))
        if page.cursor is None:
            return items, sizes
        current = command.with_cursor(page.cursor)
    raise Divergence(family, f"{step} did not end within {max_pages} pages: the cursors never run out")


# -- the clock -----------------------------------------------------------------------------------------------


@dataclass
class InjectedClock:
    """The clock every instance of both stores is connected with; only the program moves it."""

    at: datetime = BASE_TIME

    def __call__(self) -> datetime:
        return self.at


# -- the differential run ------------------------------------------------------------------------------------


@dataclass
class Sides:
    """The driver under test (several instances on one store) and the reference (one instance)."""

    tested: Sequence[StorageDriver]
    reference: StorageDriver
    store: object
    reference_store: object
    clock: InjectedClock
    history: list[str] = field(default_factory=list)
    versions: dict[str, set[str]] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    keys: dict[str, Any] = field(default_factory=dict)
    scopes: set[tuple[StorageIndexName, str]] = field(default_factory=set)

    def fail(self, family: str, what: str, tested: str, reference: str) -> Divergence:
        program = "\n".join(f"  step {n}: {line}" for n, line in enumerate(self.history, 1))
        return Divergence(
            family,
            f"{what}\nthe driver under test: {tested}\nthe one serial outcome (reference driver): "
            f"{reference}\nthe program, up to the step that diverged (step {len(self.history)}):\n{program}",
        )


def _check_versions(sides: Sides, step: Transact, answer: Answer) -> None:
    """The driver's own versions follow the contract's rules; their values are never compared."""
    assert answer.reads is not None, (
        f"step {step!r} committed but its answer holds no reads to judge versions by"
    )
    _judge_versions(
        sides,
        [
            (_key(slot), str(slot), version)
            for slot, version in zip(step.read_slots, answer.versions, strict=True)
        ],
    )


def _judge_versions(sides: Sides, reads: Sequence[tuple[str, str, str | None]]) -> None:
    """``reads`` (key, its name, the version read) of one committed read, judged by the version rules."""
    within: dict[str, str | None] = {}
    for key, slot, version in reads:
        if key in within and within[key] != version:
            raise sides.fail(
                READS,
                f"one get() returned two versions for {slot}",
                f"{within[key]} and {version}",
                "one version per key within a read",
            )
        within[key] = version
    for key, version in within.items():
        if version is None:
            sides.current.pop(key, None)
            continue
        seen = sides.versions.setdefault(key, set())
        if key in sides.dirty or key not in sides.current:
            if version in seen:
                raise sides.fail(
                    READS,
                    f"a commit wrote {key} but the record came back with version {version}, which this key "
                    "already had: every commit that writes a record gives it a new version",
                    f"version {version} again",
                    "a version never handed out for this key before",
                )
        elif sides.current[key] != version:
            raise sides.fail(
                READS,
                f"{key} changed version from {sides.current[key]} to {version} though nothing wrote it",
                f"version {version}",
                f"version {sides.current[key]} (unchanged record, unchanged version)",
            )
        seen.add(version)
        sides.current[key] = version
        sides.dirty.discard(key)


def do_transact(
    sides: Sides,
    step: Transact,
    pace: CompetitorPace | None = None,
    *,
    elsewhere: Callable[[Transact], Answer] | None = None,
) -> None:
    """``step`` on the reference and on the driver under test (on one of its instances here, or through
    ``elsewhere``: an instance in another OS process); one serial outcome, compared whole."""
    expected = run_transact(sides.reference, step)
    tested = sides.tested[step.instance]
    # An uncontended transaction's time paces how long a competitor may run before it counts as
    # made to wait (a locking driver then costs a few of these per competing step, not a second).
    if elsewhere is not None:
        got = elsewhere(step)
    elif pace is None:
        got = run_transact(tested, step)
    else:
        got = pace.timed(lambda: run_transact(tested, step))
    _cover(
        READS,
        process="this process" if elsewhere is None else "another OS process",
        fault="none",
        instance=step.instance,
        outcome=expected.error or "committed",
        raises=step.raises or "no",
        shapes="+".join(sorted({w.shape for w in step.writes})) or "read-only",
        tables="+".join(sorted({w.slot.table.value for w in step.writes})) or "none",
    )
    for write in step.writes:
        _cover(
            READS,
            table=write.slot.table.value,
            write=write.kind,
            shape=write.shape,
            shift=SHIFTS[write.slot.shift][0],
        )
    if got.error != expected.error or got.reads != expected.reads:
        raise sides.fail(READS, "a transaction's outcome differs", got.describe(), expected.describe())
    if got.error is None:
        _check_versions(sides, step, got)
        for write in step.writes:
            key = write.record.key.encoded
            sides.keys[key] = write.record.key
            sides.dirty.add(key)
            sides.scopes.update((entry.index, entry.partition) for entry in write.record.indexes)


def run_append(driver: StorageDriver, step: Append, tag: str) -> Answer:
    """``step`` as one callback on ``driver``: committed, or the kind of error it raised."""
    command = step.command(tag)

    def body(tx: StorageTransaction) -> list[StoredRecord | None]:
        # An appending attempt may not read the stream it appends to: the head is judged afterwards,
        # by the read-back of every key the program touched.
        got: list[StoredRecord | None] = []
        tx.append(command)
        if step.raises is not None:
            raise RAISES[step.raises]("the callback raised on purpose")
        return got

    try:
        got = driver.transaction(body)
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return Answer(None, (), error_kind(error))
    return Answer(
        tuple(_content(record) for record in got),
        tuple(None if record is None else record.version.value for record in got),
        None,
    )


def do_append(sides: Sides, step: Append) -> None:
    """The append on both sides: same head read, same error kind; what it placed (its records and the new
    head) joins the keys and scopes the read-back compares."""
    from runlane_conformance.contract.streams import materialize_storage_append, read_storage_stream_position
    from runlane_conformance.suites._append_support import LAYOUT, OBSERVATIONS

    tag = f"a{len(sides.history)}"
    expected = run_append(sides.reference, step, tag)
    got = run_append(sides.tested[step.instance], step, tag)
    _cover(
        READS,
        instance=step.instance,
        append=expected.error or "committed",
        raises=step.raises or "no",
        table="stream_heads",
        write="append",
    )
    if got.error != expected.error or got.reads != expected.reads:
        raise sides.fail(READS, "an append's outcome differs", got.describe(), expected.describe())
    if got.error is not None:
        return
    command = step.command(tag)
    head_key = LAYOUT.head_key(command.partition)
    head = _read_all(sides.reference, [head_key])[0]
    # The reference has committed: its head now says where the batch ended, so where it began.
    end = read_storage_stream_position(OBSERVATIONS, command.partition, head)
    placed = materialize_storage_append(command, end - step.count)
    for record in (*placed.records, placed.head):
        sides.keys[record.key.encoded] = record.key
        sides.dirty.add(record.key.encoded)
        sides.scopes.update((entry.index, entry.partition) for entry in record.indexes)


def _read_all(driver: StorageDriver, keys: Sequence[Any]) -> list[StoredRecord | None]:
    return list(driver.transaction(lambda tx: list(tx.get(keys))))


def _restore(driver: StorageDriver, keys: Sequence[Any], wanted: Sequence[StoredRecord | None]) -> None:
    """Write ``wanted`` (contents read earlier) back over ``keys``: the reference's way to try the other
    serial order from the same state (versions move on, which the oracle never compares)."""

    def body(tx: StorageTransaction) -> None:
        for now, want in zip(tx.get(keys), wanted, strict=True):
            if _content(now) == _content(want):
                continue
            if want is None:
                assert now is not None, "a record that differs from an absent one is present"
                tx.delete(now)
                continue
            record = NewStorageRecord(want.key, want.document, want.indexes)
            if now is None:
                tx.create(record)
            else:
                tx.replace(now, record)

    driver.transaction(body)


def _outcome(answer: Answer) -> tuple[str | None, tuple[Content, ...] | None]:
    return answer.error, answer.reads


_CONFLICT = StorageConflictError.__name__


def do_compete(sides: Sides, step: Compete, pace: CompetitorPace) -> None:
    """Run ``step`` overlapped on the driver under test; its answers and the state it leaves must be one
    of the two serial orders', both computed on the reference from the same state."""
    first, second = step.first, step.second
    keys = list(
        {
            slot.template.key.encoded: slot.template.key
            for transact in (first, second)
            for slot in (*transact.read_slots, *(write.slot for write in transact.writes))
        }.values()
    )
    reference = sides.reference
    before = _read_all(reference, keys)
    one_two = (run_transact(reference, first), run_transact(reference, second))
    after_one_two = _read_all(reference, keys)
    _restore(reference, keys, before)
    second_alone = run_transact(reference, second)
    two_one = (run_transact(reference, first), second_alone)
    after_two_one = _read_all(reference, keys)
    serial = {
        "first, then second": (one_two, after_one_two),
        "second, then first": (two_one, after_two_one),
    }
    tested_second = sides.tested[second.instance]
    competitor: list[Competitor[Answer]] = []

    def start_second(attempt: int) -> None:
        if attempt == 1:
            competitor.append(compete(lambda: run_transact(tested_second, second), grace=pace.grace()))
            pace.note(competitor[0].finished_while_open)

    tested_first = sides.tested[first.instance]
    got_first = run_transact(tested_first, first, after_reads=start_second)
    got_second = competitor[0].settle() if competitor else run_transact(tested_second, second)
    # A typed conflict ends a raced attempt; core then runs the whole transaction again (the contract
    # lets a provider replay, never obliges it to). Retried only once a competitor ran, bounded by count.
    for _ in range(CALLER_ATTEMPTS - 1):
        if not competitor or _CONFLICT not in (got_first.error, got_second.error):
            break
        if got_first.error == _CONFLICT:
            got_first = run_transact(tested_first, first)
        if got_second.error == _CONFLICT:
            got_second = run_transact(tested_second, second)
    observer = sides.tested[(first.instance + second.instance) % len(sides.tested)]
    state = [_content(record) for record in _read_all(observer, keys)]
    matched = [
        order
        for order, ((one, two), after) in serial.items()
        if (_outcome(got_first), _outcome(got_second)) == (_outcome(one), _outcome(two))
        and state == [_content(record) for record in after]
    ]
    _cover(READS, compete=step.kind, order=matched[0] if matched else "none")
    for write in (*first.writes, *second.writes):
        _cover(
            READS,
            table=write.slot.table.value,
            write=write.kind,
            shape=write.shape,
            shift=SHIFTS[write.slot.shift][0],
        )
    if not matched:

        def describe(one: Answer, two: Answer, after: Sequence[Content]) -> str:
            return (
                f"first {one.describe()}; second {two.describe()}; then "
                f"{[_describe_content(content) for content in after]}"
            )

        raise sides.fail(
            READS,
            "two overlapping transactions ended in neither serial order's outcome",
            describe(got_first, got_second, state),
            " or ".join(
                f"({order}) " + describe(one, two, [_content(record) for record in after])
                for order, ((one, two), after) in serial.items()
            ),
        )
    if matched[0] == "first, then second":
        _restore(reference, keys, after_one_two)
    for answer, transact in ((got_first, first), (got_second, second)):
        if answer.error is None:
            for write in transact.writes:
                key = write.record.key.encoded
                sides.keys[key] = write.record.key
                sides.dirty.add(key)
                sides.scopes.update((entry.index, entry.partition) for entry in write.record.indexes)


def do_scan(sides: Sides, step: Scan, *, eventual: bool, cover: bool = True) -> None:
    expected, _ = run_scan(sides.reference, step, max_pages=10_000)
    bound = len(expected) + 2

    def compare() -> None:
        got, sizes = run_scan(sides.tested[step.instance], step, max_pages=bound)
        if got != expected:
            raise sides.fail(
                SCANS,
                "the scan's pages, joined, differ from the one right answer",
                _describe_scan(got),
                _describe_scan(expected),
            )
        for position in range(len(sizes) if cover else 0):
            _cover(
                SCANS,
                page=("first" if position == 0 else "later")
                + ("-last" if position == len(sizes) - 1 else ""),
            )

    until_store_indexed(sides.store, compare, eventual=eventual)
    if not cover:
        return
    _cover(
        SCANS,
        process="this process",
        fault="none",
        instance=step.instance,
        index=step.index.value,
        direction=step.direction.value,
        via=step.via,
        range=f"{_end(step.range.lower)}..{_end(step.range.upper)}",
    )


def _variants(step: Scan) -> tuple[Scan, ...]:
    """The drawn scan, the same scope the other way round, and the same scope one entry per page.

    Running a scope three ways costs far less than drawing three scans, and every scope with two
    entries then has a second page in both directions, where paging and ordering bugs hide.
    """
    other = (
        StorageQueryDirection.DESCENDING
        if step.direction is StorageQueryDirection.ASCENDING
        else StorageQueryDirection.ASCENDING
    )
    return (
        step,
        replace(step, direction=other),
        replace(step, limit=1, direction=other if step.limit == 1 else step.direction),
    )


def _end(bound: StorageRangeBound | None) -> str:
    return "open" if bound is None else ("inclusive" if bound.inclusive else "exclusive")


def _describe_scan(items: Sequence[ScanItem]) -> str:
    from runlane_conformance.contract.encodings import storage_record_key_codec

    shown = []
    for sort, key in items[:12]:
        try:
            table, parts = storage_record_key_codec.decode_parts(key)
            name = f"{table}{parts!r}"
        except (StorageError, ValueError):
            name = key
        shown.append(f"{name} at {_decode_sort(sort)}")
    more = f" and {len(items) - 12} more" if len(items) > 12 else ""
    return f"{len(items)} references: {shown}{more}"


def compare_everything(
    sides: Sides,
    *,
    eventual: bool,
    limits: StorageLimits,
    scans: bool = True,
    points: bool = True,
    pages: Sequence[int] = (1,),
) -> None:
    """Every key and every index scope the program touched, read back on each instance of the driver.

    ``points=False`` (the scans family) leaves out the point reads and operator reads: a divergence
    there is the reads family's to report, so reading them twice would only cost time."""
    keys = list(sides.keys.values()) if points else []
    for driver in (*sides.tested, sides.reference):
        driver.transaction(lambda tx: tx.now())  # every instance has now lived through the last jump
    chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records))
    for instance, driver in enumerate(sides.tested):
        for start in range(0, len(keys), chunk):
            part = keys[start : start + chunk]

            def read(tx: StorageTransaction, part: Sequence[Any] = part) -> list[StoredRecord | None]:
                found = list(tx.get(part))
                tx.now()
                return found

            records = driver.transaction(read)
            got = [_content(r) for r in records]
            expected = [_content(r) for r in sides.reference.transaction(read)]
            _judge_versions(
                sides,
                [
                    (
                        key.encoded,
                        f"{key.table.value}{tuple(key.id)!r}",
                        None if r is None else r.version.value,
                    )
                    for key, r in zip(part, records, strict=True)
                ],
            )
            for key, mine, theirs in zip(part, got, expected, strict=True):
                if mine != theirs:
                    raise sides.fail(
                        READS,
                        f"after the program, instance {instance} reads {key.table.value}{tuple(key.id)!r} "
                        "differently from the store's logical content",
                        _describe_content(mine),
                        _describe_content(theirs),
                    )
        if points:
            _cover(READS, readback=f"instance {instance}")
    if points:
        _compare_operator_reads(sides, eventual=eventual)
    if not scans:
        return
    # One entry per page: every scope holding two entries then continues a cursor in both directions;
    # a larger page then puts several entries (ties among them) in one page, in both directions.
    for index, partition in sorted(sides.scopes):
        for page in pages:
            for direction in StorageQueryDirection:
                step = Scan(
                    len(sides.tested) - 1, index, partition, StorageQueryRange(), direction, page, "query"
                )
                do_scan(sides, step, eventual=eventual, cover=False)
        _cover(SCANS, **{"readback index": index.value})


def _operator_view(
    driver: StorageDriver, environments: Sequence[str], runs: Sequence[tuple[str, str]]
) -> Any:
    """What the operator read model shows of ``environments`` and ``runs``: each environment's runs
    listed (pages of 2), and each run's own read and its events listed (pages of 2)."""
    from runlane_conformance.suites._operator_support import collect_pages, document_of

    operator: Any = driver
    page = max(1, min(2, driver.profile.limits.max_query_results))
    view: list[object] = []

    def runs_of(environment: str) -> Callable[[str | None], object]:
        return lambda cursor: operator.list_runs(environment, limit=page, cursor=cursor)

    def events_of(environment: str, run_id: str) -> Callable[[str | None], object]:
        return lambda cursor: operator.list_run_events(environment, run_id, limit=page, cursor=cursor)

    for environment in environments:
        listed = collect_pages(runs_of(environment), limit=page)
        view.append(("list_runs", environment, [document_of(item) for item in listed]))
    for environment, run_id in runs:
        found = operator.get_run(environment, run_id)
        view.append(("get_run", environment, run_id, None if found is None else document_of(found)))
        events = collect_pages(events_of(environment, run_id), limit=page)
        view.append(("list_run_events", environment, run_id, [document_of(item) for item in events]))
    return view


def _offers_operator_reads(driver: StorageDriver) -> bool:
    return all(callable(getattr(driver, name, None)) for name in ("get_run", "list_runs", "list_run_events"))


def _compare_operator_reads(sides: Sides, *, eventual: bool) -> None:
    """Where both drivers offer operator reads: every environment and run the program touched reads the
    same through them on each instance as on the reference (settled first on an eventual index)."""
    if not (_offers_operator_reads(sides.reference) and all(map(_offers_operator_reads, sides.tested))):
        return
    from runlane_conformance.contract.catalog import StorageTableName as Table

    runs = sorted(
        {
            (str(key.id[0]), str(key.id[1]))
            for key in sides.keys.values()
            if key.table in (Table.RUNS, Table.EVENTS, Table.TOMBSTONES) and len(key.id) >= 2
        }
    )
    environments = sorted({environment for environment, _ in runs})
    if not runs:
        return
    expected = _operator_view(sides.reference, environments, runs)
    for instance, driver in enumerate(sides.tested):

        def compare(driver: StorageDriver = driver, instance: int = instance) -> None:
            got = _operator_view(driver, environments, runs)
            for mine, theirs in zip(got, expected, strict=True):
                if mine != theirs:
                    raise sides.fail(
                        READS,
                        f"after the program, instance {instance}'s operator read {theirs[0]} of "
                        f"{theirs[1:-1]!r} differs",
                        repr(mine[-1])[:400],
                        repr(theirs[-1])[:400],
                    )

        until_store_indexed(sides.store, compare, eventual=eventual)
        _cover(READS, operator=f"instance {instance}")


def run_program(
    open_tested: Callable[[InjectedClock], tuple[object, Sequence[StorageDriver]]],
    open_reference: Callable[[InjectedClock, StorageLimits], tuple[object, StorageDriver]],
    draw: Draw,
    *,
    steps: int,
    instances: int,
    family_filter: str | None = None,
    worker_for: Callable[[object], Any] | None = None,
    crossing: Any = None,
) -> Iterator[str]:
    """Run one random program of ``steps`` steps; yields each step's description as it runs.

    Raises ``Divergence`` at the first step whose answers differ.
    """
    clock = InjectedClock()
    store, tested = open_tested(clock)
    limits = tested[0].profile.limits
    reference_store, reference = open_reference(clock, limits)
    sides = Sides(tested, reference, store, reference_store, clock)
    eventual = indexes_are_eventual(tested[0])
    # A worker in another OS process, attached to the store by its address, where it has one.
    worker = None if worker_for is None else worker_for(store)
    from runlane_conformance.harness import FaultHookStore

    # The faulted steps need an instance whose exchanges pass a hook the workload owns; only the reads
    # family judges them (the scans family would run the same steps again for nothing).
    # ``crossing`` (the ``_differential_faults`` module, passed in to keep the imports acyclic) runs
    # the faulted, held and elsewhere steps; without it none is drawn.
    hook = None if crossing is None else crossing.FaultPoint()
    faulty = (
        store.connect_with_faults(hook, clock=clock)
        if hook is not None and isinstance(store, FaultHookStore) and family_filter != SCANS
        else None
    )
    program = Program(
        instances,
        limits,
        bool(tested[0].profile.exclusive_candidates),
        append=bool(tested[0].profile.append) and bool(reference.profile.append),
        faults=faulty is not None,
        elsewhere=worker is not None,
    )
    pace = CompetitorPace()

    def run(step: Step) -> None:
        if isinstance(step, Faulted):
            assert faulty is not None, "a faulted step is drawn only where the store offers a fault hook"
            crossing.do_faulted(sides, step, faulty, hook, pace)
        elif isinstance(step, Hold):
            if family_filter != READS and crossing is not None:
                crossing.do_hold(sides, step, pace)
        elif isinstance(step, Elsewhere):
            crossing.do_elsewhere(sides, step, worker)
        elif isinstance(step, Jump):
            clock.at += JUMPS[step.name]
            _cover(READS, jump=step.name)
            _cover(SCANS, jump=step.name)
        elif isinstance(step, Transact):
            do_transact(sides, step, pace)
        elif isinstance(step, Compete):
            do_compete(sides, step, pace)
        elif isinstance(step, Append):
            do_append(sides, step)
        elif family_filter != READS:
            for variant in _variants(step):
                do_scan(sides, variant, eventual=eventual)
            _cover(SCANS, repeated="yes" if step.repeated else "no")
        program.note(step)

    for number in itertools.count(1):
        if number > steps:
            break
        step = draw(program.steps)
        sides.history.append(str(step))
        yield str(step)
        run(step)
    for step in draw(program.sweeps):
        sides.history.append(f"(sweep) {step}")
        yield str(step)
        run(step)
    # Pages of one, and of two or three where the advertised limit allows pages that long.
    longest = min(3, limits.max_query_results)
    pages = (1,) if longest < 2 else (1, draw(st.integers(2, longest)))
    # Read back decades later: nothing the contract keeps may expire, whatever dates it carries.
    clock.at += JUMPS["years"]
    sides.history.append(
        "(after the program, the clock decades later) every touched key and index scope read back"
    )
    compare_everything(
        sides,
        eventual=eventual,
        limits=limits,
        scans=family_filter != READS,
        points=family_filter != SCANS,
        pages=pages,
    )


def coverage_json() -> str:
    return json.dumps(sorted([[*cell, count] for cell, count in COVERAGE.items()]))
