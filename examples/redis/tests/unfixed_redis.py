"""The redis driver as it handled a failed EXEC before fault handling existed: kept as a mutant.

redis-py reports a connection lost after ``EXEC`` was sent with the same
``WatchError`` a real conflict raises. This variant takes every failed EXEC
for a lost race and replays the callback, without asking the commit marker
whether the first attempt had committed. When only the reply was lost, the
work is applied twice (a counter goes 0 -> 2) and ``transaction()`` returns
the replay's value: exactly what ``faults.no-replay-after-possible-commit``
must catch (see ``test_redis_faults.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from runlane_redis_driver import RedisHarness, RedisStorageDriver, RedisTransaction
from runlane_redis_driver import harness as fixed_harness


class GuessingTransaction(RedisTransaction):
    """Assumes a failed EXEC never committed."""

    def _resolve_commit(self, marker: str) -> bool | None:
        return False


class GuessingDriver(RedisStorageDriver):
    attempt_class = GuessingTransaction


class GuessingHarness(RedisHarness):
    driver_class = GuessingDriver


def harness(options: Mapping[str, str]) -> GuessingHarness:
    """Harness factory (``--driver unfixed_redis:harness``), with the same options as ``redis``."""
    base = fixed_harness(options)
    return GuessingHarness(
        url=base.url,
        limits=base.limits,
        max_transaction_attempts=base.max_transaction_attempts,
        exclusive_hold_ms=base.exclusive_hold_ms,
    )
