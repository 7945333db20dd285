"""Run the conformance suites in-process and gather a verdict per requirement.

``run_suites`` is the one engine behind ``runlane-certify`` and behind the
toolkit's own mutant tests. It validates the driver *before* pytest starts (a
missing or broken driver is a one-line ``HarnessError``, never a pytest
traceback), then runs ``pytest --pyargs runlane_conformance.suites`` in this
process with a collector plugin that records, for every check, its
requirement id, outcome, duration and the short reason a human needs.

Guarantees:

* A run is reproducible: when no seed is given one is chosen and passed to
  Hypothesis with ``--hypothesis-seed``; the seed is kept in the result and
  printed in every reproduce line.
* Requirement verdicts are conservative: a requirement fails if any of its
  checks failed or errored, and counts as skipped only when every check
  skipped.
* pytest's own terminal output never reaches the caller's stdout; it is kept
  in ``RunResult.output`` so a broken run can still be diagnosed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import secrets
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from .contract.errors import RunlaneError
from .contract.values import StorageProfile
from .harness import DriverInfo, DriverLoadError, HarnessError, available_drivers, load_harness
from .requirements import AREAS, Requirement, RequirementLevel, all_requirements
from .safe_text import describe_exception, redact_options, safe_repr

__all__ = [
    "CHECK_TIMEOUT_SECONDS",
    "HYPOTHESIS_PROFILES",
    "SUITE_ARGS",
    "SUITE_MODULE_PREFIXES",
    "AreaSummary",
    "CollectionFinished",
    "Outcome",
    "RequirementOutcome",
    "RequirementResult",
    "RunBrokenError",
    "RunEvent",
    "RunListener",
    "RunResult",
    "RunUsageError",
    "TestFinished",
    "TestResult",
    "probe_driver",
    "redact_options",
    "run_suites",
]

#: What pytest collects for a run; tests of the runner point this at a small fake suite.
SUITE_ARGS: tuple[str, ...] = ("--pyargs", "runlane_conformance.suites")

#: Modules re-imported by every run (see ``run_suites``).
SUITE_MODULE_PREFIXES: tuple[str, ...] = ("runlane_conformance.suites.",)

#: Upper bound for one check (pytest-timeout); a driver that blocks forever fails that check only.
CHECK_TIMEOUT_SECONDS = 120

#: The Hypothesis settings profiles the plugin offers, cheapest first.
HYPOTHESIS_PROFILES: tuple[str, ...] = ("quick", "default", "thorough")

_REQUIREMENT_PROPERTY = "runlane_requirement"
_REQUIREMENT_ID = re.compile(r"[a-z_]+\.[a-z0-9]+(?:-[a-z0-9]+)*")
_BLOB = re.compile(r"@reproduce_failure\([^()]*\)")
_MODULE_AREA = re.compile(r"(?:^|/)test_([a-z_]+)\.py")

# pytest's own exit codes (kept numeric so this module does not need pytest at import time).
_PYTEST_OK, _PYTEST_FAILED, _PYTEST_INTERRUPTED, _PYTEST_INTERNAL, _PYTEST_USAGE, _PYTEST_EMPTY = range(6)


class RunUsageError(RunlaneError, ValueError):
    """The run was asked for something impossible (unknown area, bad worker count, xdist missing).

    The message is one line for the user; the CLI exits 2 on it.
    """


class RunBrokenError(RunlaneError, RuntimeError):
    """pytest itself could not complete the run (collection error, internal error, nothing collected).

    This says nothing about the driver; ``output`` holds pytest's text for diagnosis.
    """

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class Outcome(StrEnum):
    """What happened to one check (one pytest test)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


