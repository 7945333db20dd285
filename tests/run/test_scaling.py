"""``--workers auto``: how many children a run starts with, how far it may grow, and the idle meter."""

from __future__ import annotations

from pathlib import Path

import pytest

from runlane_conformance.run import scaling
from runlane_conformance.run.scaling import IdleMeter, WorkerCount, parse_workers


@pytest.mark.parametrize(("given", "parsed"), [("3", 3), (" AUTO ", "auto"), (1, 1), ("auto", "auto")])
def test_a_worker_count_is_a_positive_integer_or_auto(given: object, parsed: object) -> None:
    assert parse_workers(given) == parsed


@pytest.mark.parametrize("given", ["0", "-1", "many", "", 0, True, 2.5, None])
def test_anything_else_is_refused(given: object) -> None:
    with pytest.raises(ValueError, match="positive integer or 'auto'"):
        parse_workers(given)


def test_a_number_is_used_as_given_even_beyond_the_processors() -> None:
    assert WorkerCount.of(8, processors=2) == WorkerCount(8, 8)
    assert not WorkerCount.of(8, processors=2).grows


def test_auto_starts_with_one_per_processor_and_may_grow_to_four_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(IdleMeter, "available", staticmethod(lambda: True))
    assert WorkerCount.of("auto", processors=2) == WorkerCount(2, 8)
    assert WorkerCount.of("auto", processors=64) == WorkerCount(64, 64)  # never below one per processor
    assert WorkerCount.of("auto", processors=3) == WorkerCount(3, 12)
    assert WorkerCount.of("auto", processors=8) == WorkerCount(8, scaling.AUTO_CEILING)


def test_auto_does_not_grow_where_idle_time_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scaling, "_PROC_STAT", "/nonexistent/stat")
    assert WorkerCount.of("auto", processors=2) == WorkerCount(2, 2)


def _stat(path: Path, user: int, idle: int, iowait: int, guest: int = 0) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text(f"cpu  {user} 0 0 {idle} {iowait} 0 0 0 {guest} 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")


def test_the_idle_share_counts_waiting_for_io_as_idle_and_guest_time_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stat = tmp_path / "stat"
    monkeypatch.setattr(scaling, "_PROC_STAT", str(stat))
    _stat(stat, user=100, idle=100, iowait=0)
    meter = IdleMeter()
    _stat(stat, user=130, idle=150, iowait=20, guest=30)  # +30 busy (guest inside user), +70 idle
    assert meter.idle_share() == pytest.approx(0.7)
    assert meter.idle_share() is None  # no time passed since the last reading


def test_an_unreadable_stat_file_gives_no_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    stat.write_text("intr 1 2 3\n")
    monkeypatch.setattr(scaling, "_PROC_STAT", str(stat))
    assert not IdleMeter.available()
    assert IdleMeter().idle_share() is None
