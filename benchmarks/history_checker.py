"""How long does the history checker take on a big history?

Records the histories workload on the reference driver (``local``) until it
holds ``--transactions`` transactions (four clients, so a quarter as many
rounds), then times ``check_history`` on it: once as recorded (serializable:
the graph has no cycle, so only edges are built) and once on the same
history recorded through a store that validates only written keys (snapshot
isolation: many write-skew cycles to find and a shortest witness per class).
Prints attempts, edges, the classes found and the median of ``--repeat``
timings. The checker's time, not the workload's, is the figure of interest:
a saved history is re-checked without any driver.

    python benchmarks/history_checker.py                  # 10,000 transactions
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

from runlane_conformance.history import History, check_history
from runlane_conformance.local.harness import local_harness
from runlane_conformance.suites._histories_support import CLIENTS, record_concurrent_history


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
    parser.add_argument("--transactions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"history checker on {args.transactions:,} transactions (median of {args.repeat})")
    for label, weak in (("serializable (local)", False), ("snapshot isolation (local, weakened)", True)):
        history = record(args.transactions, weak=weak, seed=args.seed)
        timings = []
        report = None
        for _ in range(args.repeat):
            started = time.perf_counter()
            report = check_history(history)
            timings.append(time.perf_counter() - started)
        assert report is not None
        found = ", ".join(sorted(a.value for a in report.anomalies)) or "none"
        print(
            f"{label}: {history.transactions():,} transactions, {report.attempts:,} attempts, "
            f"{report.edges:,} edges, anomalies: {found}; checked in {statistics.median(timings):.2f} s"
        )


if __name__ == "__main__":
    main()