class RequirementOutcome(StrEnum):
    """What happened to one requirement across all of its checks."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class TestResult:
    """One check as it ran: where it lives, which rule it enforces, and how it ended.

    ``message`` is the skip reason or the one-line exception text; ``longrepr``
    the full failure text; ``hypothesis_blob`` the ``@reproduce_failure(...)``
    decorator Hypothesis printed, when it did.
    """

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    requirement_id: str | None
    area: str
    outcome: Outcome
    duration: float
    message: str | None = None
    longrepr: str | None = None
    hypothesis_blob: str | None = None

    @property
    def name(self) -> str:
        """The test's own name with its parameter ids, e.g. ``test_x[limits.max-point-reads]``."""
        return self.nodeid.rpartition("::")[2]

    @property
    def failed(self) -> bool:
        return self.outcome in (Outcome.FAILED, Outcome.ERROR)


@dataclass(frozen=True)
class RequirementResult:
    """The verdict on one requirement, folded from all of its checks."""

    requirement: Requirement
    outcome: RequirementOutcome
    reason: str | None
    tests: tuple[TestResult, ...]

    @property
    def id(self) -> str:
        return self.requirement.id

    @property
    def area(self) -> str:
        return self.requirement.area

    @property
    def level(self) -> RequirementLevel:
        return self.requirement.level

    @property
    def duration(self) -> float:
        return sum(test.duration for test in self.tests)

    @property
    def failures(self) -> tuple[TestResult, ...]:
        return tuple(test for test in self.tests if test.failed)


@dataclass(frozen=True)
class AreaSummary:
    """Counts for one contract area, by requirement and by check."""

    area: str
    passed: int
    failed: int
    skipped: int
    tests_passed: int
    tests_failed: int
    tests_skipped: int
    duration: float
    skip_reasons: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class CollectionFinished:
    """Live event: pytest has collected the run; ``totals`` counts checks per area."""

    totals: Mapping[str, int]


@dataclass(frozen=True)
class TestFinished:
    """Live event: one check has finished (after its teardown)."""

    __test__ = False

    test: TestResult


RunEvent = CollectionFinished | TestFinished
RunListener = Callable[[RunEvent], None]


