"""How long does the history checker take on a big history?

Records the histories workload on the reference driver (``local``) until it
holds ``--transactions`` transactions (four clients, so a quarter as many
rounds), then times ``check_history`` on it: once as recorded (serializable:
the graph has no cycle, so only edges are built) and once on the same
history recorded through a store that validates only written keys (snapshot
isolation: many write-skew cycles to find and a shortest witness per class).
Then the buried anomaly: our translation of Elle's ``unfindable-g-single``
(a 1,000-attempt cycle with one anti-dependency in a sea of 29,000 attempts
of write-skew noise, on which Elle's own search times out), with the noise
recorded after the ring and before it; the G-single must be named either way.
Last, one predicate anomaly buried in the clean history: our translation of
Elle's ``g1c-predicate-read-unseen-universe-delete`` (two attempts that each
delete a key and scan, and each page omits the key the other deleted), on an
index partition of its own. It rests on what the pages left out: a G1c if
each absence was the other's delete, a G-single through the creator if not;
the G-single must be named. Prints attempts, edges, the classes found and the median CPU time of
``--repeat`` runs (CPU, not wall clock: the machine is shared). The
checker's time, not the workload's, is the figure of interest: a saved
history is re-checked without any driver. The target: a clean history of
30,000 attempts or more checks in at most 10 s of one core.

    python benchmarks/history_checker.py                  # 30,000 transactions (about 44,000 attempts)
    python benchmarks/history_checker.py --transactions 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.history.histories import unfindable_g_single

from runlane_conformance.history import (
    Anomaly,
    Attempt,
    History,
    IndexEntry,
    Outcome,
    Scan,
    Seen,
    Write,
    WriteKind,
    check_history,
)
from runlane_conformance.local.harness import local_harness
from runlane_conformance.suites._histories_support import CLIENTS, record_concurrent_history

#: The clean-history target, CPU seconds on one core.
TARGET_SECONDS = 10.0


def _snapshot_isolation(store: Any) -> None:
    """Make a local store validate only the keys an attempt writes (first committer wins)."""
    local = store.connect().store
    original = local._validate

    def validate(plan: Any) -> None:
        written = {ekey for ekey, _ in plan.replaces} | set(plan.deletes)
        original(replace(plan, reads={k: v for k, v in plan.reads.items() if k in written}))

    local._validate = validate


def record(transactions: int, *, weak: bool, seed: int) -> History:
    harness = local_harness({})
    store = harness.open_store()
    try:
        if weak:
            _snapshot_isolation(store)
        history, _ = record_concurrent_history(store, rounds=max(1, transactions // CLIENTS), seed=seed)
        return history
    finally:
        store.close()
        harness.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"history checker on {args.transactions:,} transactions (median of {args.repeat})")
    clean = History(())
    for label, weak in (("serializable (local)", False), ("snapshot isolation (local, weakened)", True)):
        recorded = record(args.transactions, weak=weak, seed=args.seed)
        _time(label, recorded, args.repeat, clean=not weak)
        if not weak:
            clean = recorded
    attempts = unfindable_g_single(1000, 30)
    ring = tuple(a for a in attempts if a.id.startswith("ring"))
    rest = tuple(a for a in attempts if not a.id.startswith("ring"))
    for label, order in (
        ("buried G-single, noise after", (*ring, *rest)),
        ("buried G-single, noise first", (*rest, *ring)),
    ):
        report = _time(label, History(order), args.repeat, clean=False)
        assert Anomaly.G_SINGLE in report.anomalies, f"{label}: the G-single was not named"
    buried = History((*clean.attempts, *_predicate_g1c()), clean.meta)
    label = "buried G-single through scans, in the serializable history"
    report = _time(label, buried, args.repeat, clean=False)
    assert Anomaly.G_SINGLE in report.anomalies, "the buried predicate anomaly was not named"


def _predicate_g1c() -> tuple[Attempt, ...]:
    """Elle's universe-delete case: t0 creates x and y; t1 and t2 each delete one and scan the partition."""
    where = IndexEntry("LeasesByExpiry", "buried-elle", "0")

    def attempt(name: str, *ops: Write | Scan) -> Attempt:
        return Attempt(name, name, 9, 9, 9, ops, Outcome.COMMITTED)

    def page() -> Scan:
        return Scan(where.index, where.partition, None, None, False, 10, False, True, ())

    def remove(key: str) -> Write:
        return Write(key, WriteKind.DELETE, Seen("1", f"{key}0"), None)

    return (
        attempt(
            "elle-t0",
            Write("elle-x", WriteKind.CREATE, None, "elle-x0", where),
            Write("elle-y", WriteKind.CREATE, None, "elle-y0", where),
        ),
        attempt("elle-t1", remove("elle-x"), page()),
        attempt("elle-t2", remove("elle-y"), page()),
    )


def _time(label: str, history: History, repeat: int, *, clean: bool) -> Any:
    timings = []
    report = None
    for _ in range(repeat):
        started = time.process_time()
        report = check_history(history)
        timings.append(time.process_time() - started)
    assert report is not None
    found = ", ".join(sorted(a.value for a in report.anomalies)) or "none"
    median = statistics.median(timings)
    verdict = (
        f" (target {TARGET_SECONDS:.0f} s: {'met' if median <= TARGET_SECONDS else 'MISSED'})"
        if clean
        else ""
    )
    bounds = f"; bounds reached: {len(report.bounds)}" if report.bounds else ""
    print(
        f"{label}: {history.transactions():,} transactions, {report.attempts:,} attempts, "
        f"{report.edges:,} edges, anomalies: {found}{bounds}; checked in {median:.2f} s CPU{verdict}"
    )
    return report


if __name__ == "__main__":
    main()
