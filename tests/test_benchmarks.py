"""The benchmark script keeps working (it is run by hand, so nothing else would notice it rotting).

These tests run it at toy sizes and check what it prints; they do not time anything.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_benchmark() -> ModuleType:
    return load_script("local_scaling")


def test_scaling_benchmark_prints_a_row_per_size_and_a_verdict_per_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    load_benchmark().main(["--sizes", "50,120", "--transactions", "12", "--batch", "5"])
    out = capsys.readouterr().out
    rows = re.findall(r"^\s+([\d,]+) \|((?: +[\d.]+x? \|){7} +[\d.]+x)$", out, flags=re.MULTILINE)
    assert [size for size, _figures in rows] == ["50", "120"]
    verdicts = re.findall(r"^target: (.+): .*\b(met|MISSED)\b", out, flags=re.MULTILINE)
    assert [target.split(" 50")[0] for target, _verdict in verdicts] == [
        "local growth",
        "local at least as fast as sqlite raw",
        "local at least as fast as sqlite drv",
    ]


def _measurement(bench: ModuleType, local_1m: list[float], raw_1m: list[float]) -> object:
    """Four rounds of invented figures: local 100 µs at 1k in every round, SQLite raw given at 1M."""
    rounds = {
        (1000, "local"): [100.0] * 4,
        (1000, "sqlite raw"): [50.0] * 4,
        (1000, "sqlite drv"): [300.0] * 4,
        (10**6, "local"): local_1m,
        (10**6, "sqlite raw"): raw_1m,
        (10**6, "sqlite drv"): [300.0] * 4,
    }
    medians = {slot: float(sorted(values)[1] + sorted(values)[2]) / 2 for slot, values in rounds.items()}
    return bench.Measurement(medians, rounds)


def test_a_verdict_whose_limit_lies_inside_the_per_round_spread_is_marked_as_noise() -> None:
    bench = load_benchmark()
    shaky = _measurement(bench, [112.0, 126.0, 130.0, 150.0], [100.0] * 4)
    growth, raw, _drv = bench.verdicts(shaky, [1000, 10**6])
    assert growth.startswith("target: local growth 1,000 -> 1,000,000 <= 1.30x: 1.28x, met (per round ")
    assert growth.endswith(", within this run's noise)")
    assert "MISSED" in raw and "local/raw" in raw and "within this run's noise" not in raw


def test_a_verdict_the_whole_spread_agrees_with_is_not_marked_as_noise() -> None:
    bench = load_benchmark()
    firm = _measurement(bench, [150.0, 160.0, 170.0, 180.0], [100.0] * 4)
    growth, _raw, _drv = bench.verdicts(firm, [1000, 10**6])
    assert ": 1.65x, MISSED (per round " in growth
    assert "noise" not in growth


def test_huge_pages_run_says_what_backs_its_heap_or_why_it_cannot_run() -> None:
    bench = load_benchmark()
    script = BENCHMARKS / "local_scaling.py"
    toy = ["--sizes", "30,60", "--transactions", "4", "--batch", "2"]
    done = subprocess.run(
        [sys.executable, str(script), *toy, "--huge-pages"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    reason = bench.huge_pages_unavailable()
    if reason is None:
        assert done.returncode == 0, done.stderr
        pages = r"^memory pages: huge pages requested; [\d,]+ MiB of [\d,]+ MiB resident on huge pages$"
        assert re.search(pages, done.stdout, re.MULTILINE)
        assert re.search(r"^target: local growth", done.stdout, re.MULTILINE)
    else:
        assert done.returncode == 1
        assert done.stderr.strip() == f"--huge-pages: {reason}"


def test_every_engine_leaves_its_store_consistent_after_the_mix() -> None:
    # The timed mix must really do its writes: every create lands and every replace moves its entry.
    bench = load_benchmark()
    population = bench.build_population(40)
    work = bench.plans(40, 6, seed=1)
    local, raw, drv = bench.load(40, population)
    for engine in (local, raw, drv):
        for plan in work:
            engine.run(plan)
    assert local.driver.store.stats()["records"] == 46
    for engine in (raw, drv):
        assert engine.db.execute("SELECT count(*) FROM records").fetchone() == (46,)
        assert engine.db.execute("SELECT count(*) FROM index_entries").fetchone() == (46,)


def test_instruction_counting_child_runs_both_engines_outside_valgrind(tmp_path: Path) -> None:
    # Outside valgrind the callgrind client request is a no-op, so the child's whole path
    # (shim, store loading, the counted loop) can be checked without the slow valgrind run.
    instructions = load_script("local_instructions")
    try:
        shim = instructions.build_shim(tmp_path)
    except SystemExit as missing:
        pytest.skip(f"cannot build the callgrind shim here: {str(missing).splitlines()[0]}")
    for engine in instructions.ENGINES:
        instructions.child(30, engine, 4, str(shim))


def test_boundary_benchmark_prints_its_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    load_script("process_boundary").main(["--no-certify", "--exchanges", "20"])
    out = capsys.readouterr().out
    assert re.fullmatch(
        r"round trip: one exchange \d+ us, one empty transaction \d+ us \(load average [\d.]+\)\n", out
    )


def test_time_to_failure_prints_a_row_per_bug_and_the_target_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_script("time_to_failure")
    assert len({case.name for case in bench.CASES}) >= 5
    assert bench.main(["--case", "limit off-by-one"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(
        r"^(limit off-by-one) +\| limits\.query-results-boundary +\|((?: +[\d.]+ \|){4}) [1-9]\d*$", out, re.M
    )
    assert len(rows) == 1, out
    assert re.search(r"^target: .*median [\d.]+ s, max [\d.]+ s: (met|MISSED)$", out, re.M), out


def test_time_to_failure_via_the_cli_times_the_same_bug_through_runlane_certify(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_script("time_to_failure")
    argv = bench.certify_command(bench.CASES[0], 3, Path("db"))
    assert argv[1:3] == ["run", "--driver"] and "-v" in argv
    assert argv[argv.index("--examples") + 1] == "db"
    assert bench.main(["--case", "limit off-by-one", "--via", "cli"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(
        r"^(limit off-by-one) +\| limits\.query-results-boundary +\|((?: +[\d.]+ \|){4}) [1-9]\d*$", out, re.M
    )
    assert len(rows) == 1, out


def test_time_to_failure_refuses_an_unknown_case() -> None:
    with pytest.raises(SystemExit):
        load_script("time_to_failure").main(["--case", "no such bug"])


def test_history_checker_benchmark_prints_one_line_per_history(capsys: pytest.CaptureFixture[str]) -> None:
    load_script("history_checker").main(["--transactions", "120", "--repeat", "1"])
    out = capsys.readouterr().out
    lines = re.findall(
        r"^(.+): [\d,]+ transactions, .* anomalies: (.+); checked in [\d.]+ s CPU.*$", out, re.MULTILINE
    )
    found = dict(lines)
    assert list(found)[:2] == ["serializable (local)", "snapshot isolation (local, weakened)"]
    assert found["serializable (local)"] == "none"
    # Elle's unfindable G-single, buried in noise either side of it, is named whatever the order.
    buried = [anomalies for label, anomalies in lines if label.startswith("buried G-single, noise")]
    assert len(buried) == 2 and all("G-single" in anomalies for anomalies in buried)
    # Elle's closed-predicate cycle, buried in the serializable history, is named.
    assert found["buried G-single through scans, in the serializable history"] == "G-single"


def test_certify_speed_prints_a_row_with_its_median_figures_and_the_aim_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_script("certify_speed")
    assert bench.main(["--row", "version", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^load average [\d.]+ on \d+ cores; median of 1 run\(s\)$", out, re.M), out
    row = r"^version +\| +[\d.]+ \| +[\d.]+ \| +- \| +0 \| (met|MISSED by [\d.]+ s) \(CPU <= 0\.3 s\)$"
    assert re.search(row, out, re.M), out


def test_certify_speed_gives_every_run_row_a_fresh_example_database_and_takes_the_median() -> None:
    bench = load_script("certify_speed")
    seen: list[list[str]] = []
    walls = iter([3.0, 1.0, 2.0])

    def fake(argv: list[str], cwd: Path) -> object:
        seen.append(list(argv))
        return bench.Sample(cpu=0.5, wall=next(walls), first_failure=None, exit_code=0)

    assert bench.main(["--row", "quick", "--repeat", "3"], runner=fake) == 0
    databases = [argv[argv.index("--examples") + 1] for argv in seen]
    assert len(set(databases)) == 3
    assert bench.verdict(bench.Aim("wall", 5.0), 0.5, 2.0, None) == "met (wall <= 5 s)"
    assert bench.verdict(bench.Aim("wall", 1.5), 0.5, 2.0, None) == "MISSED by 0.50 s (wall <= 1.5 s)"
    assert bench.verdict(bench.Aim("first", 3.0), 0.5, 2.0, None).startswith("MISSED: no failure printed")


def test_certify_speed_skips_an_example_whose_server_does_not_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_script("certify_speed")
    assert bench.main(["--row", "redis", "--repeat", "1", "--redis-url", "redis://127.0.0.1:1/0"]) == 0
    assert re.search(r"^redis +\| skipped: ", capsys.readouterr().out, re.M)


def test_certify_speed_refuses_an_unknown_row() -> None:
    with pytest.raises(SystemExit):
        load_script("certify_speed").main(["--row", "no such row"])