@dataclass(frozen=True)
class RunResult:
    """Everything one run established, in a form the report, JUnit and badge are built from."""

    driver: str
    options: Mapping[str, str]
    driver_info: DriverInfo | None
    profile: StorageProfile
    seed: int
    hypothesis_profile: str
    areas: tuple[str, ...]
    workers: int
    started_at: datetime
    duration: float
    tests: tuple[TestResult, ...]
    requirements: tuple[RequirementResult, ...]
    pytest_exit_code: int
    output: str = field(repr=False, default="")

    @property
    def complete(self) -> bool:
        """True when every area ran (no ``--area`` restriction)."""
        return not self.areas or set(AREAS) <= set(self.areas)

    @property
    def failed_requirements(self) -> tuple[RequirementResult, ...]:
        return tuple(r for r in self.requirements if r.outcome is RequirementOutcome.FAILED)

    @property
    def must_failures(self) -> tuple[RequirementResult, ...]:
        return tuple(r for r in self.failed_requirements if r.level is RequirementLevel.MUST)

    @property
    def certified(self) -> bool:
        """Every applicable MUST requirement passed (skipped ones were not applicable)."""
        return not self.must_failures and any(
            r.outcome is RequirementOutcome.PASSED for r in self.requirements
        )

    @property
    def level(self) -> str:
        """``none`` unless certified; otherwise ``core`` plus each optional capability offered and passed."""
        if not self.certified:
            return "none"
        parts = ["core"]
        for capability, area, label in (
            ("append", "append", "append"),
            ("exclusive_candidates", "exclusive_selection", "exclusive"),
        ):
            if capability not in self.profile.capabilities():
                continue
            in_area = [r for r in self.requirements if r.area == area]
            if any(r.outcome is RequirementOutcome.PASSED for r in in_area):
                parts.append(label)
        return "+".join(parts)

    def area_summaries(self) -> tuple[AreaSummary, ...]:
        """One summary per area that had checks, in catalog order."""
        order = {area: index for index, area in enumerate(AREAS)}
        areas = sorted({t.area for t in self.tests}, key=lambda a: (order.get(a, len(order)), a))
        summaries = []
        for area in areas:
            reqs = [r for r in self.requirements if r.area == area]
            tests = [t for t in self.tests if t.area == area]
            reasons = Counter(r.reason or "" for r in reqs if r.outcome is RequirementOutcome.SKIPPED)
            summaries.append(
                AreaSummary(
                    area=area,
                    passed=sum(r.outcome is RequirementOutcome.PASSED for r in reqs),
                    failed=sum(r.outcome is RequirementOutcome.FAILED for r in reqs),
                    skipped=sum(r.outcome is RequirementOutcome.SKIPPED for r in reqs),
                    tests_passed=sum(t.outcome is Outcome.PASSED for t in tests),
                    tests_failed=sum(t.failed for t in tests),
                    tests_skipped=sum(t.outcome is Outcome.SKIPPED for t in tests),
                    duration=sum(t.duration for t in tests),
                    skip_reasons=tuple(sorted(reasons.items())),
                )
            )
        return tuple(summaries)

    def requirement(self, requirement_id: str) -> RequirementResult:
        """The verdict on one requirement; ``KeyError`` if no check of it ran."""
        for result in self.requirements:
            if result.id == requirement_id:
                return result
        raise KeyError(requirement_id)

    def _options(self, redact: bool) -> Mapping[str, str]:
        return redact_options(self.options) if redact else self.options

    def reproduce_command(self, test: TestResult, *, redact: bool = False) -> str:
        """The ``runlane-certify`` line that replays ``test``'s area with this run's seed.

        ``redact`` hides the values of secret-looking driver options (for files that get shared).
        """
        words = ["runlane-certify", "run", "--driver", self.driver]
        for key, value in self._options(redact).items():
            words += ["--option", f"{key}={value}"]
        words += ["--area", test.area, "--profile", self.hypothesis_profile, "--seed", str(self.seed)]
        return shlex.join(words)

    def reproduce_pytest(self, test: TestResult, *, redact: bool = False) -> str:
        """The plain pytest line that replays exactly ``test`` with this run's seed."""
        words = ["pytest", "-p", "no:cacheprovider", *_suite_target_for(test.nodeid)]
        words += ["--runlane-driver", self.driver]
        for key, value in self._options(redact).items():
            words += ["--runlane-option", f"{key}={value}"]
        words += [
            "--runlane-hypothesis-profile",
            self.hypothesis_profile,
            f"--hypothesis-seed={self.seed}",
            "-k",
            test.name,
        ]
        return shlex.join(words)


def _suite_target_for(nodeid: str) -> list[str]:
    path = nodeid.partition("::")[0]
    marker = "runlane_conformance/suites/"
    if marker in path:
        module = path[path.index(marker) :].removesuffix(".py").replace("/", ".")
        return ["--pyargs", module]
    return [path]


def probe_driver(driver: str, options: Mapping[str, str]) -> StorageProfile:
    """Load ``driver``, open a store, connect once and return the advertised profile.

    This is the fail-fast check before a run: every problem comes back as a
    ``HarnessError`` with one line naming the driver.
    """
    harness = load_harness(driver, options)
    try:
        store = harness.open_store()
        try:
            instance = store.connect()
            try:
                profile = instance.profile
            finally:
                instance.close()
        finally:
            store.close()
    except HarnessError:
        raise
    except Exception as error:
        raise DriverLoadError(
            f"driver {driver!r}: opening a store and connecting failed: {describe_exception(error)}"
        ) from error
    finally:
        with contextlib.suppress(Exception):
            harness.close()
    if not isinstance(profile, StorageProfile):
        raise DriverLoadError(f"driver {driver!r}: its profile is {safe_repr(profile)}, not a StorageProfile")
    return profile


def _driver_info(driver: str) -> DriverInfo | None:
    for info in available_drivers():
        if info.name == driver:
            return info
    return None


