"""An async port of a correct driver, served through the async adapter, and the base of async mutants.

``AsyncDriverFromSync`` turns a synchronous driver into an ``AsyncStorageDriver``:
its transaction runs on a worker thread, the sync callback given to the
wrapped driver awaits the async callback on the adapter's loop, and every
attempt call is awaited off the loop on a worker thread. Wrapped in
``runlane_conformance.aio.async_harness``, the result goes through
sync -> async -> sync: the suites judging it judge the adapter as much as the
driver, and an async mutant (a subclass of ``AsyncWrappedTransaction`` or
``AsyncDriverFromSync`` overriding one coroutine) is judged exactly like a
synchronous one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from runlane_conformance.aio import async_harness
from runlane_conformance.harness import DriverHarness, HarnessFactory, StoreHandle, load_harness

T = TypeVar("T")

#: Each open transaction holds one worker while its attempt calls use others; generous on purpose.
_WORKERS = 128


class AsyncWrappedTransaction:
    """Awaits each call of the wrapped synchronous attempt on a worker thread."""

    def __init__(self, inner: Any, driver: AsyncDriverFromSync) -> None:
        self.inner = inner
        self.driver = driver

    async def _off_loop(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.driver.pool, partial(method, *args, **kwargs))

    async def get(self, keys: Sequence[Any]) -> list[Any]:
        return await self._off_loop(self.inner.get, keys)

    async def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return await self._off_loop(self.inner.query_candidates, command, **kwargs)

    async def now(self) -> datetime:
        return await self._off_loop(self.inner.now)

    async def create(self, record: Any) -> None:
        await self._off_loop(self.inner.create, record)

    async def replace(self, current: Any, record: Any) -> None:
        await self._off_loop(self.inner.replace, current, record)

    async def delete(self, current: Any) -> None:
        await self._off_loop(self.inner.delete, current)

    async def append(self, command: Any) -> None:
        await self._off_loop(self.inner.append, command)


class AsyncDriverFromSync:
    """An ``AsyncStorageDriver`` over a synchronous driver instance."""

    transaction_class: type[AsyncWrappedTransaction] = AsyncWrappedTransaction

    def __init__(self, inner: Any, pool: ThreadPoolExecutor) -> None:
        self.inner = inner
        self.pool = pool

    @property
    def profile(self) -> Any:
        return self.inner.profile

    async def transaction(self, callback: Callable[[Any], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()

        def attempt(tx: Any) -> T:
            return asyncio.run_coroutine_threadsafe(self.run_callback(callback, tx), loop).result()

        return await loop.run_in_executor(self.pool, self.inner.transaction, attempt)

    async def run_callback(self, callback: Callable[[Any], Awaitable[T]], tx: Any) -> T:
        """One attempt: the async callback on the async view of ``tx`` (mutants override this)."""
        return await callback(self.transaction_class(tx, self))

    async def query(self, command: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.inner.query, command)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.inner.close)


class AsyncStoreFromSync:
    def __init__(
        self, inner: StoreHandle, driver_class: type[AsyncDriverFromSync], pool: ThreadPoolExecutor
    ) -> None:
        self.inner = inner
        self.driver_class = driver_class
        self.pool = pool

    async def connect(self, *, clock: Any = None) -> AsyncDriverFromSync:
        return self.driver_class(self.inner.connect(clock=clock), self.pool)

    def address(self) -> object | None:
        return self.inner.address()

    async def settle(self, *, timeout: float) -> bool:
        settle = getattr(self.inner, "settle", None)
        if settle is None:
            return True
        return await asyncio.get_running_loop().run_in_executor(self.pool, partial(settle, timeout=timeout))

    async def close(self) -> None:
        self.inner.close()


class AsyncHarnessFromSync:
    def __init__(self, inner: DriverHarness, driver_class: type[AsyncDriverFromSync]) -> None:
        self.inner = inner
        self.driver_class = driver_class
        self.pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="async-port")

    async def open_store(self) -> AsyncStoreFromSync:
        return AsyncStoreFromSync(self.inner.open_store(), self.driver_class, self.pool)

    async def attach(self, address: object) -> AsyncStoreFromSync:
        return AsyncStoreFromSync(self.inner.attach(address), self.driver_class, self.pool)

    async def close(self) -> None:
        self.inner.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def async_port_harness(
    driver_class: type[AsyncDriverFromSync] = AsyncDriverFromSync,
    *,
    transaction_class: type[AsyncWrappedTransaction] | None = None,
    base: str = "local",
) -> HarnessFactory:
    """A harness factory serving the ``base`` driver as an async driver, through the async adapter."""
    chosen = driver_class
    if transaction_class is not None:
        chosen = type(driver_class.__name__, (driver_class,), {"transaction_class": transaction_class})

    async def factory(options: Mapping[str, str]) -> AsyncHarnessFromSync:
        return AsyncHarnessFromSync(load_harness(base, options), chosen)

    return async_harness(factory)


#: The reference driver, ported to async and judged through the adapter: it must certify.
reference = async_port_harness()


async def reference_async_factory(options: Mapping[str, str]) -> AsyncHarnessFromSync:
    """The same port as a bare async factory, the way an async package may register it directly."""
    return AsyncHarnessFromSync(load_harness("local", options), AsyncDriverFromSync)
