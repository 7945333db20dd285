"""Certify every driver of the blind batch and print which ones the suites refuse.

Usage (from the repository root, so ``tests.mutants`` imports)::

    python benchmarks/blind_batch.py                     # controls, then the whole batch
    python benchmarks/blind_batch.py --only NAME ...     # some of them
    python benchmarks/blind_batch.py --results out.jsonl # keep one JSON line per driver (resumable)
    python benchmarks/blind_batch.py --batch 5           # the fifth batch (tests/mutants/blind_batch5.py)

Each driver gets a full certification (every area) at the ``quick`` profile with
seed 0, through ``certify_driver``: the same supervised path ``runlane-certify
run`` takes, so "refused" means what a driver author would see. A driver counts
as refused when the run does not certify it; the table also says which
requirements failed and whether the one the bug was written against is among
them. Runs are serial (one worker): the machine is shared, and CPU time per
driver (the children's user+sys) is printed with each row.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.mutants.blind_batch import BLIND_MUTANTS, CONTROLS, BlindMutant  # noqa: E402

from runlane_conformance.runner import certify_driver  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def certify_one(mutant: BlindMutant, *, seed: int = 0, profile: str = "quick") -> dict[str, object]:
    """One full certification of ``mutant``; a JSON-ready summary of the verdict."""
    cpu, wall = _children_cpu(), time.perf_counter()
    result = certify_driver(mutant.target, hypothesis_profile=profile, seed=seed, workers=1)
    failed = sorted(r.id for r in result.failed_requirements)
    return {
        "name": mutant.name,
        "dimension": mutant.dimension,
        "intended": mutant.kills,
        "certified": result.certified,
        "status": result.status.value,
        "failed": failed,
        "inconclusive": sorted(r.id for r in result.inconclusive_requirements),
        "problems": list(result.problems),
        "intended_failed": mutant.kills in failed,
        "cpu_seconds": round(_children_cpu() - cpu, 1),
        "wall_seconds": round(time.perf_counter() - wall, 1),
    }


def _row(entry: dict[str, object]) -> str:
    verdict = "CERTIFIED" if entry["certified"] else "NOT CERTIFIED"
    failed = ", ".join(f"`{r}`" for r in entry["failed"]) or "-"  # type: ignore[attr-defined]
    if entry["inconclusive"]:
        failed += " (inconclusive: " + ", ".join(entry["inconclusive"]) + ")"  # type: ignore[arg-type]
    hit = "yes" if entry["intended_failed"] else "no"
    return (
        f"| `{entry['name']}` | {entry['dimension']} | `{entry['intended']}` | {verdict} | {hit} | "
        f"{failed} | {entry['cpu_seconds']} |"
    )


def table(entries: list[dict[str, object]]) -> str:
    """The markdown table of verdicts, controls first."""
    lines = [
        "| mutant | dimension | intended requirement | verdict | intended failed? "
        "| failed requirements | CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines.extend(_row(entry) for entry in entries)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="names of the drivers to certify")
    parser.add_argument("--results", type=Path, default=None, help="JSON lines file (resumed if present)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--no-controls", action="store_true", help="skip the bug-free controls")
    parser.add_argument("--batch", type=int, choices=(1, 5), default=1, help="which blind batch (1 or 5)")
    args = parser.parse_args(argv)

    drivers = BLIND_MUTANTS
    if args.batch == 5:
        from tests.mutants.blind_batch5 import BLIND5_MUTANTS

        drivers = BLIND5_MUTANTS
    chosen = ([] if args.no_controls else CONTROLS) + drivers
    if args.only:
        unknown = set(args.only) - {m.name for m in chosen}
        if unknown:
            parser.error(f"unknown driver(s): {', '.join(sorted(unknown))}")
        chosen = [m for m in chosen if m.name in args.only]
    done: dict[str, dict[str, object]] = {}
    if args.results is not None and args.results.exists():
        for line in args.results.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                done[str(entry["name"])] = entry
    entries: list[dict[str, object]] = []
    for mutant in chosen:
        entry = done.get(mutant.name)
        if entry is None:
            entry = certify_one(mutant, seed=args.seed, profile=args.profile)
            if args.results is not None:
                with args.results.open("a") as out:
                    out.write(json.dumps(entry) + "\n")
            print(_row(entry), file=sys.stderr, flush=True)
        entries.append(entry)
    print(table(entries))
    batch = [e for e in entries if e["dimension"] != "control"]
    refused = sum(not e["certified"] for e in batch)
    named = sum(bool(e["intended_failed"]) for e in batch)
    print(f"\nrefused {refused} of {len(batch)}; the intended requirement failed for {named} of {len(batch)}")
    controls = [e for e in entries if e["dimension"] == "control"]
    if any(not e["certified"] for e in controls):
        print("WARNING: a bug-free control was refused; the batch measures the machinery", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
