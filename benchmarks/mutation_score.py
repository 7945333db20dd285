"""The mutation score of the suites: how many small bugs in the reference driver and core they catch.

Cosmic Ray (a maintained mutation-testing tool, ``pip install -e '.[mutation]'``)
enumerates every mutant of ``runlane_conformance/local/`` and
``runlane_conformance/core/`` with its standard operators and records each
result in its own session database, so ``cr-report SESSION`` also reads a run.
This script decides *what runs* for each mutant and *what counts as killed*:

* **What runs.** A coverage pass (one pytest run per driver configuration,
  with the coverage context switched per contract area) maps every line of
  the two packages to the suite areas that execute it. A mutant runs only the
  areas covering its lines, in the pytest plugin exactly as a driver author
  runs them: ``pytest --pyargs runlane_conformance.suites.test_AREA ...
  --runlane-driver local --runlane-hypothesis-profile quick --runlane-area
  AREA``, cheapest area first, stopping at the first failure. A line that runs
  only while modules are imported is covered by every area. Two
  configurations are tried in turn: ``local`` and ``local`` with
  ``index_lag=3`` (the code only a lagging index runs is reached only there).
* **Killed.** The run exits non-zero: a check failed, the driver did not load,
  or collection broke, each of which denies certification. A mutant whose
  lines no area executes is a survivor (no check can see it) and is listed so.
* **Timeouts.** Mutant runs use a short per-check deadline (``--check-timeout``,
  default 30 s) and a whole-run deadline. A run that ends by either is not yet
  a kill: it is replayed through ``runlane-certify run`` on the same areas with
  the quick profile's own per-check budget, and counts as killed only if that
  verdict is not certified (exit status non-zero). A mutant that is merely
  slow, and passes there, survives. ``--no-confirm-timeouts`` reports such
  mutants as ``timeout`` and leaves them out of the killed count.
* **Skipped.** Mutants inside annotations: every mutated module has
  ``from __future__ import annotations``, so annotations are strings nobody
  evaluates and changing ``A | B`` to ``A & B`` there changes nothing.
* **Triage.** Each survivor is either killed by a check (the next run shows
  it) or listed in ``benchmarks/mutation_triage.toml`` as ``equivalent`` (no
  behaviour the contract can observe changes) or ``out-of-scope`` (code the
  suites never receive, such as option parsing), with a one-line reason. Its
  key is the mutant's identity, stable under line shifts: module, enclosing
  function, operator, a hash of the mutated line and node, and an ordinal
  among identical keys.

The score printed is ``killed / (ran - equivalent - out-of-scope)``, on
what ran. A full run takes hours on a shared two-core machine, so ``--module``,
``--function`` and ``--operator`` restrict the mutants and ``--sample N
--sample-seed S`` draws a deterministic sample (the N mutants whose hash with
the seed is lowest: the same N for the same code, whatever ran before).

Run from the repository root, by hand or in a scheduled job (never in CI)::

    nice -n 19 python benchmarks/mutation_score.py --sample 200
    nice -n 19 python benchmarks/mutation_score.py --module local/store.py --function _commit
    python benchmarks/mutation_score.py --list --module core/completion_waits.py
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_NAME = "runlane_conformance"
SOURCE_ROOT = REPO / "src"
TARGETS = ("local", "core")
TRIAGE_FILE = REPO / "benchmarks" / "mutation_triage.toml"
AREA_MODULE_PREFIX = f"{PACKAGE_NAME}.suites.test_"
ALL_AREAS = "*"
_CONTEXT_FILE_VARIABLE = "MUTATION_SCORE_AREA_TIMES"
_REQUIREMENT_IN_NODEID = re.compile(r"([a-z_]+\.[a-z0-9]+(?:-[a-z0-9]+)*)\]$")


class Status(StrEnum):
    """What became of one mutant."""

    KILLED = "killed"
    SURVIVED = "survived"
    UNCOVERED = "uncovered"  # no suite area executes its lines: a survivor no check can see
    TIMEOUT = "timeout"  # ran out of time and was not confirmed by the CLI's verdict
    SKIPPED = "skipped"  # inside an annotation: never evaluated
    INCOMPETENT = "incompetent"  # the mutated module does not compile (Cosmic Ray mutates a bare ``*``)


@dataclass(frozen=True)
class DriverConfig:
    """One driver configuration the suites run the mutants on."""

    label: str
    options: tuple[str, ...]


CONFIGS = (DriverConfig("local", ()), DriverConfig("local index_lag=3", ("index_lag=3",)))


@dataclass(frozen=True)
class Mutant:
    """One mutation as Cosmic Ray enumerated it, with the identity triage keys use."""

    job_id: str
    module_path: Path  # relative to SOURCE_ROOT, e.g. runlane_conformance/local/store.py
    operator: str
    occurrence: int
    start: tuple[int, int]
    end: tuple[int, int]
    definition: str
    identity: str = ""

    @property
    def module(self) -> str:
        return ".".join(self.module_path.with_suffix("").parts)

    @property
    def location(self) -> str:
        return f"{self.module_path}:{self.start[0]}"


@dataclass(frozen=True)
class Outcome:
    """The result of running one mutant."""

    status: Status
    detail: str = ""
    seconds: float = 0.0
    config: str = ""
    areas: tuple[str, ...] = ()
    diff: str = ""


@dataclass(frozen=True)
class TriageEntry:
    """A survivor's triage: ``equivalent`` or ``out-of-scope``, with the reason."""

    verdict: str
    reason: str


