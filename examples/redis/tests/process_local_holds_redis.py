"""The redis driver with exclusive holds kept in process memory: the bug issue 21 reported, kept as a mutant.

Instead of ``SET <hold> <token> NX PX`` in Redis, a claim goes into a table
shared by every instance *in this process*. Inside one process that is
exclusive (every single-process exclusive_selection check passes); two
processes on one store both get the same rows, which only
``exclusive_selection.disjoint-across-processes`` can see
(``test_redis_cross_process.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from runlane_redis_driver import RedisHarness, RedisStorageDriver, RedisTransaction
from runlane_redis_driver import harness as fixed_harness

_HOLDS: dict[str, str] = {}  # hold key -> the token of the attempt holding it, for this process only
_LOCK = threading.Lock()


class _ProcessLocalClaims:
    """The attempt's client, except that hold claims (``SET ... NX``) go to the process's table."""

    def __init__(self, client: Any, hold_prefix: str) -> None:
        self._client = client
        self._prefix = hold_prefix

    def set(self, name: str, value: str, **kwargs: Any) -> bool:
        if not name.startswith(self._prefix):
            return bool(self._client.set(name, value, **kwargs))
        with _LOCK:
            return _HOLDS.setdefault(name, value) == value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class ProcessLocalHoldsTransaction(RedisTransaction):
    def __init__(self, client: Any, layout: Any, *args: Any, **kwargs: Any) -> None:
        prefix = layout.hold("")
        super().__init__(_ProcessLocalClaims(client, prefix), layout, *args, **kwargs)

    def release(self) -> None:
        if self._held and self._token is not None:
            held, self._held = list(self._held), {}
            with _LOCK:
                for ekey in held:
                    if _HOLDS.get(self._layout.hold(ekey)) == self._token:
                        del _HOLDS[self._layout.hold(ekey)]


class ProcessLocalHoldsDriver(RedisStorageDriver):
    attempt_class = ProcessLocalHoldsTransaction


class ProcessLocalHoldsHarness(RedisHarness):
    driver_class = ProcessLocalHoldsDriver


def harness(options: Mapping[str, str]) -> ProcessLocalHoldsHarness:
    """Harness factory (``--driver process_local_holds_redis:harness``), with the options of ``redis``."""
    base = fixed_harness(options)
    return ProcessLocalHoldsHarness(
        url=base.url,
        limits=base.limits,
        max_transaction_attempts=base.max_transaction_attempts,
        exclusive_hold_ms=base.exclusive_hold_ms,
    )
