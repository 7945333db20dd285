"""Hand-out and growth policies: plain decisions, no processes involved."""

from __future__ import annotations

from runlane_conformance.run.scaling import WINDOW_SECONDS
from runlane_conformance.run.scheduling import (
    MAX_HANDED_OUT,
    Batched,
    GrowWhenIdle,
    Lockstep,
    OneAhead,
    policy_for,
)


def test_a_serial_run_hands_out_a_pipe_full() -> None:
    policy = policy_for(1, growing=False, max_failures=None)
    assert isinstance(policy, Batched)
    assert policy.depth() == MAX_HANDED_OUT
    assert policy.may_announce_end(MAX_HANDED_OUT)


def test_a_parallel_or_growing_run_hands_out_one_ahead() -> None:
    for policy in (
        policy_for(3, growing=False, max_failures=None),
        policy_for(1, growing=True, max_failures=None),
    ):
        assert isinstance(policy, OneAhead)
        assert policy.depth() == 2
        assert policy.may_announce_end(2)


def test_maxfail_announces_the_end_only_to_a_child_holding_its_last_check() -> None:
    policy = policy_for(1, growing=False, max_failures=1)
    assert isinstance(policy, Lockstep)
    assert policy.depth() == 2
    assert not policy.may_announce_end(2)
    assert policy.may_announce_end(1)
    assert policy.may_announce_end(0)


class FakeMeter:
    """An idle meter that reports what the test says the machine did."""

    def __init__(self, *shares: float | None) -> None:
        self.shares = list(shares)

    def idle_share(self) -> float | None:
        return self.shares.pop(0)


def _grow(policy: GrowWhenIdle, now: float, **changes: object) -> bool:
    state: dict[str, object] = {
        "alive": 2,
        "wanted": 2,
        "queued": 10,
        "all_ready": True,
        "stopping": False,
    }
    state.update(changes)
    return policy.should_grow(now, **state)  # type: ignore[arg-type]


def test_an_idle_machine_grows_once_per_window_up_to_the_ceiling() -> None:
    policy = GrowWhenIdle(4, FakeMeter(0.9, 0.9, 0.9))
    assert _grow(policy, 100.0)
    assert not _grow(policy, 100.0 + WINDOW_SECONDS / 2)  # same window: not even measured
    assert _grow(policy, 100.0 + WINDOW_SECONDS, alive=3, wanted=3)
    assert not _grow(policy, 100.0 + 2 * WINDOW_SECONDS, alive=4, wanted=4)  # at the ceiling


def test_a_busy_machine_a_starting_child_or_a_short_queue_does_not_grow() -> None:
    assert not _grow(GrowWhenIdle(4, FakeMeter(0.0)), 0.0)
    assert not _grow(GrowWhenIdle(4, FakeMeter(None)), 0.0)
    assert not _grow(GrowWhenIdle(4, FakeMeter(0.9)), 0.0, all_ready=False)
    assert not _grow(GrowWhenIdle(4, FakeMeter(0.9)), 0.0, queued=2)
    assert not _grow(GrowWhenIdle(4, FakeMeter(0.9)), 0.0, alive=1)


def test_a_stopping_run_never_grows() -> None:
    assert not _grow(GrowWhenIdle(4, FakeMeter()), 0.0, stopping=True)