def run_suites(
    driver: str,
    options: Mapping[str, str] | None = None,
    *,
    areas: Sequence[str] = (),
    requirements: Sequence[str] = (),
    hypothesis_profile: str = "quick",
    seed: int | None = None,
    workers: int = 1,
    extra_pytest_args: Sequence[str] = (),
    listener: RunListener | None = None,
    catalog: Mapping[str, Requirement] | None = None,
) -> RunResult:
    """Run the conformance suites against ``driver`` and return the verdict.

    ``areas`` restricts the run (empty: every area); ``requirements``
    restricts it further to those requirement ids. ``seed`` fixes
    Hypothesis; one is chosen when omitted. ``workers`` > 1 spreads checks
    over pytest-xdist processes. ``listener`` receives a ``CollectionFinished``
    then one ``TestFinished`` per check, from the thread that runs pytest.
    ``catalog`` overrides the requirement catalog (tests of the runner use it).

    Raises ``HarnessError`` when the driver cannot be loaded or connected,
    ``RunUsageError`` for impossible requests, ``RunBrokenError`` when pytest
    could not complete the run.
    """
    options = dict(options or {})
    areas = tuple(dict.fromkeys(areas))
    unknown = [area for area in areas if area not in AREAS]
    if unknown:
        raise RunUsageError(f"unknown area {unknown[0]!r} (areas: {', '.join(AREAS)})")
    if hypothesis_profile not in HYPOTHESIS_PROFILES:
        raise RunUsageError(
            f"unknown Hypothesis profile {hypothesis_profile!r} (profiles: {', '.join(HYPOTHESIS_PROFILES)})"
        )
    if isinstance(workers, bool) or workers < 1:
        raise RunUsageError(f"workers must be a positive integer, got {workers!r}")
    if workers > 1 and importlib.util.find_spec("xdist") is None:
        raise RunUsageError("--workers > 1 needs pytest-xdist: pip install 'runlane-conformance[xdist]'")
    if seed is None:
        seed = secrets.randbelow(2**32)
    elif isinstance(seed, bool) or seed < 0:
        raise RunUsageError(f"seed must be a non-negative integer, got {seed!r}")

    profile = probe_driver(driver, options)

    # The user's own pytest configuration (addopts such as -x or --cov) must not change a
    # certification, so the run ignores every ini file and states what it needs explicitly.
    root = _suite_root()
    args = [
        "-c",
        os.devnull,
        "--rootdir",
        root,
        "--confcutdir",
        root,
        "-o",
        f"timeout={CHECK_TIMEOUT_SECONDS}",
    ]
    args += ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", __name__, "-q", "--no-header"]
    # Capture at the sys level only: fd-level capture would also swallow the caller's live progress
    # display, which writes to the real terminal while the checks run.
    args += ["--capture=sys"]
    args += list(SUITE_ARGS)
    args += ["--runlane-driver", driver]
    for key, value in options.items():
        args += ["--runlane-option", f"{key}={value}"]
    args += ["--runlane-hypothesis-profile", hypothesis_profile, f"--hypothesis-seed={seed}"]
    for area in areas:
        args += ["--runlane-area", area]
    for requirement_id in requirements:
        args += ["--runlane-requirement", requirement_id]
    if workers > 1:
        args += ["-n", str(workers)]
    args += list(extra_pytest_args)

    collector = _Collector(listener)
    buffer = io.StringIO()
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    import hypothesis

    # Hypothesis fixes a test's settings when ``@given`` decorates it, i.e. at import. The plugin
    # activates the chosen settings profile when pytest configures, so the suite modules must be
    # imported afresh after that, or a run would use whatever profile was active at an earlier import.
    for name in [name for name in sys.modules if name.startswith(SUITE_MODULE_PREFIXES)]:
        del sys.modules[name]
    # The plugin activates a Hypothesis settings profile process-wide; put the caller's back.
    previous_profile = hypothesis.settings.get_current_profile_name()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            exit_code = int(pytest.main(args, plugins=[collector]))
    finally:
        hypothesis.settings.load_profile(previous_profile)
    duration = time.perf_counter() - started
    output = buffer.getvalue()

    if exit_code == _PYTEST_USAGE:
        raise RunUsageError(_first_error_line(output) or "pytest refused the arguments")
    if collector.collection_errors:
        raise RunBrokenError(f"collecting the suites failed: {collector.collection_errors[0]}", output)
    if exit_code == _PYTEST_EMPTY or (exit_code == _PYTEST_OK and not collector.tests):
        raise RunBrokenError("no checks were collected for this run", output)
    if exit_code not in (_PYTEST_OK, _PYTEST_FAILED):
        raise RunBrokenError(
            f"pytest stopped with exit code {exit_code}: {_first_error_line(output) or 'see its output'}",
            output,
        )

    tests = tuple(collector.tests)
    if catalog is not None:
        known = dict(catalog)
    elif workers == 1:
        # Each real check carries its Requirement as a parameter; no need to import every suite again.
        known = collector.declared
    else:
        known = all_requirements()
    return RunResult(
        driver=driver,
        options=options,
        driver_info=_driver_info(driver),
        profile=profile,
        seed=seed,
        hypothesis_profile=hypothesis_profile,
        areas=areas,
        workers=workers,
        started_at=started_at,
        duration=duration,
        tests=tests,
        requirements=_fold_requirements(tests, known),
        pytest_exit_code=exit_code,
        output=output,
    )


