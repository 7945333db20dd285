"""StorageAttemptRules: the per-attempt rules every driver shares, checked without any storage."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runlane_conformance import (
    NewStorageRecord,
    StorageAttemptEndedError,
    StorageAttemptRules,
    StorageCandidateMode,
    StorageConcurrentUseError,
    StorageDuplicateMutationError,
    StorageIndexName,
    StorageKeyChangeError,
    StorageLimitError,
    StorageLimits,
    StorageQueryRange,
    StorageRecordKey,
    StorageRecordVersion,
    StorageSealedError,
    StorageUsageError,
    StorageValidationError,
    StoredRecord,
    parse_append_records_command,
    storage_stream_layouts,
)
from runlane_conformance.contract.streams import AppendRecordsCommand, StorageStreamName
from runlane_conformance.contract.values import QueryRecordsCommand

from .helpers import lease_record
from .test_records import raw_record

T0 = datetime(2024, 1, 1, tzinfo=UTC)
LAYOUT = storage_stream_layouts[StorageStreamName.OBSERVATIONS]


class Ticking:
    """A clock that moves one second per call, so a second sample would be visible."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return T0 + timedelta(seconds=self.calls)


def rules(limits: StorageLimits | None = None, clock: Any = None) -> StorageAttemptRules:
    return StorageAttemptRules(limits or StorageLimits(), clock or Ticking())


def stored(name: str = "lease-1", version: str = "1") -> StoredRecord:
    return StoredRecord.committed(lease_record(name), StorageRecordVersion(version))


def key(name: str = "lease-1") -> StorageRecordKey:
    return lease_record(name).key


def read(attempt: StorageAttemptRules, *records: StoredRecord) -> None:
    attempt.record_reads([r.key.encoded for r in records], list(records))


def append_command(partition: str = "prod") -> AppendRecordsCommand:
    return parse_append_records_command(
        {
            "stream": "observations",
            "partition": partition,
            "values": [{"source": {"kind": "run", "id": "run-1"}, "data": {}}],
        }
    )


def query() -> QueryRecordsCommand:
    return QueryRecordsCommand(StorageIndexName.LEASES_BY_EXPIRY, "env-a", 5, StorageQueryRange())


# -- one thread at a time, nothing after the end ---------------------------------------------------


@contextmanager
def held_by_another_thread(attempt: StorageAttemptRules) -> Iterator[None]:
    """Run the body while a second thread is inside ``attempt`` (bounded waits, no sleeps)."""
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with attempt:
            inside.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(5)
    try:
        yield
    finally:
        release.set()
        holder.join(5)
    assert not holder.is_alive()


def test_a_second_thread_using_the_attempt_at_once_gets_concurrent_use_error() -> None:
    attempt = rules()
    with held_by_another_thread(attempt), pytest.raises(StorageConcurrentUseError), attempt:
        pass


def test_the_guard_is_released_after_each_call_even_when_it_raises() -> None:
    attempt = rules()
    with pytest.raises(ValueError), attempt:
        raise ValueError("boom")
    with attempt:  # a later call on the same thread is fine
        pass


def test_use_after_end_gets_attempt_ended_error() -> None:
    attempt = rules()
    attempt.end()
    with pytest.raises(StorageAttemptEndedError), attempt:
        pass


def test_use_after_end_for_commit_gets_attempt_ended_error() -> None:
    attempt = rules()
    attempt.end_for_commit()
    assert attempt.ended
    with pytest.raises(StorageAttemptEndedError), attempt:
        pass


def test_an_ended_attempt_reports_ended_even_while_a_straggler_is_inside() -> None:
    attempt = rules()
    with held_by_another_thread(attempt):
        attempt.end()
        with pytest.raises(StorageAttemptEndedError), attempt:
            pass


def test_ending_for_commit_while_another_thread_is_inside_is_concurrent_use() -> None:
    attempt = rules()
    with held_by_another_thread(attempt):
        with pytest.raises(StorageConcurrentUseError):
            attempt.end_for_commit()
        assert attempt.ended


# -- sealing ---------------------------------------------------------------------------------------


def sealers() -> Iterator[Any]:
    yield pytest.param(lambda a: a.now(), id="now")
    yield pytest.param(lambda a: a.stage_create(lease_record("fresh")), id="create")
    yield pytest.param(lambda a: a.stage_append(append_command()), id="append")


