"""More correct drivers taking the contract's freedoms certify at their honest level, in both modes.

Each driver is certified in full at the quick profile twice: next to the checks (``run_suites``)
and served from a backend process of its own (``--isolation process``, the mode our CI workflow
gives driver authors). A correct driver refused in either mode means a check, or the isolation
layer, is wrong. The level is asserted too: a driver must reach exactly the level its profile
earns, no less (a check refusing it) and no more (a gate it should not have passed).

The store-owned clocks and the driver with no optional capabilities are reused from
``tests.profiles.drivers``; ``tests/profiles/test_every_profile_certifies.py`` certifies them next
to the checks, so here they are certified isolated only.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation
from runlane_conformance.run.certify import certify_driver
from runlane_conformance.run.model import RequirementOutcome
from runlane_conformance.runner import run_suites
from tests.profiles.certified import assert_certified
from tests.shared_runs import certified

ROOT = Path(__file__).resolve().parents[2]
CORPUS = "tests.correct."
PROFILES = "tests.profiles.drivers:"
#: A full quick run of a driver whose attempts wait for one another takes a few minutes of waiting.
pytestmark = pytest.mark.timeout(1200)

FULL = "core+append+exclusive+faults"

#: (driver, options, level): the corpus drivers of this file, certified in both modes.
BOTH_MODES = [
    pytest.param(CORPUS + "files_store:harness", {}, "core", id="files-durable"),
    pytest.param(CORPUS + "files_store:harness", {"durability": "process"}, "core", id="files-process"),
    pytest.param(CORPUS + "async_native:harness", {}, "core", id="async-native"),
    pytest.param(CORPUS + "small_limits:harness", {}, "core+exclusive+faults", id="small-limits"),
    pytest.param(CORPUS + "more_freedoms:large_limits", {}, FULL, id="large-limits"),
    pytest.param(CORPUS + "more_freedoms:fresh_copies", {}, FULL, id="fresh-copies"),
    pytest.param(CORPUS + "more_freedoms:reconnaissance_attempt", {}, FULL, id="reconnaissance-attempt"),
    pytest.param(CORPUS + "more_freedoms:never_replays", {}, FULL, id="never-replays"),
]

#: Drivers of ``tests.profiles.drivers`` certified next to the checks elsewhere: isolated here.
ISOLATED_ONLY = [
    pytest.param(PROFILES + "server_sampled", "core+append+exclusive+faults", id="server-sampled"),
    pytest.param(PROFILES + "transaction_authoritative", "core+append+exclusive+faults", id="authoritative"),
    pytest.param(PROFILES + "with_nothing_optional", "core+faults", id="nothing-optional"),
]


@pytest.mark.parametrize(("driver", "options", "level"), BOTH_MODES)
def test_a_correct_driver_certifies_next_to_the_checks(
    driver: str, options: dict[str, str], level: str
) -> None:
    result = run_suites(driver, options, seed=0)
    assert_certified(result, driver)
    assert str(result.level) == level


@pytest.mark.parametrize(("driver", "options", "level"), BOTH_MODES)
def test_a_correct_driver_certifies_served_from_its_own_process(
    driver: str, options: dict[str, str], level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the backend imports the driver from this checkout's tests package
    # Shared (tests.shared_runs): the durable store's test below judges this run's cross-process checks.
    result = certified(driver, options, seed=0, isolation=Isolation.PROCESS)
    assert_certified(result, driver)
    assert str(result.level) == level


@pytest.mark.parametrize(("driver", "level"), ISOLATED_ONLY)
def test_a_reused_correct_driver_certifies_served_from_its_own_process(
    driver: str, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = certify_driver(driver, {}, seed=0, isolation=Isolation.PROCESS)
    assert_certified(result, driver)
    assert str(result.level) == level


#: Drivers whose store other processes attach by address, the cross-process checks run on them, and
#: whether this file already certifies the driver in full, isolated (``tests.shared_runs``).
ACROSS_PROCESSES = [
    pytest.param(
        CORPUS + "files_store:harness",
        ["profile.durable-survives-killed-process", "conflicts.across-processes"],
        True,
        id="files",
    ),
    # LMDB names its live readers by process id in the store's lock file: isolated, it works only
    # because every backend of the run shares the run's one PID namespace (run/sandbox.py). Its full
    # runs are tests/correct/test_lmdb_driver.py's; here its cross-process checks run alone.
    pytest.param(
        CORPUS + "lmdb_driver:harness",
        [
            "profile.durable-survives-killed-process",
            "conflicts.across-processes",
            "completion_waits.marker-across-processes",
            "exclusive_selection.disjoint-across-processes",
            "exclusive_selection.released-across-processes",
        ],
        False,
        id="lmdb",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("lmdb") is None and os.environ.get("CI") != "true",
            reason="lmdb is not installed (a dev dependency: pip install -e '.[dev]')",
        ),
    ),
]


@pytest.mark.parametrize(("driver", "requirements", "shared"), ACROSS_PROCESSES)
def test_a_store_attached_by_address_passes_the_cross_process_checks_in_both_modes(
    driver: str, requirements: list[str], shared: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cross-process checks of a served driver start their workers on the served driver too.

    Under ``--isolation process`` each worker process loads the ``process`` driver with the options
    that start the backend, and attaches to the store by the address the backend gave; before, the
    workers were given the user's options for the ``process`` driver and failed to start. Every
    one of those backends is in the run's sandbox, in one PID namespace: a store that names its
    processes by id (LMDB) tells them apart as it would on the machine.

    With ``shared``, the isolated outcomes come from the full isolated run of the driver that a test
    above judges (``tests.shared_runs``; the same seed, so the same checks and examples as a run of
    the requirements alone); in process the requirements run supervised here, since the tests above
    run drivers next to the checks with ``run_suites``, which has no supervised children.
    """
    monkeypatch.chdir(ROOT)
    for isolation in (Isolation.NONE, Isolation.PROCESS):
        if shared and isolation is Isolation.PROCESS:
            result = certified(driver, {}, seed=0, isolation=isolation)
        else:
            result = certify_driver(driver, {}, requirements=requirements, seed=0, isolation=isolation)
        outcomes = {req.id: req.outcome for req in result.requirements if req.id in requirements}
        assert outcomes == dict.fromkeys(requirements, RequirementOutcome.PASSED), (
            isolation,
            result.problems,
            {req.id: req.reason for req in result.requirements if req.id in requirements},
        )