TRIAGE_VERDICTS = ("equivalent", "out-of-scope")


# --- identity, sampling, annotation spans: pure functions the tests exercise --------------------


def mutant_identity(module: str, definition: str, operator: str, line: str, node_text: str) -> str:
    """A key that survives edits elsewhere in the file: no line number, only what is mutated where."""
    digest = hashlib.sha256(f"{line.strip()}\0{node_text}".encode()).hexdigest()[:10]
    return f"{module}:{definition}:{operator}:{digest}"


def with_ordinals(mutants: Iterable[Mutant]) -> list[Mutant]:
    """Give each mutant its final identity: the base key plus its ordinal among equal base keys."""
    seen: Counter[str] = Counter()
    result = []
    for mutant in mutants:
        ordinal = seen[mutant.identity]
        seen[mutant.identity] += 1
        result.append(replace(mutant, identity=f"{mutant.identity}:{ordinal}"))
    return result


def node_text(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text between two (1-based line, 0-based column) positions."""
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1] : end[1]]
    parts = [lines[start[0] - 1][start[1] :], *lines[start[0] : end[0] - 1], lines[end[0] - 1][: end[1]]]
    return "\n".join(parts)


def sample(mutants: Sequence[Mutant], size: int | None, seed: int) -> list[Mutant]:
    """The ``size`` mutants whose identity hashes lowest with ``seed`` (all of them when ``None``).

    Depends only on the identities, so the same code and seed always give the
    same sample, and adding a mutant elsewhere moves at most one out.
    """
    if size is None or size >= len(mutants):
        return list(mutants)
    ranked = sorted(mutants, key=lambda m: hashlib.sha256(f"{seed}\0{m.identity}".encode()).hexdigest())
    chosen = {m.identity for m in ranked[:size]}
    return [m for m in mutants if m.identity in chosen]


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Every annotation's (start, end) position, as (1-based line, 0-based column) pairs."""
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    nodes: list[ast.expr | None] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            nodes.append(node.returns)
        elif isinstance(node, ast.arg | ast.AnnAssign):
            nodes.append(node.annotation)
    for expr in nodes:
        if expr is not None and expr.end_lineno is not None and expr.end_col_offset is not None:
            spans.append(((expr.lineno, expr.col_offset), (expr.end_lineno, expr.end_col_offset)))
    return spans


def inside(
    span: tuple[tuple[int, int], tuple[int, int]], start: tuple[int, int], end: tuple[int, int]
) -> bool:
    """Whether the positions ``start``..``end`` lie within ``span``."""
    return span[0] <= start and end <= span[1]


def statement_lines(source: str) -> dict[int, int]:
    """Each line inside a simple statement -> the statement's first line (what coverage records)."""
    first: dict[int, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            body_start = min(
                (
                    child.lineno
                    for name in ("body", "orelse", "finalbody", "handlers")
                    for child in getattr(node, name, []) or []
                ),
                default=node.end_lineno + 1,
            )
            for line in range(node.lineno, min(node.end_lineno, body_start - 1) + 1):
                # Inner statements are walked later and overwrite: the innermost wins.
                first[line] = node.lineno
    return first


def load_triage(path: Path = TRIAGE_FILE) -> dict[str, TriageEntry]:
    """The triage file's entries by mutant identity; a bad verdict or a missing reason is an error."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries: dict[str, TriageEntry] = {}
    for identity, fields in data.get("mutant", {}).items():
        verdict, reason = fields.get("verdict"), str(fields.get("reason", "")).strip()
        if verdict not in TRIAGE_VERDICTS or not reason:
            raise ValueError(f"{path}: mutant {identity!r} needs verdict in {TRIAGE_VERDICTS} and a reason")
        entries[identity] = TriageEntry(str(verdict), reason)
    return entries


@dataclass
class Score:
    """The counts a run prints, on the mutants that ran."""

    counts: Counter[Status] = field(default_factory=Counter)
    equivalent: int = 0
    out_of_scope: int = 0

    def add(self, outcome: Outcome, triage: TriageEntry | None) -> None:
        self.counts[outcome.status] += 1
        if triage is not None and outcome.status in (Status.SURVIVED, Status.UNCOVERED, Status.TIMEOUT):
            if triage.verdict == "equivalent":
                self.equivalent += 1
            else:
                self.out_of_scope += 1

    @property
    def ran(self) -> int:
        return sum(
            n for status, n in self.counts.items() if status not in (Status.SKIPPED, Status.INCOMPETENT)
        )

    @property
    def denominator(self) -> int:
        return self.ran - self.equivalent - self.out_of_scope

    @property
    def raw(self) -> float:
        return self.counts[Status.KILLED] / self.ran if self.ran else 1.0

    @property
    def triaged(self) -> float:
        return self.counts[Status.KILLED] / self.denominator if self.denominator else 1.0


# --- enumeration ---------------------------------------------------------------------------------


def target_modules(root: Path) -> list[Path]:
    """The Python files of ``local/`` and ``core/`` under ``root`` (a tree holding the package)."""
    return sorted(path for target in TARGETS for path in (root / PACKAGE_NAME / target).glob("*.py"))


def enumerate_mutants(session: Path, root: Path) -> list[Mutant]:
    """Cosmic Ray's mutants of the target modules under ``root``, recorded in a fresh session database."""
    from cosmic_ray.commands.init import init  # type: ignore[import-untyped]
    from cosmic_ray.work_db import WorkDB, use_db  # type: ignore[import-untyped]

    session.parent.mkdir(parents=True, exist_ok=True)
    session.unlink(missing_ok=True)
    sources: dict[Path, list[str]] = {}
    found = []
    with use_db(str(session), WorkDB.Mode.create) as db:
        init(target_modules(root), db, {})
        for item in db.work_items:
            spec = item.mutations[0]
            relative = Path(spec.module_path).resolve().relative_to(root.resolve())
            lines = sources.setdefault(relative, (root / relative).read_text(encoding="utf-8").splitlines())
            start: tuple[int, int] = (int(spec.start_pos[0]), int(spec.start_pos[1]))
            end: tuple[int, int] = (int(spec.end_pos[0]), int(spec.end_pos[1]))
            base = Mutant(
                item.job_id,
                relative,
                spec.operator_name,
                spec.occurrence,
                start,
                end,
                spec.definition_name or "<module>",
            )
            identity = mutant_identity(
                base.module, base.definition, base.operator, lines[start[0] - 1], node_text(lines, start, end)
            )
            found.append(replace(base, identity=identity))
    found.sort(key=lambda m: (str(m.module_path), m.operator, m.occurrence))
    return with_ordinals(found)


def is_keyword_only_marker(line: str, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether the ``*`` at ``start`` is a parameter list's bare keyword-only marker, not a product.

    Cosmic Ray's binary-operator replacement also rewrites that marker: into
    ``/`` (a positional-only marker, which callers passing keywords never
    notice) or into invalid syntax. Neither is a mutation of behaviour.
    """
    if start[0] != end[0] or line[start[1] : end[1]] != "*":
        return False
    return line[end[1] :].lstrip()[:1] in (",", ")", "")


def skipped_in_annotations(mutants: Sequence[Mutant], root: Path) -> set[str]:
    """The identities of mutants inside an annotation or on a bare keyword-only ``*``."""
    spans: dict[Path, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    lines: dict[Path, list[str]] = {}
    skipped = set()
    for mutant in mutants:
        if mutant.module_path not in lines:
            lines[mutant.module_path] = (root / mutant.module_path).read_text(encoding="utf-8").splitlines()
        if is_keyword_only_marker(lines[mutant.module_path][mutant.start[0] - 1], mutant.start, mutant.end):
            skipped.add(mutant.identity)
            continue
        if mutant.module_path not in spans:
            source = (root / mutant.module_path).read_text(encoding="utf-8")
            if "from __future__ import annotations" not in source:
                spans[mutant.module_path] = []  # annotations are evaluated there: keep every mutant
            else:
                spans[mutant.module_path] = annotation_spans(source)
        if any(inside(span, mutant.start, mutant.end) for span in spans[mutant.module_path]):
            skipped.add(mutant.identity)
    return skipped


def select(
    mutants: Sequence[Mutant], modules: Sequence[str], functions: Sequence[str], operators: Sequence[str]
) -> list[Mutant]:
    """The mutants matching every given filter (module path glob, function name glob, operator part)."""

    def module_matches(m: Mutant) -> bool:
        relative = str(m.module_path.relative_to(PACKAGE_NAME))
        return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(m.module, p) for p in modules)

    return [
        m
        for m in mutants
        if (not modules or module_matches(m))
        and (not functions or any(fnmatch.fnmatch(m.definition, p) for p in functions))
        and (not operators or any(p in m.operator for p in operators))
    ]


# --- coverage: which areas execute which line ----------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Loaded with ``-p mutation_score`` under coverage: name the coverage context after the area."""
    import coverage

    cov = coverage.Coverage.current()
    module = getattr(getattr(item, "module", None), "__name__", "")
    area = module.removeprefix(AREA_MODULE_PREFIX) if module.startswith(AREA_MODULE_PREFIX) else ""
    if cov is not None:
        cov.switch_context(area)
    started = time.perf_counter()
    yield
    if cov is not None:
        cov.switch_context("")
    path = os.environ.get(_CONTEXT_FILE_VARIABLE)
    if path and area:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps([area, time.perf_counter() - started]) + "\n")


@dataclass(frozen=True)
class CoverageMap:
    """For one configuration: line -> areas executing it, and each area's clean run time."""

    lines: Mapping[str, Mapping[int, frozenset[str]]]  # relative module path -> line -> areas
    seconds: Mapping[str, float]


def suite_command(
    config: DriverConfig, areas: Sequence[str], check_timeout: float | None, seed: int
) -> list[str]:
    """The pytest plugin command that runs ``areas`` (all when empty) on ``config``."""
    modules = [f"{AREA_MODULE_PREFIX}{a}" for a in areas] or [f"{PACKAGE_NAME}.suites"]
    command = [
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-q",
        "-rf",
        "--no-header",
        "--pyargs",
        *modules,
        "--runlane-driver",
        "local",
        "--runlane-hypothesis-profile",
        "quick",
        "--runlane-examples",
        "none",
        f"--hypothesis-seed={seed}",
    ]
    for option in config.options:
        command += ["--runlane-option", option]
    for area in areas:
        command += ["--runlane-area", area]
    if check_timeout is not None:  # a mutant run: stop at the first failure, which is the kill
        command += ["--runlane-timeout", f"{check_timeout:g}", "-x"]
    return command


def build_coverage(root: Path, work: Path, config: DriverConfig, seed: int) -> CoverageMap:
    """Run every area once under coverage on the clean copy; the clean run must pass."""
    data_file = work / f"coverage-{len(config.options)}"
    times = work / f"times-{len(config.options)}.jsonl"
    times.unlink(missing_ok=True)
    include = ",".join(str(root / PACKAGE_NAME / t / "*") for t in TARGETS)
    command = [
        sys.executable,
        "-m",
        "coverage",
        "run",
        f"--data-file={data_file}",
        f"--include={include}",
        *suite_command(config, (), None, seed),
        "-p",
        "mutation_score",
    ]
    env = child_environment(root) | {_CONTEXT_FILE_VARIABLE: str(times)}
    env["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent)
    completed = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(
            f"the clean suites fail on {config.label}; fix that first:\n{completed.stdout[-3000:]}"
        )
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    lines: dict[str, dict[int, frozenset[str]]] = {}
    for measured in data.measured_files():
        relative = str(Path(measured).resolve().relative_to(root.resolve()))
        by_line = data.contexts_by_lineno(measured)
        lines[relative] = {
            line: frozenset(ALL_AREAS if context == "" else context for context in contexts)
            for line, contexts in by_line.items()
        }
    seconds: Counter[str] = Counter()
    for row in times.read_text(encoding="utf-8").splitlines():
        area, spent = json.loads(row)
        seconds[area] += spent
    return CoverageMap(lines, dict(seconds))


def covering_areas(mutant: Mutant, coverage: CoverageMap, first_lines: Mapping[int, int]) -> tuple[str, ...]:
    """The areas executing the mutant's lines, cheapest first; every area for an import-time line."""
    by_line = coverage.lines.get(str(mutant.module_path), {})
    found: set[str] = set()
    for line in range(mutant.start[0], mutant.end[0] + 1):
        found |= by_line.get(line, frozenset()) | by_line.get(first_lines.get(line, line), frozenset())
    if ALL_AREAS in found:
        found = set(coverage.seconds)
    return tuple(sorted(found, key=lambda area: (coverage.seconds.get(area, 0.0), area)))


# --- running one mutant --------------------------------------------------------------------------


def child_environment(root: Path) -> dict[str, str]:
    """This environment with the mutated copy first on the import path and no ambient pytest options."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_", "COVERAGE_"))}
    env["PYTHONPATH"] = str(root)
    env["PYTHONHASHSEED"] = "0"
    return env


def _run(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float) -> tuple[int | None, str]:
    """Run ``command`` in its own process group; ``None`` as status when it was killed at ``timeout``."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as output:
        process = subprocess.Popen(
            command, cwd=cwd, env=dict(env), stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            status: int | None = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            status = None
        except BaseException:  # interrupted: take the suite run down too, then stop
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        output.seek(0)
        return status, output.read()


def first_failure(output: str) -> str:
    """The requirement (or test) of the first ``FAILED``/``ERROR`` line of a pytest summary."""
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            nodeid = line.split(" ", 2)[1]
            match = _REQUIREMENT_IN_NODEID.search(nodeid)
            return match.group(1) if match else nodeid
    tail = [line for line in output.splitlines() if line.strip()]
    return tail[-1][:160] if tail else "no output"


def confirm_with_cli(
    root: Path, work: Path, config: DriverConfig, areas: Sequence[str], seed: int
) -> bool | None:
    """Whether ``runlane-certify run`` on ``areas``, with the profile's own budget, is not certified."""
    command = [
        sys.executable,
        "-m",
        "runlane_conformance.cli.app",
        "run",
        "--driver",
        "local",
        "--profile",
        "quick",
        "--seed",
        str(seed),
        "--examples",
        "none",
        "-x",
    ]
    for option in config.options:
        command += ["--option", option]
    for area in areas:
        command += ["--area", area]
    status, _ = _run(command, work, child_environment(root), timeout=900)
    return None if status is None else status != 0


@dataclass(frozen=True)
class RunSettings:
    check_timeout: float
    run_timeout: float
    confirm_timeouts: bool
    seed: int


def run_mutant(
    mutant: Mutant,
    root: Path,
    work: Path,
    coverages: Sequence[tuple[DriverConfig, CoverageMap]],
    first_lines: Mapping[int, int],
    settings: RunSettings,
) -> Outcome:
    """Apply ``mutant`` to the copy under ``root``, run the areas covering it, restore the copy."""
    from cosmic_ray.mutating import mutate_code  # type: ignore[import-untyped]
    from cosmic_ray.plugins import get_operator  # type: ignore[import-untyped]

    path = root / mutant.module_path
    original = path.read_text(encoding="utf-8")
    mutated = mutate_code(original, get_operator(mutant.operator)(), mutant.occurrence)
    if mutated is None:
        return Outcome(Status.SKIPPED, "no mutation at this occurrence")
    diff = _changed_lines(original, mutated)
    try:
        compile(mutated, str(path), "exec")
    except SyntaxError as error:
        return Outcome(Status.INCOMPETENT, f"does not compile: {error.msg}", diff=diff)
    started = time.monotonic()
    ran_any = False
    try:
        _write_source(path, mutated)
        for config, coverage in coverages:
            areas = covering_areas(mutant, coverage, first_lines)
            if not areas:
                continue
            ran_any = True
            command = [sys.executable, *suite_command(config, areas, settings.check_timeout, settings.seed)]
            status, output = _run(command, work, child_environment(root), settings.run_timeout)
            timed_out = status is None or "Failed: Timeout" in output or "Timeout (0:" in output
            if timed_out:
                verdict = (
                    confirm_with_cli(root, work, config, areas, settings.seed)
                    if settings.confirm_timeouts
                    else None
                )
                if verdict is True:
                    return Outcome(
                        Status.KILLED,
                        "timeout; runlane-certify: not certified",
                        time.monotonic() - started,
                        config.label,
                        areas,
                        diff,
                    )
                if verdict is None:
                    return Outcome(
                        Status.TIMEOUT,
                        "timed out (not confirmed)",
                        time.monotonic() - started,
                        config.label,
                        areas,
                        diff,
                    )
                continue  # slow, but certified: not a kill
            if status != 0:
                return Outcome(
                    Status.KILLED,
                    first_failure(output),
                    time.monotonic() - started,
                    config.label,
                    areas,
                    diff,
                )
    finally:
        _write_source(path, original)
    status_ = Status.SURVIVED if ran_any else Status.UNCOVERED
    return Outcome(status_, "", time.monotonic() - started, "", (), diff)


def _write_source(path: Path, text: str) -> None:
    """Write a module's source and drop its cached bytecode, whose timestamp check could miss the change."""
    for cached in path.parent.joinpath("__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()
    path.write_text(text, encoding="utf-8")


def _changed_lines(original: str, mutated: str) -> str:
    """``-old`` / ``+new`` for the lines the mutation changed."""
    before, after = original.splitlines(), mutated.splitlines()
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b]
    if len(before) != len(after) or not changed:
        import difflib

        return "\n".join(
            line
            for line in difflib.unified_diff(before, after, lineterm="", n=0)
            if line[:1] in "+-" and line[:3] not in ("+++", "---")
        )
    return "\n".join(f"-{before[i].strip()}\n+{after[i].strip()}" for i in changed)


def record(session: Path, mutant: Mutant, outcome: Outcome) -> None:
    """Store the outcome in Cosmic Ray's session database (``cr-report SESSION`` reads it)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult  # type: ignore[import-untyped]

    if outcome.status in (Status.SKIPPED, Status.INCOMPETENT):
        result = WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=outcome.detail)
    else:
        test = TestOutcome.KILLED if outcome.status is Status.KILLED else TestOutcome.SURVIVED
        result = WorkResult(
            worker_outcome=WorkerOutcome.NORMAL,
            test_outcome=test,
            output=f"{outcome.status}: {outcome.detail}",
            diff=outcome.diff,
        )
    with use_db(str(session), WorkDB.Mode.open) as db:
        db.set_result(mutant.job_id, result)


# --- the command ---------------------------------------------------------------------------------


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        help="only mutants of these modules (glob on local/store.py or the dotted name)",
    )
    parser.add_argument(
        "--function", action="append", default=[], help="only mutants in these functions (glob)"
    )
    parser.add_argument("--operator", action="append", default=[], help="only operators containing this text")
    parser.add_argument(
        "--identity",
        action="append",
        default=[],
        help="only this mutant (its identity as printed; repeatable)",
    )
    parser.add_argument(
        "--survivors-of",
        type=Path,
        default=None,
        help="only the survivors recorded in this --json file of an earlier run",
    )
    parser.add_argument("--sample", type=int, default=None, help="a deterministic sample of N mutants")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0, help="the Hypothesis seed of every suite run")
    parser.add_argument("--check-timeout", type=float, default=30.0)
    parser.add_argument("--run-timeout", type=float, default=300.0)
    parser.add_argument("--no-confirm-timeouts", action="store_true")
    parser.add_argument("--session", type=Path, default=Path(".runlane/mutation/session.sqlite"))
    parser.add_argument("--json", type=Path, default=None, help="write every outcome to this JSON file")
    parser.add_argument("--list", action="store_true", help="list the selected mutants and stop")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    # SIGTERM ends the run like Ctrl-C: the copy is restored, the scratch directory and suite run go.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    triage = load_triage()
    with tempfile.TemporaryDirectory(prefix="mutation-score-") as scratch:
        work = Path(scratch)
        root = work / "src"
        shutil.copytree(
            SOURCE_ROOT / PACKAGE_NAME, root / PACKAGE_NAME, ignore=shutil.ignore_patterns("__pycache__")
        )
        mutants = enumerate_mutants(args.session, root)
        skipped = skipped_in_annotations(mutants, root)
        eligible = [m for m in mutants if m.identity not in skipped]
        wanted = set(args.identity)
        if args.survivors_of is not None:
            wanted |= {
                row["identity"]
                for row in json.loads(args.survivors_of.read_text(encoding="utf-8"))
                if row["status"] in (Status.SURVIVED, Status.UNCOVERED, Status.TIMEOUT)
            }
        if wanted:
            eligible = [m for m in eligible if m.identity in wanted]
        chosen = sample(
            select(eligible, args.module, args.function, args.operator), args.sample, args.sample_seed
        )
        print(
            f"mutants: {len(mutants)} generated by Cosmic Ray, "
            f"{len(skipped)} in annotations or on a keyword-only * (skipped), "
            f"{len(eligible)} eligible, {len(chosen)} selected"
            + (f" (sample of {args.sample}, seed {args.sample_seed})" if args.sample is not None else "")
            + (
                f"; filters: module={args.module} function={args.function} operator={args.operator}"
                if args.module or args.function or args.operator
                else ""
            )
        )
        if args.list:
            from cosmic_ray.mutating import mutate_code
            from cosmic_ray.plugins import get_operator

            for m in chosen:
                print(f"  {m.identity}  {m.location}")
                source = (root / m.module_path).read_text(encoding="utf-8")
                mutated = mutate_code(source, get_operator(m.operator)(), m.occurrence)
                for line in _changed_lines(source, mutated or source).splitlines():
                    print(f"      {line}")
            return 0
        _check_copy_is_imported(root, work)
        started = time.monotonic()
        coverages = [(config, build_coverage(root, work, config, args.seed)) for config in CONFIGS]
        print(
            f"coverage: {time.monotonic() - started:.0f} s for {len(CONFIGS)} configurations; "
            f"clean area times (s): "
            + ", ".join(f"{a} {s:.1f}" for a, s in sorted(coverages[0][1].seconds.items()))
        )
        first_lines = {
            path: statement_lines((root / path).read_text(encoding="utf-8"))
            for path in {m.module_path for m in chosen}
        }
        settings = RunSettings(args.check_timeout, args.run_timeout, not args.no_confirm_timeouts, args.seed)
        score = Score()
        rows: list[dict[str, Any]] = []
        for index, mutant in enumerate(chosen, 1):
            outcome = run_mutant(mutant, root, work, coverages, first_lines[mutant.module_path], settings)
            record(args.session, mutant, outcome)
            entry = triage.get(mutant.identity)
            score.add(outcome, entry)
            rows.append(
                {
                    "identity": mutant.identity,
                    "location": mutant.location,
                    "status": str(outcome.status),
                    "detail": outcome.detail,
                    "config": outcome.config,
                    "areas": list(outcome.areas),
                    "seconds": round(outcome.seconds, 2),
                    "diff": outcome.diff,
                    "triage": None if entry is None else entry.verdict,
                }
            )
            if args.json is not None:  # after every mutant, so an interrupted run keeps what it measured
                args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
            print(
                f"[{index}/{len(chosen)}] {outcome.status:<9} {outcome.seconds:5.1f}s {mutant.location} "
                f"{mutant.operator.removeprefix('core/')} {outcome.detail}",
                flush=True,
            )
        elapsed = time.monotonic() - started
    survivors = [r for r in rows if r["status"] in (Status.SURVIVED, Status.UNCOVERED, Status.TIMEOUT)]
    print(f"\nsurvivors ({len(survivors)}):")
    for row in survivors:
        verdict = triage.get(row["identity"])
        note = f"{verdict.verdict}: {verdict.reason}" if verdict else "UNTRIAGED"
        print(f"  {row['identity']}\n    {row['location']} [{row['status']}] {note}")
        for line in row["diff"].splitlines():
            print(f"      {line}")
    counts = score.counts
    print(
        f"\nran {score.ran} mutants in {elapsed / 60:.1f} min: killed {counts[Status.KILLED]}, "
        f"survived {counts[Status.SURVIVED]}, uncovered {counts[Status.UNCOVERED]}, "
        f"timeout {counts[Status.TIMEOUT]}, incompetent {counts[Status.INCOMPETENT]} (not counted); "
        f"triaged equivalent "
        f"{score.equivalent}, out-of-scope {score.out_of_scope}"
    )
    print(
        f"mutation score: {score.raw:.1%} of all that ran; {score.triaged:.1%} of the non-equivalent "
        f"({counts[Status.KILLED]}/{score.denominator})"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


def _check_copy_is_imported(root: Path, work: Path) -> None:
    """The suites must import the copy being mutated, not the checkout: otherwise nothing is measured."""
    probe = subprocess.run(
        [sys.executable, "-c", f"import {PACKAGE_NAME}.local.store as m; print(m.__file__)"],
        cwd=work,
        env=child_environment(root),
        capture_output=True,
        text=True,
        check=True,
    )
    if not Path(probe.stdout.strip()).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"the suites would import {probe.stdout.strip()}, not the mutated copy under {root}")


if __name__ == "__main__":
    sys.exit(main())
