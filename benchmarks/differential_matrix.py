"""Which cells of the dimension matrix the differential workload exercises, per profile.

Runs the three searches of the ``model`` area (``model.differential-reads``,
``model.differential-scans``, ``model.scan-relations``) against the bundled
``local`` driver under each Hypothesis profile asked for (``quick`` and
``default`` unless told otherwise), with a fixed seed, exactly as a
certification runs them (same programs, steps and examples: the profile fixes
them, never the clock), and prints, for every dimension (instance, OS process,
clock jump, table, write kind, value shape, raised error, outcome, index,
direction, selection mode, page position, range bounds, fault point, date
shift, the per-table sweep, overlapping competitors and the serial order they
ended in, repeated scans, read-back indexes, appends, operator reads), how
often each value was exercised by each rule family. A value that no family
exercised under a profile is printed as ``-`` and listed at the end: a gap is
a visible empty cell, not a guess.

Run from the repository root: ``python benchmarks/differential_matrix.py``
(``--profile NAME`` repeatable, ``--seed N``, ``--driver SPEC`` with
``--option k=v``). Nothing here is timed.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

from runlane_conformance.fixtures.hypothesis_profiles import load_profile, stateful_step_count
from runlane_conformance.harness import load_harness, parse_driver_options
from runlane_conformance.suites import _differential_support as differential
from runlane_conformance.suites._hypothesis_support import SearchBudget

FAMILIES = ("reads", "scans", "relations")


def exercise(
    spec: str, options: dict[str, str], profile: str, seed: int
) -> tuple[Counter[tuple[str, str, str]], str]:
    """The cells one certification's three searches exercise under ``profile``, and what ran."""
    load_profile(profile)
    differential.COVERAGE.clear()
    harness = load_harness(spec, options)
    ran = []
    try:
        for family in ("reads", "scans"):
            budget = SearchBudget(None)
            differential.differential_search(harness, family, budget, seed=seed)
            ran.append(f"{family}: {budget.examples} programs, {budget.steps} steps")
        budget = SearchBudget(None)
        differential.relations_search(harness, budget, seed=seed)
        ran.append(f"relations: {budget.examples} programs, {budget.steps} steps")
    finally:
        harness.close()
    summary = (
        f"profile {profile}: {differential.program_count()} programs per search, "
        f"{stateful_step_count()} steps each; " + "; ".join(ran)
    )
    return Counter(differential.COVERAGE), summary


def render(profiles: Sequence[str], found: dict[str, Counter[tuple[str, str, str]]]) -> str:
    """One table per dimension: a row per value, a column per family and profile."""
    lines: list[str] = []
    columns = [f"{family}/{profile}" for family in FAMILIES for profile in profiles]
    empty: dict[str, list[str]] = {profile: [] for profile in profiles}
    for dimension, values in differential.dimensions().items():
        width = max(len(dimension), *(len(value) for value in values))
        lines.append("")
        lines.append(f"{dimension:<{width}}  " + "  ".join(f"{column:>16}" for column in columns))
        for value in values:
            cells = []
            for family in FAMILIES:
                for profile in profiles:
                    count = found[profile].get((family, dimension, value), 0)
                    cells.append(f"{count if count else '-':>16}")
            for profile in profiles:
                if not any(found[profile].get((family, dimension, value)) for family in FAMILIES):
                    empty[profile].append(f"{dimension}={value}")
            lines.append(f"{value:<{width}}  " + "  ".join(cells))
    lines.append("")
    for profile in profiles:
        gaps = ", ".join(empty[profile]) or "none"
        lines.append(f"empty cells under {profile} (no family exercised them): {gaps}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", action="append", choices=("quick", "default", "thorough"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--driver", default="local")
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args(argv)
    profiles = args.profile or ["quick", "default"]
    options = parse_driver_options(args.option)
    found: dict[str, Counter[tuple[str, str, str]]] = {}
    for profile in profiles:
        found[profile], summary = exercise(args.driver, options, profile, args.seed)
        print(summary)
    print(f"\ndimension matrix of the differential workload on {args.driver} (seed {args.seed}); counts")
    print(render(profiles, found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