def _suite_root() -> str:
    """Where node ids are relative to: the directory holding our package, so ids read
    ``runlane_conformance/suites/test_<area>.py::...`` wherever the toolkit is installed."""
    if SUITE_ARGS[:1] == ("--pyargs",):
        import runlane_conformance

        return str(Path(runlane_conformance.__file__).resolve().parent.parent)
    return os.getcwd()


def _first_error_line(output: str) -> str | None:
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith(("ERROR:", "E ", "INTERNALERROR>")) or "Error" in stripped.split(":")[0]:
            return stripped.removeprefix("ERROR:").strip()
    return None


def _fold_requirements(
    tests: Iterable[TestResult], catalog: Mapping[str, Requirement]
) -> tuple[RequirementResult, ...]:
    grouped: dict[str, list[TestResult]] = {}
    for test in tests:
        key = test.requirement_id or f"{test.area}.{_slug(test.name)}"
        grouped.setdefault(key, []).append(test)
    order = {area: index for index, area in enumerate(AREAS)}
    results = []
    for requirement_id, members in grouped.items():
        requirement = catalog.get(requirement_id) or Requirement(
            requirement_id,
            RequirementLevel.MUST,
            clause="",
            summary="(not in the requirement catalog)",
        )
        failures = [t for t in members if t.failed]
        if failures:
            outcome, reason = RequirementOutcome.FAILED, failures[0].message
        elif all(t.outcome is Outcome.SKIPPED for t in members):
            outcome, reason = RequirementOutcome.SKIPPED, members[0].message
        else:
            outcome, reason = RequirementOutcome.PASSED, None
        results.append(RequirementResult(requirement, outcome, reason, tuple(members)))
    results.sort(key=lambda r: (order.get(r.area, len(order)), r.area, r.id))
    return tuple(results)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unnamed"


def _requirement_from_nodeid(nodeid: str) -> str | None:
    """The requirement id carried in a node id's parameter brackets, if it has one."""
    name = nodeid.rpartition("::")[2]
    if not name.endswith("]") or "[" not in name:
        return None
    params = name[name.index("[") + 1 : -1]
    for match in _REQUIREMENT_ID.finditer(params):
        if match.group().partition(".")[0] in AREAS:
            return match.group()
    return None


def _area_for(nodeid: str, requirement_id: str | None) -> str:
    if requirement_id:
        return requirement_id.partition(".")[0]
    match = _MODULE_AREA.search(nodeid.partition("::")[0])
    return match.group(1) if match else "unlabelled"


def _user_property(report: Any, name: str) -> str | None:
    for key, value in getattr(report, "user_properties", ()) or ():
        if key == name and isinstance(value, str):
            return value
    return None