@pytest.mark.parametrize("seal", list(sealers()))
def test_reads_are_sealed_after_now_or_the_first_mutation(seal: Any) -> None:
    attempt = rules()
    attempt.begin_get([key()])
    attempt.begin_query(query(), StorageCandidateMode.ADVISORY)
    seal(attempt)
    assert attempt.sealed
    with pytest.raises(StorageSealedError):
        attempt.begin_get([key()])
    with pytest.raises(StorageSealedError):
        attempt.begin_query(query(), StorageCandidateMode.ADVISORY)


def test_replace_and_delete_seal_the_read_set() -> None:
    for stage in (lambda a, r: a.stage_replace(r, lease_record()), lambda a, r: a.stage_delete(r)):
        attempt = rules()
        record = stored()
        read(attempt, record)
        stage(attempt, record)
        with pytest.raises(StorageSealedError):
            attempt.check_readable("get")


def test_get_and_query_arguments_are_validated() -> None:
    attempt = rules()
    with pytest.raises(StorageValidationError):
        attempt.begin_get("not keys")  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError):
        attempt.begin_get(["not a key"])  # type: ignore[list-item]
    with pytest.raises(StorageValidationError):
        attempt.begin_query("not a command", StorageCandidateMode.ADVISORY)  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError):
        attempt.begin_query(query(), "sideways")
    assert attempt.begin_query(query(), "exclusive") is StorageCandidateMode.EXCLUSIVE


# -- time ------------------------------------------------------------------------------------------


def test_now_samples_the_clock_once_and_freezes_it() -> None:
    clock = Ticking()
    attempt = rules(clock=clock)
    first = attempt.now()
    assert attempt.now() == first
    assert clock.calls == 1


def test_a_naive_clock_value_is_refused() -> None:
    attempt = rules(clock=lambda: datetime(2024, 1, 1))
    with pytest.raises(StorageValidationError):
        attempt.now()


# -- reads and mutations ---------------------------------------------------------------------------


def test_reads_remember_the_record_or_absence_per_key() -> None:
    attempt = rules()
    record = stored()
    attempt.record_reads([record.key.encoded, key("gone").encoded], [record, None])
    assert attempt.reads == {record.key.encoded: record, key("gone").encoded: None}


def test_create_of_an_unread_or_absent_key_is_staged_and_parsed() -> None:
    attempt = rules()
    attempt.record_read(key("lease-1").encoded, None)
    unread = lease_record("unread")
    assert attempt.stage_create(unread) is unread
    parsed = attempt.stage_create(raw_record())  # plain JSON-like input is parsed at the boundary
    assert isinstance(parsed, NewStorageRecord) and parsed.key == key("lease-1")
    assert attempt.creates == [(key("unread").encoded, unread), (key("lease-1").encoded, parsed)]
    assert attempt.has_writes


def test_create_of_a_key_read_as_present_is_a_duplicate_mutation() -> None:
    attempt = rules()
    read(attempt, stored())
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_create(lease_record())
    assert not attempt.creates


def test_a_key_is_mutated_at_most_once() -> None:
    attempt = rules()
    record = stored()
    read(attempt, record)
    attempt.stage_replace(record, lease_record(holder=None))
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_delete(record)
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_replace(record, lease_record())
    attempt.stage_create(lease_record("other"))
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_create(lease_record("other"))


@pytest.mark.parametrize("operation", ["replace", "delete"])
def test_replace_and_delete_need_the_record_this_attempt_read(operation: str) -> None:
    def stage(attempt: StorageAttemptRules, current: StoredRecord) -> None:
        if operation == "replace":
            attempt.stage_replace(current, lease_record(holder=None))
        else:
            attempt.stage_delete(current)

    unread = rules()
    with pytest.raises(StorageKeyChangeError):
        stage(unread, stored())
    absent = rules()
    absent.record_read(key().encoded, None)
    with pytest.raises(StorageKeyChangeError):
        stage(absent, stored())
    other_version = rules()
    read(other_version, stored(version="1"))
    with pytest.raises(StorageKeyChangeError):
        stage(other_version, stored(version="2"))
    exact = rules()
    read(exact, stored(version="3"))
    stage(exact, stored(version="3"))
    assert exact.mutated == {key().encoded}


