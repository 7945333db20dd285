"""Run the conformance suites against a driver and reach a verdict per requirement.

Two entry points share everything but where the checks run:

* ``certify_driver`` (what ``runlane-certify`` uses): the checks run in
  supervised child processes (``run.supervise``); the verdict stays in this
  process, so a driver that exits, crashes or hangs fails the check it was in
  and the run goes on.
* ``run_suites``: the same plan, judging and verdict, with pytest running in
  this process. It exists for the toolkit's own mutant and runner tests, where
  a child per run would cost more than the tests themselves. It lacks the
  process boundary: a driver that calls ``os._exit``, crashes the interpreter
  or hangs takes the caller down or stalls it, and per-check deadlines are not
  enforced (docs/trust.md lists what each path guarantees).

Both validate the request, probe the driver once for its profile, plan which
checks the profile requires (``run.plan``), judge every check against that plan
(``run.verdict``) and return a ``RunResult``. A seed is chosen when none is
given and kept in the result, so every run can be replayed.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import platform
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from .. import __version__
from ..catalogue import Requirement
from ..expected_failures import ExpectedFailure
from ..fixtures.defaults import CHECK_BUDGET_SECONDS, HYPOTHESIS_PROFILES, check_budget
from ..fixtures.gating import ProfileFacts
from ..harness import DriverInfo, available_drivers
from ..protocol.isolation import DEFAULT_ISOLATION, Isolation, served_driver
from ..safe_text import redact_options
from ..suggest import REQUIREMENTS_HINT, did_you_mean
from .catalog import suite_catalog
from .child_events import CheckEnd, CheckStart, ChildEvent, Collected, CollectError, Plugins
from .child_events import CheckShrinking as ChildCheckShrinking
from .environment import SuiteSource, closed_environment, pytest_arguments, suite_digest
from .model import (
    AreaSummary,
    CheckResult,
    Outcome,
    RequirementOutcome,
    RequirementResult,
    RunBrokenError,
    RunEnvironment,
    RunResult,
    RunStatus,
    RunUsageError,
    TestResult,
)
from .plan import Plan, PlannedCheck, build_plan, longest_first, scope_catalog
from .probe import probe_driver, probe_facts
from .raw import RawCheck
from .request import RunRequest
from .sandbox import (
    RunSandbox,
    SandboxError,
    SandboxNetwork,
    bwrap_program,
    sandbox_description,
    sandbox_unavailable,
)
from .scaling import WorkerCount, parse_workers
from .supervise import ChildSpec, Supervisor
from .verdict import fold_requirements, judge_check, limit_problems, unfinished_check

__all__ = [
    "CHECK_BUDGET_SECONDS",
    "HYPOTHESIS_PROFILES",
    "SUITE_ARGS",
    "AreaSummary",
    "CheckResult",
    "CheckShrinking",
    "CheckStarted",
    "CollectionFinished",
    "Outcome",
    "RequirementOutcome",
    "RequirementResult",
    "RunBrokenError",
    "RunEvent",
    "RunListener",
    "RunRequest",
    "RunResult",
    "RunStatus",
    "RunUsageError",
    "TestFinished",
    "TestResult",
    "certify",
    "certify_driver",
    "check_budget",
    "probe_driver",
    "probe_facts",
    "redact_options",
    "run_suites",
]

#: The toolkit's own suites, as pytest is told to collect them.
_PACKAGE_SUITE_ARGS: tuple[str, ...] = ("--pyargs", "runlane_conformance.suites")
#: What pytest collects for a run; tests of the runner point this at a small fake suite.
SUITE_ARGS: tuple[str, ...] = _PACKAGE_SUITE_ARGS

#: Where the requirement catalogue comes from; tests of the runner point this at the fake suite's.
SUITE_CATALOG: Callable[[], dict[str, Requirement]] = suite_catalog


@dataclass(frozen=True)
class CollectionFinished:
    """Live event: the plan is known; ``totals`` counts checks per area."""

    totals: Mapping[str, int]


@dataclass(frozen=True)
class CheckStarted:
    """Live event: a check has started (its setup begins)."""

    nodeid: str
    area: str
    requirement_id: str | None


@dataclass(frozen=True)
class CheckShrinking:
    """Live event: a running check found a failure and is shrinking it to a smaller example."""

    nodeid: str
    area: str
    requirement_id: str | None


@dataclass(frozen=True)
class TestFinished:
    """Live event: one check has finished and been judged."""

    __test__ = False

    test: CheckResult


RunEvent = CollectionFinished | CheckStarted | CheckShrinking | TestFinished
RunListener = Callable[[RunEvent], None]


# --- shared set-up ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    driver: str
    options: dict[str, str]
    areas: tuple[str, ...]
    requirements: tuple[str, ...]
    hypothesis_profile: str
    seed: int
    workers: WorkerCount
    check_timeout: float
    scope: dict[str, Requirement]
    max_failures: int | None = None
    expected: tuple[ExpectedFailure, ...] = ()
    examples: Path | None = None


def _validate(
    driver: str,
    options: Mapping[str, str] | None,
    areas: Sequence[str],
    requirements: Sequence[str],
    hypothesis_profile: str,
    seed: int | None,
    workers: int | Literal["auto"],
    check_timeout: float | None,
    catalog: Mapping[str, Requirement] | None,
    max_failures: int | None = None,
    expected: Sequence[ExpectedFailure] = (),
) -> _Request:
    if hypothesis_profile not in HYPOTHESIS_PROFILES:
        raise RunUsageError(
            f"unknown Hypothesis profile {hypothesis_profile!r}"
            + did_you_mean(
                hypothesis_profile,
                HYPOTHESIS_PROFILES,
                otherwise=f"profiles: {', '.join(HYPOTHESIS_PROFILES)}",
            )
        )
    try:
        count = WorkerCount.of(parse_workers(workers))
    except ValueError as error:
        raise RunUsageError(str(error)) from None
    if seed is None:
        seed = secrets.randbelow(2**32)
    elif isinstance(seed, bool) or seed < 0:
        raise RunUsageError(f"seed must be a non-negative integer, got {seed!r}")
    if check_timeout is None:
        check_timeout = check_budget(hypothesis_profile)
    elif not check_timeout > 0:
        raise RunUsageError(f"the check timeout must be a positive number of seconds, got {check_timeout!r}")
    if max_failures is not None and (isinstance(max_failures, bool) or max_failures < 1):
        raise RunUsageError(f"maxfail must be a positive integer, got {max_failures!r}")
    areas = tuple(dict.fromkeys(areas))
    requirements = tuple(dict.fromkeys(requirements))
    full = dict(catalog) if catalog is not None else SUITE_CATALOG()
    scope = scope_catalog(full, areas, requirements)
    seen: set[str] = set()
    for declared in expected:
        if declared.requirement not in full:
            hint = did_you_mean(declared.requirement, full, otherwise=REQUIREMENTS_HINT)
            raise RunUsageError(f"expected failure names unknown requirement {declared.requirement!r}{hint}")
        if declared.requirement in seen:
            raise RunUsageError(
                f"requirement {declared.requirement!r} is declared as an expected failure twice"
            )
        seen.add(declared.requirement)
    return _Request(
        driver,
        dict(options or {}),
        areas,
        requirements,
        hypothesis_profile,
        seed,
        count,
        float(check_timeout),
        scope,
        max_failures,
        tuple(expected),
    )


def _suite_source() -> SuiteSource:
    import runlane_conformance

    package = Path(runlane_conformance.__file__).resolve().parent
    fixtures = str(package / "fixtures")
    if SUITE_ARGS[:1] == ("--pyargs",):
        suites = package / "suites"
        files = sorted(str(p) for p in (*suites.rglob("*.py"), *(package / "fixtures").rglob("*.*")))
        return SuiteSource(
            args=SUITE_ARGS,
            rootdir=str(package.parent),
            conftest_modules=("runlane_conformance.suites.conftest",),
            trusted=(str(suites) + os.sep, fixtures + os.sep),
            files=tuple(f for f in files if not f.endswith(".pyc")),
        )
    paths = [Path(arg).resolve() for arg in SUITE_ARGS if not arg.startswith("-")]
    files = sorted(str(p) for path in paths for p in (path.rglob("*.py") if path.is_dir() else [path]))
    return SuiteSource(
        args=SUITE_ARGS,
        rootdir=os.getcwd(),
        conftest_modules=(),
        trusted=(*(str(p) + os.sep for p in paths), fixtures + os.sep),
        files=tuple(files),
    )


def _driver_info(driver: str) -> DriverInfo | None:
    for info in available_drivers():
        if info.name == driver:
            return info
    return None


def _target_of(driver: str, info: DriverInfo | None) -> str:
    return info.target if info is not None else driver


def _environment(
    source: SuiteSource,
    plugins: Sequence[tuple[str, str]],
    supervised: bool,
    isolation: Isolation = Isolation.NONE,
    sandbox: str | None = None,
    sandbox_network: SandboxNetwork = SandboxNetwork.NONE,
) -> RunEnvironment:
    # Read from the installed distributions: a supervised run's parent never imports pytest or
    # Hypothesis (its children do); these are the versions those children import.
    return RunEnvironment(
        toolkit_version=__version__,
        python_version=f"{platform.python_implementation()} {platform.python_version()}",
        pytest_version=importlib.metadata.version("pytest"),
        hypothesis_version=importlib.metadata.version("hypothesis"),
        suite_digest=suite_digest(source.files),
        plugins=tuple(plugins),
        supervised=supervised,
        isolation=isolation.value,
        sandbox=sandbox,
        sandbox_network=sandbox_network.value,
    )


def _result(
    request: _Request,
    plan: Plan,
    checks: Mapping[str, CheckResult],
    *,
    started_at: datetime,
    duration: float,
    status: RunStatus,
    facts: ProfileFacts,
    environment: RunEnvironment,
    problems: Sequence[str],
    output: str,
    peak_workers: int = 1,
) -> RunResult:
    missing_reason = {
        RunStatus.INTERRUPTED: "interrupted before it ran",
        RunStatus.STOPPED: f"did not run: the run stopped after {request.max_failures} failed "
        f"check{'' if request.max_failures == 1 else 's'} (--maxfail {request.max_failures})",
    }.get(status, "did not run")
    judged = []
    for planned in plan.checks:
        result = checks.get(planned.nodeid)
        if result is None:
            result = unfinished_check(planned, missing_reason, outcome=Outcome.NOT_RUN)
        judged.append(result)
    info = _driver_info(request.driver)
    requirements = fold_requirements(plan, judged, {e.requirement: e.reason for e in request.expected})
    if (
        status is RunStatus.COMPLETE
        and any(r.outcome is RequirementOutcome.INCONCLUSIVE for r in requirements)
        and all(r.outcome.acceptable or r.outcome is RequirementOutcome.INCONCLUSIVE for r in requirements)
    ):
        # Everything ran and nothing failed, but some check could not finish in time: no verdict.
        status = RunStatus.INCONCLUSIVE
    return RunResult(
        driver=request.driver,
        options=request.options,
        driver_info=info,
        facts=facts,
        seed=request.seed,
        hypothesis_profile=request.hypothesis_profile,
        areas=request.areas,
        requirement_filter=request.requirements,
        workers=peak_workers,
        started_at=started_at,
        duration=duration,
        tests=tuple(judged),
        requirements=requirements,
        status=status,
        check_timeout=request.check_timeout,
        environment=environment,
        target=_target_of(request.driver, info),
        problems=(*problems, *limit_problems(judged, facts)),
        max_failures=request.max_failures,
        output=output,
        examples=None if request.examples is None else str(request.examples),
    )


def _status_for(request: _Request, interrupted: bool, stopped: bool = False) -> RunStatus:
    if interrupted:
        return RunStatus.INTERRUPTED
    if stopped:
        return RunStatus.STOPPED
    return RunStatus.PARTIAL if (request.areas or request.requirements) else RunStatus.COMPLETE


def _collected(request: _Request, source: SuiteSource) -> SuiteSource:
    """``source`` narrowed to the suite modules a restricted run needs.

    Every check lives in the module of its area (``suites/test_<area>.py``; ``tests/run`` holds
    that invariant), so a run restricted with ``--area`` or ``--requirement`` collects only those
    modules instead of importing and collecting every suite and then deselecting most of it. The
    plugin still deselects within them, so the collected checks are exactly those of a full
    collection's restricted run, in the same (file-name) order. The suite digest still covers
    every file (``source.files``).
    """
    if source.args != _PACKAGE_SUITE_ARGS or not (request.areas or request.requirements):
        return source
    suites = Path(source.rootdir) / "runlane_conformance" / "suites"
    modules = sorted({f"test_{requirement.area}" for requirement in request.scope.values()})
    if not modules or not all((suites / f"{module}.py").is_file() for module in modules):
        return source
    return replace(source, args=("--pyargs", *(f"runlane_conformance.suites.{m}" for m in modules)))


def _pytest_args(request: _Request, source: SuiteSource, *, isolated: bool = False) -> list[str]:
    args = pytest_arguments(
        _collected(request, source),
        driver=request.driver,
        options=request.options,
        hypothesis_profile=request.hypothesis_profile,
        seed=request.seed,
        areas=request.areas,
        requirements=request.requirements,
        examples=request.examples,
        isolated=isolated,
    )
    # The child learns the check limit too, so a check that plans its own search (the model check)
    # spends a share of the limit the supervisor will enforce, an explicit --check-timeout included.
    return [*args, "--runlane-timeout", f"{request.check_timeout:g}"]


# --- supervised ---------------------------------------------------------------------------------


def certify(
    request: RunRequest,
    listener: RunListener | None = None,
    *,
    catalog: Mapping[str, Requirement] | None = None,
) -> RunResult:
    """Certify the driver ``request`` names, with the checks in supervised child processes.

    The typed entry point the CLI uses: the request was built once from the command line and
    configuration (``run.request``). ``catalog`` overrides the requirement catalogue (tests only).
    See ``certify_driver`` for what is raised and how the run is carried out.
    """
    return certify_driver(
        request.driver,
        request.options,
        areas=request.areas,
        requirements=request.requirements,
        hypothesis_profile=request.hypothesis_profile,
        seed=request.seed,
        workers=request.workers,
        check_timeout=request.check_timeout,
        listener=listener,
        catalog=catalog,
        max_failures=request.max_failures,
        expected_failures=request.expected_failures,
        examples=request.examples,
        isolation=request.isolation,
        sandbox_network=request.sandbox_network,
        backend_python=request.backend_python,
    )


def certify_driver(
    driver: str,
    options: Mapping[str, str] | None = None,
    *,
    areas: Sequence[str] = (),
    requirements: Sequence[str] = (),
    hypothesis_profile: str = "quick",
    seed: int | None = None,
    workers: int | Literal["auto"] = 1,
    check_timeout: float | None = None,
    listener: RunListener | None = None,
    catalog: Mapping[str, Requirement] | None = None,
    max_failures: int | None = None,
    expected_failures: Sequence[ExpectedFailure] = (),
    examples: Path | None = None,
    isolation: Isolation = DEFAULT_ISOLATION,
    sandbox_network: SandboxNetwork = SandboxNetwork.NONE,
    backend_python: str | None = None,
) -> RunResult:
    """Certify ``driver`` with the checks in supervised child processes (see the module docstring).

    ``isolation`` says where the driver's code runs: ``Isolation.PROCESS`` serves it from a
    backend process of its own, so no module of it is imported by the children or this process
    (``protocol.isolation``); ``Isolation.NONE`` loads it in the children, next to the checks.

    ``examples`` is the Hypothesis example database directory the checks save a failing example
    to and replay first, so a rerun of the printed reproduce line replays it at once; ``None``
    keeps nothing. The directory is only created when a failure is saved.

    ``check_timeout`` defaults to the Hypothesis profile's budget. Ctrl-C returns
    the result so far with status ``interrupted`` (raised as ``KeyboardInterrupt``
    only if it came before the plan existed). ``max_failures`` stops the run once
    that many checks failed; the rest are "not run" and the status is ``stopped``
    (never a certification). ``expected_failures`` are judged here, in the parent: the
    checks run unchanged and a declared requirement keeps its real outcome, so a known
    failure still denies certification and one that passes shows up as passed.

    Raises ``HarnessError`` when the driver cannot be loaded or connected,
    ``RunUsageError`` for impossible requests, ``RunBrokenError`` when the suites
    could not be collected.
    """
    request = _validate(
        driver,
        options,
        areas,
        requirements,
        hypothesis_profile,
        seed,
        workers,
        check_timeout,
        catalog,
        max_failures,
        expected_failures,
    )
    if examples is not None:
        request = replace(request, examples=Path(examples).absolute())
    source = _suite_source()
    if backend_python is not None:
        if isolation is Isolation.NONE:
            raise RunUsageError("--backend-python needs --isolation process (the backend is what it runs)")
        if not (os.path.isfile(backend_python) and os.access(backend_python, os.X_OK)):
            raise RunUsageError(f"--backend-python {backend_python!r} is not an executable file")
        backend_python = os.path.abspath(backend_python)
    # The run's namespaces (held by a process of their own until the run ends), last: nothing
    # between here and the supervisor's ``finally`` can fail.
    sandbox, prefix, run_sandbox = _sandbox_for(request.driver, isolation, sandbox_network)
    served, served_options = served_driver(request.driver, request.options, isolation, prefix, backend_python)
    cwd_on_path = os.getcwd() if ":" in served else None
    spec = ChildSpec(
        served,
        served_options,
        # The session serves the driver itself (--runlane-isolation), as the probe did: its
        # reproduce lines then name the driver, not this machine's backend command.
        [
            *_pytest_args(request, source, isolated=served != request.driver),
            *_backend_args(served != request.driver, prefix, backend_python),
        ],
        source.trusted,
        cwd_on_path,
    )
    holder: dict[str, Plan] = {}
    facts_holder: dict[str, ProfileFacts] = {}

    def on_plan(facts: ProfileFacts, collected: tuple[PlannedCheck, ...]) -> Sequence[PlannedCheck]:
        plan = build_plan(
            request.scope, facts, collected, restricted=bool(request.areas or request.requirements)
        )
        holder["plan"], facts_holder["facts"] = plan, facts
        if listener is not None:
            listener(CollectionFinished(plan.totals()))
        # Serial runs go area by area (their live timers then mean something); parallel runs start
        # the long checks first, so no worker is left alone with one at the end.
        return longest_first(plan.checks) if request.workers.ceiling > 1 else list(plan.checks)

    def on_start(check: PlannedCheck) -> None:
        if listener is not None:
            listener(CheckStarted(check.nodeid, check.area, check.requirement_id))

    def on_shrinking(check: PlannedCheck) -> None:
        if listener is not None:
            listener(CheckShrinking(check.nodeid, check.area, check.requirement_id))

    def on_end(raw: RawCheck | CheckResult) -> CheckResult:
        result = (
            raw if isinstance(raw, CheckResult) else judge_check(raw, holder["plan"], facts_holder["facts"])
        )
        if listener is not None:
            listener(TestFinished(result))
        return result

    started_at = datetime.now(UTC)
    started = time.perf_counter()
    supervisor = Supervisor(
        spec,
        workers=request.workers.start,
        grow_to=request.workers.ceiling,
        check_timeout=request.check_timeout,
        explicit_timeout=check_timeout is not None,
        max_failures=request.max_failures,
        on_plan=on_plan,
        on_start=on_start,
        on_end=on_end,
        on_shrinking=on_shrinking,
    )
    try:
        outcome = supervisor.run()
    finally:
        if run_sandbox is not None:
            run_sandbox.close()  # ends every process left in the run's namespace, daemons included
    return _result(
        request,
        holder["plan"],
        outcome.checks,
        started_at=started_at,
        duration=time.perf_counter() - started,
        status=_status_for(request, outcome.interrupted, outcome.stopped),
        facts=outcome.facts,
        environment=_environment(
            source,
            outcome.plugins,
            supervised=True,
            isolation=isolation,
            sandbox=sandbox,
            sandbox_network=sandbox_network,
        ),
        problems=outcome.problems,
        output=outcome.output,
        peak_workers=outcome.peak_workers,
    )


def _backend_args(isolated: bool, prefix: Sequence[str], python: str | None) -> list[str]:
    """The hidden plugin options that make every child serve the driver as this run does: inside the
    same sandbox (``prefix``) and with the same interpreter."""
    if not isolated:
        return []
    args = ["--runlane-backend-wrapper", json.dumps(list(prefix))] if prefix else []
    return args + (["--runlane-backend-python", python] if python else [])


def _sandbox_for(
    driver: str, isolation: Isolation, network: SandboxNetwork
) -> tuple[str | None, list[str], RunSandbox | None]:
    """The sandbox an isolated backend runs in: (what the report records, the command prefix, the
    run's sandbox, which the caller closes).

    Not isolated: nothing. Isolated where bubblewrap can make the namespaces: the run's namespaces,
    the prefix that starts a backend in them, and a private directory every backend of the run
    shares as ``/tmp``. Isolated without them: the reason, recorded as ``unavailable: ...`` (the
    run is then not marked isolated).
    """
    if isolation is Isolation.NONE:
        return None, [], None
    if driver == "process":
        return "unavailable: --driver process runs the given backend command as it is", [], None
    reason = sandbox_unavailable(network)
    if reason is not None:
        return f"unavailable: {reason}", [], None
    private_tmp = tempfile.mkdtemp(prefix="runlane-sandbox-")
    try:
        run_sandbox = RunSandbox(bwrap_program(), network, private_tmp)
    except SandboxError as error:
        shutil.rmtree(private_tmp, ignore_errors=True)
        return f"unavailable: bubblewrap could not create the namespaces: {error}", [], None
    return sandbox_description(network), run_sandbox.prefix, run_sandbox


# --- in-process (the toolkit's own tests) ---------------------------------------------------------


def run_suites(
    driver: str,
    options: Mapping[str, str] | None = None,
    *,
    areas: Sequence[str] = (),
    requirements: Sequence[str] = (),
    hypothesis_profile: str = "quick",
    seed: int | None = None,
    workers: int | Literal["auto"] = 1,
    extra_pytest_args: Sequence[str] = (),
    listener: RunListener | None = None,
    catalog: Mapping[str, Requirement] | None = None,
) -> RunResult:
    """The same plan and verdict as ``certify_driver``, with pytest running in this process.

    For the toolkit's own tests only (see the module docstring for what it does
    not guarantee). ``workers`` > 1 runs through the supervisor instead, since
    parallel checks need child processes anyway. ``catalog`` overrides the
    requirement catalogue.
    """
    if workers != 1:
        if extra_pytest_args:
            raise RunUsageError("extra pytest arguments are only for in-process runs")
        return certify_driver(
            driver,
            options,
            areas=areas,
            requirements=requirements,
            hypothesis_profile=hypothesis_profile,
            seed=seed,
            workers=workers,
            listener=listener,
            catalog=catalog,
        )
    request = _validate(
        driver, options, areas, requirements, hypothesis_profile, seed, workers, None, catalog
    )
    facts = probe_facts(request.driver, request.options)
    source = _suite_source()
    args = _pytest_args(request, source) + list(extra_pytest_args)
    plan_holder: list[Plan] = []
    checks: dict[str, CheckResult] = {}
    problems: list[str] = []
    plugins: list[tuple[str, str]] = []
    collect_errors: list[str] = []

    def emit(event: ChildEvent) -> None:
        # The in-process session: the plugin's typed events arrive here as values, never as JSON.
        if isinstance(event, Plugins):
            plugins.extend(event.plugins)
        elif isinstance(event, CollectError):
            collect_errors.append(event.message)
        elif isinstance(event, Collected):
            plan = build_plan(
                request.scope, facts, event.checks, restricted=bool(request.areas or request.requirements)
            )
            plan_holder.append(plan)
            if listener is not None and event.checks:
                listener(CollectionFinished(plan.totals()))
        elif isinstance(event, CheckStart | ChildCheckShrinking) and listener is not None:
            nodeid = event.nodeid
            planned = next(
                (c for c in plan_holder[0].checks if c.nodeid == nodeid), PlannedCheck(nodeid, None)
            )
            kind_of = CheckStarted if isinstance(event, CheckStart) else CheckShrinking
            listener(kind_of(nodeid, planned.area, planned.requirement_id))
        elif isinstance(event, CheckEnd):
            result = judge_check(event.check, plan_holder[0], facts)
            checks[event.check.nodeid] = result
            if listener is not None:
                listener(TestFinished(result))

    import hypothesis
    import pytest

    from .events import EventPlugin

    # Hypothesis fixes a test's settings when ``@given`` decorates it, i.e. at import. The plugin
    # activates the chosen settings profile when pytest configures, so the suite modules must be
    # imported afresh after that, or a run would use whatever profile was active at an earlier import.
    for name in [name for name in sys.modules if name.startswith("runlane_conformance.suites.")]:
        if name != "runlane_conformance.suites.conftest":
            del sys.modules[name]
    previous_profile = hypothesis.settings.get_current_profile_name()
    buffer = io.StringIO()
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    try:
        with closed_environment(), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            exit_code = int(pytest.main(args, plugins=[EventPlugin(emit, source.trusted)]))
    finally:
        hypothesis.settings.load_profile(previous_profile)
    duration = time.perf_counter() - started
    output = buffer.getvalue()
    if exit_code == pytest.ExitCode.USAGE_ERROR:
        raise RunUsageError(_first_error_line(output) or "pytest refused the arguments")
    if collect_errors:
        raise RunBrokenError(f"collecting the suites failed: {collect_errors[0]}", output)
    if not plan_holder or not plan_holder[0].checks:
        raise RunBrokenError("no checks were collected for this run", output)
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        problems.append(
            f"pytest stopped with exit code {exit_code}: {_first_error_line(output) or 'see its output'}"
        )
    return _result(
        request,
        plan_holder[0],
        checks,
        started_at=started_at,
        duration=duration,
        status=_status_for(request, False),
        facts=facts,
        environment=_environment(source, plugins, supervised=False),
        problems=problems,
        output=output,
    )


def _first_error_line(output: str) -> str | None:
    for line in output.splitlines():
        stripped = line.strip()
        if stripped.startswith(("ERROR:", "E ", "INTERNALERROR>")) or "Error" in stripped.split(":")[0]:
            return stripped.removeprefix("ERROR:").strip()
    return None
