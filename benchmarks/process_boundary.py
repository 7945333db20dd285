"""What the driver backend protocol costs: one exchange, and a whole certification through it.

Two figures, printed with a verdict against the target (the boundary should cost at most
twice the in-process run):

* **round trip**: the median time of one request and its answer through the Python backend
  serving the reference driver (``now()`` inside an open attempt: the smallest exchange), and of
  one empty transaction (two exchanges: the transaction and its one attempt);
* **certification**: the wall time of ``runlane-certify run`` (quick profile) on ``local`` in
  process and on ``process`` with ``python -m runlane_conformance.backend --driver local``,
  serially and with ``--workers 2``. Each round runs every configuration once, interleaved,
  so a change in machine load lands on all of them; medians over rounds are compared. Each
  run's CPU time (user + system, the backend and every other descendant included) is printed
  next to its wall time, and each round's load average with it: on a shared machine the wall
  time moves with the load, the CPU time much less.

Usage: ``python benchmarks/process_boundary.py [--rounds N] [--exchanges N] [--no-certify]``.
Nothing here is a test: run it by hand on a quiet machine. The figures and how to read them
are in ``docs/reference-driver.md`` (Through the backend protocol).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

BACKEND = f"{sys.executable} -m runlane_conformance.backend --driver local"
TARGET = 2.0


def round_trips(exchanges: int) -> tuple[float, float]:
    """Median seconds of one ``now()`` exchange and of one empty transaction, through the backend."""
    from runlane_conformance.protocol.process import process_harness

    harness = process_harness({"command": BACKEND})
    store = harness.open_store()
    driver = store.connect()
    try:
        samples: list[float] = []

        def many_nows(tx: object) -> None:
            for _ in range(exchanges):
                started = time.perf_counter()
                tx.now()  # type: ignore[attr-defined]
                samples.append(time.perf_counter() - started)

        driver.transaction(many_nows)
        transactions: list[float] = []
        for _ in range(max(1, exchanges // 4)):
            started = time.perf_counter()
            driver.transaction(lambda tx: None)
            transactions.append(time.perf_counter() - started)
        return statistics.median(samples), statistics.median(transactions)
    finally:
        store.close()
        harness.close()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def certify(driver_args: Sequence[str], workers: int) -> tuple[float, float]:
    """Wall and CPU seconds of one quick certification; raises if it does not certify."""
    cli = "import sys; from runlane_conformance.cli.app import main; main(sys.argv[1:])"
    command = [sys.executable, "-c", cli, "run", *driver_args, "--seed", "1"]
    if workers > 1:
        command += ["--workers", str(workers)]
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    cpu = _children_cpu() - cpu
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"certification failed ({' '.join(driver_args)}): {' | '.join(tail)}")
    return elapsed, cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved certification rounds (default 3)")
    parser.add_argument("--exchanges", type=int, default=2000, help="exchanges timed for the round trip")
    parser.add_argument("--no-certify", action="store_true", help="measure the round trip only")
    args = parser.parse_args(argv)

    exchange, transaction = round_trips(args.exchanges)
    print(
        f"round trip: one exchange {exchange * 1e6:.0f} us, one empty transaction {transaction * 1e6:.0f} us"
        f" (load average {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    if args.no_certify:
        return 0

    configurations = {
        ("local", 1): ["--driver", "local"],
        ("process", 1): ["--driver", "process", "--option", f"command={BACKEND}"],
        ("local", 2): ["--driver", "local"],
        ("process", 2): ["--driver", "process", "--option", f"command={BACKEND}"],
    }
    times: dict[tuple[str, int], list[float]] = {key: [] for key in configurations}
    cpus: dict[tuple[str, int], list[float]] = {key: [] for key in configurations}
    for round_number in range(1, args.rounds + 1):
        for (name, workers), driver_args in configurations.items():
            wall, cpu = certify(driver_args, workers)
            times[(name, workers)].append(wall)
            cpus[(name, workers)].append(cpu)
        figures = ", ".join(
            f"{name}/{workers}w {times[(name, workers)][-1]:.1f}s (cpu {cpus[(name, workers)][-1]:.1f}s)"
            for name, workers in times
        )
        load = os.getloadavg()[0]
        print(f"round {round_number}: {figures}; load average {load:.1f}", flush=True)
    for workers in (1, 2):
        local = statistics.median(times[("local", workers)])
        through = statistics.median(times[("process", workers)])
        local_cpu = statistics.median(cpus[("local", workers)])
        through_cpu = statistics.median(cpus[("process", workers)])
        ratio = through / local
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(
            f"quick profile, --workers {workers}: local {local:.1f}s (cpu {local_cpu:.1f}s), through the "
            f"Python backend {through:.1f}s (cpu {through_cpu:.1f}s): {ratio:.2f}x wall, "
            f"{through_cpu / local_cpu:.2f}x cpu; target: boundary <= {TARGET:g}x in-process: {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