def test_a_replacement_cannot_change_the_key() -> None:
    attempt = rules()
    record = stored()
    read(attempt, record)
    with pytest.raises(StorageKeyChangeError):
        attempt.stage_replace(record, lease_record("renamed"))
    assert not attempt.replaces


def test_staged_mutations_read_back_in_staging_order() -> None:
    attempt = rules()
    records = [stored(f"r{n}") for n in range(4)]
    read(attempt, *records)
    attempt.stage_delete(records[2])
    attempt.stage_replace(records[1], lease_record("r1", holder=None))
    attempt.stage_create(lease_record("c1"))
    attempt.stage_delete(records[0])
    attempt.stage_replace(records[3], lease_record("r3", holder=None))
    attempt.stage_create(lease_record("c0"))
    assert [current for _, current in attempt.deletes] == [records[2], records[0]]
    assert [(current, new.key) for _, current, new in attempt.replaces] == [
        (records[1], key("r1")),
        (records[3], key("r3")),
    ]
    assert [new.key for _, new in attempt.creates] == [key("c1"), key("c0")]


# -- append ----------------------------------------------------------------------------------------


def test_only_one_append_batch_per_attempt() -> None:
    attempt = rules()
    attempt.stage_append(append_command("prod"))
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_append(append_command("staging"))
    assert attempt.append is not None and attempt.append.partition == "prod"


def test_an_attempt_that_read_the_stream_cannot_append_to_it() -> None:
    attempt = rules()
    attempt.record_read(LAYOUT.head_key("prod").encoded, None)
    with pytest.raises(StorageUsageError):
        attempt.stage_append(append_command("prod"))
    attempt.stage_append(append_command("other"))


def test_an_attempt_that_mutated_the_stream_cannot_append_to_it() -> None:
    attempt = rules()
    attempt.stage_create(_head_record("prod"))
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_append(append_command("prod"))


def test_an_appending_attempt_cannot_mutate_the_appended_stream() -> None:
    attempt = rules()
    attempt.stage_append(append_command("prod"))
    with pytest.raises(StorageDuplicateMutationError):
        attempt.stage_create(_head_record("prod"))
    attempt.stage_create(_head_record("other"))


def _head_record(partition: str) -> Any:
    from runlane_conformance import build_storage_record

    return build_storage_record(
        LAYOUT.head_table, {"stream": "observations", "partition": partition, "next": "1"}
    )


# -- metering --------------------------------------------------------------------------------------


SMALL = StorageLimits(
    max_point_reads=2,
    max_query_results=3,
    max_transaction_records=2,
    max_record_bytes=400 * 1024,
    max_transaction_bytes=800 * 1024,
)


def test_point_reads_are_metered_and_a_limit_error_is_remembered() -> None:
    attempt = rules(SMALL)
    attempt.begin_get([key("a"), key("a")])
    attempt.check_within_limits()
    with pytest.raises(StorageLimitError):
        attempt.begin_get([key("b")])
    with pytest.raises(StorageLimitError):  # swallowed by the callback, still refused at commit
        attempt.check_within_limits()


def test_query_limits_are_checked() -> None:
    attempt = rules(SMALL)
    with pytest.raises(StorageLimitError):
        attempt.begin_query(query(), StorageCandidateMode.ADVISORY)
    assert attempt.limit_error is not None


def test_mutations_count_toward_transaction_records() -> None:
    attempt = rules(SMALL)
    attempt.stage_create(lease_record("a"))
    attempt.stage_create(lease_record("b"))
    with pytest.raises(StorageLimitError):
        attempt.stage_create(lease_record("c"))
    assert attempt.limit_error is not None
    assert [new.key for _, new in attempt.creates] == [key("a"), key("b")]


def test_appends_are_metered() -> None:
    attempt = rules(SMALL)  # a batch of one record plus its head already fills two records
    attempt.stage_create(lease_record("a"))
    with pytest.raises(StorageLimitError):
        attempt.stage_append(append_command())
    assert attempt.append is None
    with pytest.raises(StorageLimitError):
        attempt.check_within_limits()
