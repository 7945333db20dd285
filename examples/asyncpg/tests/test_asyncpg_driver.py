"""What the asyncpg driver promises beyond the conformance suites, checked in its own asyncio terms.

Most tests here drive the async API directly (``asyncio.run``), the way an
async caller would: options, schemas and their prefix, replay after a
serialization failure, overlapping calls of one attempt, cancellation.
Needs the server (skipped without it, failing under ``CI=true``: see conftest.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import pytest
from runlane_asyncpg_driver import (
    DEFAULT_DSN,
    SCHEMA_PREFIX,
    AsyncpgHarness,
    AsyncpgOptionError,
    AsyncpgStorageDriver,
    build_harness,
    harness,
)

from runlane_conformance import (
    AsyncStorageDriver,
    Leases,
    StorageConcurrentUseError,
    StorageSealedError,
    StorageUnsupportedError,
)

T = TypeVar("T")


def _leases() -> Leases:
    return Leases(environment=f"env-{uuid.uuid4().hex[:8]}")


async def _schema_exists(schema: str) -> bool:
    conn = await asyncpg.connect(DEFAULT_DSN)
    try:
        count = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema)
    finally:
        await conn.close()
    return bool(count == 1)


async def _with_store(body: Callable[[AsyncpgHarness, Any], Awaitable[T]]) -> T:
    made = await build_harness({})
    store = await made.open_store()
    try:
        return await body(made, store)
    finally:
        await store.close()
        await made.close()


# -- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"colour": "blue"}, "does not know option(s) colour"),
        ({"dsn": "host=127.0.0.1 port=5432"}, "is not a postgresql:// URL"),
        ({"max_transaction_attempts": "0"}, "is not a positive integer"),
        ({"exclusive_candidates": "maybe"}, "use true or false"),
        ({"max_record_bytes": "999999999"}, "incoherent"),
    ],
)
def test_a_bad_option_is_refused_in_one_line_naming_it(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(AsyncpgOptionError) as raised:
        harness(options)
    assert fragment in str(raised.value) and "\n" not in str(raised.value)


def test_the_driver_is_an_async_storage_driver() -> None:
    async def body(made: AsyncpgHarness, store: Any) -> None:
        driver = await store.connect()
        try:
            assert isinstance(driver, AsyncStorageDriver)
        finally:
            await driver.close()

    asyncio.run(_with_store(body))


# -- stores ----------------------------------------------------------------------------------------


def test_each_store_is_its_own_prefixed_schema_dropped_on_close() -> None:
    async def scenario() -> None:
        made = await build_harness({})
        try:
            store = await made.open_store()
            assert store.schema.startswith(SCHEMA_PREFIX)
            assert await _schema_exists(store.schema)
            await store.close()
            assert not await _schema_exists(store.schema)
        finally:
            await made.close()

    asyncio.run(scenario())


# -- attempts --------------------------------------------------------------------------------------


def test_a_serialization_failure_replays_the_callback_and_commits_once() -> None:
    """Two attempts read the same lease and both replace it: SSI refuses one, which is replayed."""
    leases = _leases()

    async def body(made: AsyncpgHarness, store: Any) -> None:
        first: AsyncpgStorageDriver = await store.connect()
        second: AsyncpgStorageDriver = await store.connect()
        await first.transaction(_create(leases, "a"))
        both_read = asyncio.Barrier(2)
        runs: list[str] = []

        def bump(name: str) -> Callable[[Any], Awaitable[None]]:
            async def callback(tx: Any) -> None:
                runs.append(name)
                (current,) = await tx.get([leases.key("a")])
                if len(runs) <= 2:
                    await asyncio.wait_for(both_read.wait(), 10)
                await tx.replace(current, leases.unique("a"))

            return callback

        await asyncio.gather(first.transaction(bump("first")), second.transaction(bump("second")))
        assert len(runs) == 3, f"exactly one of the two racing attempts is replayed, got {runs}"
        await first.close()
        await second.close()

    asyncio.run(_with_store(body))


def _create(leases: Leases, name: str) -> Callable[[Any], Awaitable[None]]:
    async def callback(tx: Any) -> None:
        await tx.create(leases.record(name))

    return callback


def test_an_overlapping_call_of_one_attempt_is_refused_not_interleaved() -> None:
    leases = _leases()

    async def body(made: AsyncpgHarness, store: Any) -> None:
        driver = await store.connect()

        async def callback(tx: Any) -> list[object]:
            return list(
                await asyncio.gather(
                    tx.get([leases.key("a")]), tx.get([leases.key("b")]), return_exceptions=True
                )
            )

        outcomes = await driver.transaction(callback)
        await driver.close()
        assert outcomes[0] == [None]
        assert isinstance(outcomes[1], StorageConcurrentUseError)

    asyncio.run(_with_store(body))


def test_reads_after_now_are_sealed_and_append_is_not_offered() -> None:
    leases = _leases()

    async def body(made: AsyncpgHarness, store: Any) -> None:
        driver = await store.connect()

        async def callback(tx: Any) -> None:
            await tx.now()
            with pytest.raises(StorageSealedError):
                await tx.get([leases.key("a")])
            with pytest.raises(StorageUnsupportedError):
                await tx.append(object())

        await driver.transaction(callback)
        await driver.close()

    asyncio.run(_with_store(body))


def test_a_cancelled_callback_commits_nothing_and_its_connection_is_not_reused() -> None:
    leases = _leases()

    async def body(made: AsyncpgHarness, store: Any) -> None:
        driver = await store.connect()
        staged = asyncio.Event()

        async def stalls(tx: Any) -> None:
            await tx.get([leases.key("a")])
            await tx.create(leases.record("a"))
            staged.set()
            await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(driver.transaction(stalls))
        await asyncio.wait_for(staged.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def read(tx: Any) -> list[object]:
            return await tx.get([leases.key("a")])  # type: ignore[no-any-return]

        assert await driver.transaction(read) == [None]
        await driver.close()

    asyncio.run(_with_store(body))


def test_through_the_entry_point_a_sync_caller_gets_a_working_driver() -> None:
    leases = _leases()
    made = harness({})
    store = made.open_store()
    try:
        driver = store.connect()
        driver.transaction(lambda tx: tx.create(leases.record("a")))
        records = driver.transaction(lambda tx: tx.get([leases.key("a")]))
        assert records[0] is not None and records[0].key == leases.key("a")
        driver.close()
    finally:
        store.close()
        made.close()
