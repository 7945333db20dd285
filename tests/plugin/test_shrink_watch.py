"""shrink_watch: Hypothesis's shrink phase is announced once, bounded, noted, and never loses the failure."""

from __future__ import annotations

import inspect
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from hypothesis.internal.conjecture import engine

from runlane_conformance.fixtures import shrink_watch
from runlane_conformance.fixtures.shrink_watch import examples_kept_under_a_forced_seed, watch_shrinking


def test_every_hypothesis_internal_the_watch_relies_on_still_exists() -> None:
    # If this fails after a Hypothesis upgrade, the shrink budget and the shrinking hook are lost:
    # find the new names in the engine and update shrink_watch.py.
    runner = engine.ConjectureRunner
    assert shrink_watch.shrink_entry_name() is not None, "no known shrink entry on ConjectureRunner"
    assert "database_key" in inspect.signature(runner.__init__).parameters
    assert shrink_watch.function_digest is not None
    assert isinstance(engine.MAX_SHRINKING_SECONDS, int | float)
    assert engine.ExitReason.very_slow_shrinking
    assert callable(engine.report)
    source = inspect.getsource(runner)
    assert "MAX_SHRINKING_SECONDS" in source
    assert shrink_watch._SLOW_SHRINK_WARNING in source


def _failing_property(failures: list[int], slow: float = 0.0) -> object:
    # Once a failure was seen, every further call (all of them shrink steps) takes ``slow`` seconds.
    @settings(database=None, max_examples=200, deadline=None)
    @given(st.lists(st.integers(0, 1000), min_size=1))
    def prop(values: list[int]) -> None:
        if failures:
            time.sleep(slow)
        if sum(values) > 10:
            failures.append(1)
            raise AssertionError("too big")

    return prop


def test_the_start_of_shrinking_is_announced_once_and_a_quick_shrink_leaves_no_note() -> None:
    announced: list[str] = []
    with (
        watch_shrinking(60.0, lambda: announced.append("shrinking")) as watch,
        pytest.raises(AssertionError, match="too big"),
    ):
        _failing_property([])()  # type: ignore[operator]
    assert announced == ["shrinking"]
    assert watch.started == 1
    assert watch.note is None


def test_a_passing_property_never_announces_shrinking() -> None:
    announced: list[str] = []

    @settings(database=None, max_examples=20)
    @given(st.integers())
    def prop(value: int) -> None:
        assert value == value

    with watch_shrinking(60.0, lambda: announced.append("shrinking")) as watch:
        prop()
    assert announced == [] and watch.started == 0


def test_shrinking_past_the_budget_stops_and_still_reports_the_failure_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with watch_shrinking(0.3, lambda: None) as watch, pytest.raises(AssertionError, match="too big"):
        _failing_property([], slow=0.05)()  # type: ignore[operator]
    assert watch.stopped_after is not None and watch.stopped_after >= 0.3
    assert watch.note is not None and watch.note.startswith("shrinking stopped after ")
    assert watch.note.endswith("the example may not be minimal")
    assert "five minutes" not in capsys.readouterr().out


def test_everything_patched_is_restored_afterwards_also_after_an_error() -> None:
    entry = shrink_watch.shrink_entry_name()
    assert entry is not None
    before = (
        getattr(engine.ConjectureRunner, entry),
        engine.MAX_SHRINKING_SECONDS,
        engine.report,
    )
    init = engine.ConjectureRunner.__init__
    with pytest.raises(RuntimeError), watch_shrinking(1.0, lambda: None), examples_kept_under_a_forced_seed():
        assert engine.MAX_SHRINKING_SECONDS == 1.0
        raise RuntimeError("boom")
    assert (
        getattr(engine.ConjectureRunner, entry),
        engine.MAX_SHRINKING_SECONDS,
        engine.report,
    ) == before
    assert engine.ConjectureRunner.__init__ is init


def test_a_forced_seed_still_saves_the_failure_in_the_example_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hypothesis import core

    monkeypatch.setattr(core, "global_force_seed", 1234)
    database = InMemoryExampleDatabase()

    @settings(database=database, max_examples=200, deadline=None)
    @given(st.integers(0, 1000))
    def prop(value: int) -> None:
        assert value < 10

    with pytest.raises(AssertionError):
        prop()
    assert database.data == {}  # what Hypothesis does on its own under a forced seed
    with examples_kept_under_a_forced_seed(), pytest.raises(AssertionError):
        prop()
    assert database.data != {}


def test_a_hypothesis_release_without_the_known_shrink_entry_still_runs_and_reports_the_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A later release may rename the engine's internals again: the watch then does less, and the
    # check's own outcome (here a failure) is untouched.
    monkeypatch.setattr(shrink_watch, "_SHRINK_ENTRIES", ("no_such_method",))
    announced: list[str] = []
    with (
        watch_shrinking(60.0, lambda: announced.append("shrinking")) as watch,
        pytest.raises(AssertionError, match="too big"),
    ):
        _failing_property([])()  # type: ignore[operator]
    assert announced == []
    assert watch.started == 0
