"""How much work does one mixed transaction do, counted in CPU instructions?

Wall time on a shared machine drifts (identical runs here disagreed by up to
2x) and mixes two things: how much work the code does, and how long the
machine's memory takes to serve it. This script measures only the first. It
runs the mixed transaction of ``local_scaling.py`` under valgrind's callgrind
and counts the instructions executed inside the transactions alone (counting
is switched on and off around them through callgrind's client requests, via
a three-line C shim compiled on the fly), for the local driver and for bare
SQLite, at each store size. The counts repeat to within a fraction of a
percent from run to run.

A flat count across sizes is the evidence that cost per transaction does
not depend on the number of stored records; wall-time growth beyond it is the
memory hierarchy.

Needs ``valgrind`` and a C compiler with valgrind's headers. Slow: the
records are built under valgrind too (about 4 minutes per 100k records).

Run: ``python benchmarks/local_instructions.py [--sizes 1000,100000] [--transactions 300]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SHIM = """
#include <valgrind/callgrind.h>
void toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
"""
ENGINES = ("local", "sqlite raw")


def build_shim(directory: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("needs a C compiler (cc or gcc) to build the callgrind shim")
    source = directory / "toggle.c"
    source.write_text(SHIM)
    library = directory / "toggle.so"
    result = subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise SystemExit(
            f"could not build the callgrind shim (are valgrind's headers installed?):\n{result.stderr}"
        )
    return library


def child(size: int, engine_name: str, transactions: int, shim: str) -> None:
    """Runs under callgrind: load a store, then count only the timed transactions."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import local_scaling as bench

    toggle = ctypes.CDLL(shim).toggle
    population = bench.build_population(size)
    work = bench.plans(size, transactions, seed=size)
    engine: bench.LocalEngine | bench.SqliteEngine
    if engine_name == "local":
        engine = bench.LocalEngine(population)
    else:
        engine = bench.SqliteEngine(population, as_driver=False)
    gc.collect()
    gc.freeze()
    toggle()
    for plan in work:
        engine.run(plan)
    toggle()


def count(size: int, engine: str, transactions: int, shim: Path) -> float:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--collect-atstart=no",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        f"{size}:{engine}:{transactions}:{shim}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", result.stderr)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run for {engine} at {size:,} failed:\n{result.stderr[-2000:]}")
    return int(found.group(1)) / transactions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000", help="comma-separated store sizes")
    parser.add_argument("--transactions", type=int, default=300, help="counted per size and engine")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="callgrind runs at once")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        size, engine, transactions, shim = args.child.split(":", 3)
        child(int(size), engine, int(transactions), shim)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (callgrind) on PATH")
    sizes = [int(part) for part in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        shim = build_shim(Path(scratch))
        slots = [(size, engine) for size in sizes for engine in ENGINES]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {slot: pool.submit(count, *slot, args.transactions, shim) for slot in slots}
            counts = {slot: future.result() for slot, future in futures.items()}
    print(f"instructions per mixed transaction ({args.transactions} transactions, callgrind)")
    header = (
        f"{'stored records':>15} | {'local':>9} | {'sqlite raw':>10} | "
        f"{'local growth':>12} | {'raw growth':>10}"
    )
    print(header)
    print("-" * len(header))
    first = sizes[0]
    for size in sizes:
        local, raw = counts[(size, "local")], counts[(size, "sqlite raw")]
        print(
            f"{size:>15,} | {local / 1000:>8.0f}k | {raw / 1000:>9.0f}k | "
            f"{local / counts[(first, 'local')]:>11.2f}x | {raw / counts[(first, 'sqlite raw')]:>9.2f}x"
        )


if __name__ == "__main__":
    main()
