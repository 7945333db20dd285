"""Concurrent histories judged by their dependency graph: no anomaly of Adya's classes may appear.

Several clients, each with its own driver instance, run random transactions
on one store (see ``_histories_support``: rounds shaped to provoke lost
updates, read skew, write skew and phantoms on a few hot keys). Every attempt
is recorded with the versions it read, the index pages it got and the writes
it staged; ``runlane_conformance.history`` turns the record into a graph and
names what it finds, with the shortest cycle as the witness.

The workload runs once per driver, seed and profile in a process, and each
requirement below judges one anomaly class of that one history. A failing
check saves the history as JSON (the path is in the message) so that
``python -m runlane_conformance.history FILE`` re-checks it without the driver.

Why some classes have no requirement of their own: a write cycle (G0) and
circular information flow (G1c) need an attempt to read a value that had not
yet been written, because every attempt reads before it writes and every
replace names a version the attempt itself read; G1b (an intermediate read)
needs an attempt that writes one key twice, which the contract refuses. The
checker still names all three, and ``histories.reads-only-committed-writes``
fails if any of them ever shows up.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from runlane_conformance.catalogue.histories import (
    COMMITTED_READS,
    LOST_UPDATES,
    PREDICATE_SKEW,
    READ_SKEW,
    WORKLOAD_ENDS,
    WRITE_SKEW,
)
from runlane_conformance.fixtures.driver_frame import path_from_here
from runlane_conformance.fixtures.evidence import CheckInconclusive, record_witness
from runlane_conformance.harness import DriverHarness
from runlane_conformance.history import Anomaly, History, Report, check_history, save
from runlane_conformance.history.witness import witness
from runlane_conformance.suites._histories_support import (
    WORKERS,
    Workload,
    record_concurrent_history,
    rounds_for_profile,
)
from runlane_conformance.suites._hypothesis_support import searches

#: Where failing histories are written, relative to the current directory.
HISTORY_DIR = Path(".runlane") / "histories"


@dataclass(frozen=True)
class Recorded:
    """One workload run on one store and its verdict."""

    history: History
    report: Report
    workload: Workload
    seconds: float
    exact_index: bool
    #: Where and why the workload stopped early on a driver error (one entry per process), if it did.
    stops: tuple[str, ...] = ()


_RUNS: dict[tuple[int, int, str], Recorded] = {}


def _profile_name() -> str:
    return settings.get_current_profile_name().removeprefix("runlane-")


def recorded(request: pytest.FixtureRequest, harness: DriverHarness, seed: int) -> Recorded:
    """The history of this process's workload run for ``harness`` (run on first use, then reused).

    It runs on the check's store; where that store has an address, worker
    processes attached to it run clients of their own at the same time.
    """
    profile = _profile_name()
    key = (id(harness), seed, profile)
    if key not in _RUNS:
        started = time.monotonic()
        store = request.getfixturevalue("runlane_store")
        workers = request.getfixturevalue("runlane_workers")(WORKERS) if store.address() is not None else []
        history, workload = record_concurrent_history(
            store, rounds=rounds_for_profile(profile), seed=seed, workers=workers
        )
        _RUNS[key] = Recorded(
            history,
            check_history(history),
            workload,
            time.monotonic() - started,
            workload.exact_index,
            tuple(workload.stops),
        )
    return _RUNS[key]


def _seed(request: pytest.FixtureRequest) -> int:
    """The run's Hypothesis seed (the plugin always forces one), as the workload's seed."""
    raw = getattr(request.config.option, "hypothesis_seed", None)
    if raw is None:
        return 0
    text = str(raw)
    return int(text) if text.isdigit() else sum(text.encode())


#: Classes about what one attempt may observe: all fail ``histories.reads-only-committed-writes``.
OWN_ATTEMPT_CLASSES = (
    Anomaly.G0,
    Anomaly.G1A,
    Anomaly.G1B,
    Anomaly.G1C,
    Anomaly.DIRTY_UPDATE,
    Anomaly.GARBAGE_READ,
    Anomaly.FUTURE_READ,
    Anomaly.INTERNAL,
    Anomaly.VERSION_REUSED,
)


class Undecided(CheckInconclusive):
    """The history could not decide the check: the workload stopped early, or a search hit its bound."""

    def __init__(self, what: str) -> None:
        AssertionError.__init__(self, f"inconclusive: {what}")
        self.what = what


def _save(request: pytest.FixtureRequest, run: Recorded) -> str:
    """Save the history under the current directory; its path as typed from there (no machine path)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{request.node.name}-{run.workload.seed}")
    return path_from_here(str(save(run.history, Path.cwd() / HISTORY_DIR / f"{name}.json")))