def _short_message(report: Any) -> str:
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message.strip():
        return message.strip().splitlines()[0]
    text = str(getattr(report, "longreprtext", "") or getattr(report, "longrepr", "") or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("E "):
            return line[1:].strip()
    return lines[-1] if lines else "failed"


def _skip_reason(report: Any) -> str:
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail:
        return f"expected failure: {wasxfail}"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "skipped")


@dataclass
class _Pending:
    nodeid: str
    requirement_id: str | None
    duration: float = 0.0
    outcome: Outcome = Outcome.PASSED
    message: str | None = None
    longrepr: str | None = None


class _Collector:
    """pytest plugin living in the controlling process: folds phase reports into ``TestResult``s."""

    def __init__(self, listener: RunListener | None) -> None:
        self._listener = listener
        self._pending: dict[str, _Pending] = {}
        self._announced = False
        self.tests: list[TestResult] = []
        self.collection_errors: list[str] = []
        self.declared: dict[str, Requirement] = {}

    def _announce(self, nodeids: Iterable[str]) -> None:
        if self._announced:
            return
        self._announced = True
        totals = Counter(_area_for(n, _requirement_from_nodeid(n)) for n in nodeids)
        if self._listener is not None:
            self._listener(CollectionFinished(dict(totals)))

    # --- collection -------------------------------------------------------------------------
    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid or 'suite'}: {_short_message(report)}")

    def pytest_collection_finish(self, session: Any) -> None:
        for item in session.items:
            params = getattr(getattr(item, "callspec", None), "params", {})
            declared = params.get(_REQUIREMENT_PROPERTY)
            if isinstance(declared, Requirement):
                self.declared[declared.id] = declared
        if session.items:
            self._announce(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)  # defined by pytest-xdist, an optional extra
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self._announce(ids)

    # --- execution --------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: Any) -> None:
        pending = self._pending.get(report.nodeid)
        if pending is None:
            requirement_id = _user_property(report, _REQUIREMENT_PROPERTY) or _requirement_from_nodeid(
                report.nodeid
            )
            pending = self._pending[report.nodeid] = _Pending(report.nodeid, requirement_id)
        pending.duration += float(getattr(report, "duration", 0.0) or 0.0)
        if report.failed:
            text = str(report.longreprtext)
            if pending.outcome in (Outcome.FAILED, Outcome.ERROR):
                pending.longrepr = f"{pending.longrepr or ''}\n{text}".strip()
            else:
                message = _short_message(report)
                if report.when == "call":
                    pending.outcome, pending.message = Outcome.FAILED, message
                else:
                    pending.outcome, pending.message = Outcome.ERROR, f"error in {report.when}: {message}"
                pending.longrepr = text
        elif report.skipped and pending.outcome is Outcome.PASSED:
            pending.outcome, pending.message = Outcome.SKIPPED, _skip_reason(report)
        if report.when == "teardown":
            self._finish(self._pending.pop(report.nodeid))

    def _finish(self, pending: _Pending) -> None:
        blob = None
        if pending.longrepr:
            match = _BLOB.search(pending.longrepr)
            blob = match.group() if match else None
        result = TestResult(
            nodeid=pending.nodeid,
            requirement_id=pending.requirement_id,
            area=_area_for(pending.nodeid, pending.requirement_id),
            outcome=pending.outcome,
            duration=pending.duration,
            message=pending.message,
            longrepr=pending.longrepr,
            hypothesis_blob=blob,
        )
        self.tests.append(result)
        if self._listener is not None:
            self._listener(TestFinished(result))


# --- hooks for every pytest process of a run (registered with ``-p runlane_conformance.runner``) ---


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """Carry each check's requirement id on its reports, so xdist workers pass it back too."""
    for item in items:
        marker = item.get_closest_marker("runlane_requirement")
        if marker is None or not marker.args:
            continue
        if any(name == _REQUIREMENT_PROPERTY for name, _ in item.user_properties):
            continue
        item.user_properties.append((_REQUIREMENT_PROPERTY, str(marker.args[0])))