def _named(report: Report) -> str:
    found = ", ".join(sorted({f.anomaly.value for f in report.findings})) or "no anomaly"
    return f"{found} ({report.levels()})"


def _judge(request: pytest.FixtureRequest, harness: DriverHarness, *anomalies: Anomaly) -> Recorded:
    """Fail on any of ``anomalies`` in the recorded history, with its witness and the saved file.

    A history cut short by a driver error is judged all the same: what it shows is evidence. What it
    does not show is not: with nothing found, such a check is inconclusive (the error itself fails
    ``histories.transactions-end-as-the-contract-allows``), as is one whose cycle search stopped at
    its bound before deciding a class.
    """
    run = recorded(request, harness, _seed(request))
    history, report = run.history, run.report
    stopped = (
        f"the workload stopped early on a driver error ({'; '.join(run.stops)}), so only the "
        f"{report.attempts} attempts recorded until then were judged"
        if run.stops
        else ""
    )
    found = report.of(*anomalies)
    if found:
        path = _save(request, run)
        record_witness(witness(report, history, only=anomalies))
        raise AssertionError(
            f"the concurrent history shows {', '.join(sorted({f.anomaly.value for f in found}))}: no serial "
            "order of the committed transactions explains what they read\n"
            f"{report.render(history, only=anomalies)}\n"
            + (f"{stopped}\n" if stopped else "")
            + f"history saved to {path}; re-check it without the driver: "
            f"runlane-certify check-history {path} (or python -m runlane_conformance.history {path})"
        )
    if stopped:
        raise Undecided(
            f"{stopped}; they show none of {', '.join(a.value for a in anomalies)}, which says nothing "
            "about the rounds never run (the driver error is reported under "
            f"{WORKLOAD_ENDS.id})"
        )
    undecided = [(a, bound) for a, bound in report.bounds if a in anomalies and a in report.inconclusive]
    if undecided:
        raise Undecided(
            "; ".join(f"{a.value} neither found nor ruled out: {bound}" for a, bound in undecided)
        )
    assert report.committed > 0 and report.edges > 0, (
        f"the workload recorded {report.attempts} attempts, {report.committed} committed, with "
        f"{report.edges} dependency edges: no evidence either way (a fault in the check or a driver that "
        "commits nothing)"
    )
    return run


@COMMITTED_READS
@searches
def test_committed_transactions_read_only_committed_writes(
    runlane_harness: DriverHarness, request: pytest.FixtureRequest
) -> None:
    _judge(request, runlane_harness, *OWN_ATTEMPT_CLASSES)


@LOST_UPDATES
@searches
def test_no_update_is_lost(runlane_harness: DriverHarness, request: pytest.FixtureRequest) -> None:
    _judge(request, runlane_harness, Anomaly.LOST_UPDATE)


@READ_SKEW
@searches
def test_no_read_skew(runlane_harness: DriverHarness, request: pytest.FixtureRequest) -> None:
    _judge(request, runlane_harness, Anomaly.G_SINGLE)


@WRITE_SKEW
@searches
def test_no_write_skew(runlane_harness: DriverHarness, request: pytest.FixtureRequest) -> None:
    _judge(request, runlane_harness, Anomaly.G2_ITEM)


@PREDICATE_SKEW
@searches
def test_no_predicate_skew(runlane_harness: DriverHarness, request: pytest.FixtureRequest) -> None:
    _judge(request, runlane_harness, Anomaly.G2)


@WORKLOAD_ENDS
@searches
def test_every_transaction_ends_as_the_contract_allows(
    runlane_harness: DriverHarness, request: pytest.FixtureRequest
) -> None:
    run = recorded(request, runlane_harness, _seed(request))
    if run.stops:
        path = _save(request, run)
        raise AssertionError(
            "the driver failed in a way the contract does not allow, which stopped the concurrent "
            f"workload: {'; '.join(run.stops)}\n"
            f"the {run.report.attempts} attempts recorded until then were judged: {_named(run.report)}\n"
            f"history saved to {path}; re-check it without the driver: runlane-certify check-history {path}"
        )
