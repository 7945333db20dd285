"""The Python backend: the reference driver certifies through the boundary, and mutants die there too.

These run the real suites through ``process`` with every message checked
against the protocol's JSON Schema in both directions, so the schema, the
toolkit side and the Python backend are held to each other.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runlane_conformance.runner import run_suites
from tests.mutants.catalog import Mutant, all_mutants

ROOT = Path(__file__).resolve().parents[2]
BACKEND = f"{sys.executable} -m runlane_conformance.backend --driver"
pytestmark = pytest.mark.timeout(300)

#: Areas that between them send every request and reply the protocol has (clock and append included).
EVERY_MESSAGE = (
    "point_reads",
    "sealing",
    "replay",
    "mutations",
    "operator_reads",
    "append",
    "exclusive_selection",
)


def outcomes(driver: str, options: dict[str, str], **restrict: object) -> dict[str, str]:
    result = run_suites(driver, options, seed=0, **restrict)  # type: ignore[arg-type]
    return {req.id: req.outcome.value for req in result.requirements}


def test_the_reference_driver_passes_through_the_python_backend_with_every_message_schema_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    seen = outcomes("process", {"command": f"{BACKEND} local", "validate": "true"}, areas=EVERY_MESSAGE)
    assert seen, "no requirement ran"
    failed = sorted(req for req, outcome in seen.items() if outcome == "failed")
    assert not failed, f"the reference driver fails through the Python backend: {failed}"
    skipped = sorted(req for req, outcome in seen.items() if outcome == "skipped")
    assert skipped == [], f"a capability the reference driver offers was lost on the wire: {skipped}"


#: Kill-table mutants served through the backend, each breaking a different mechanism (validation at
#: commit, version fences, sealing, the injected clock that travels back over the pipe).
THROUGH_BACKEND = ("drops-absent-reads", "last-writer-wins", "reads-after-now", "ignores-injected-clock")
MUTANTS = [mutant for mutant in all_mutants() if mutant.name in THROUGH_BACKEND]


def test_every_mutant_chosen_for_the_backend_is_in_the_kill_table() -> None:
    assert sorted(mutant.name for mutant in MUTANTS) == sorted(THROUGH_BACKEND)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_a_mutant_served_by_the_python_backend_is_killed_by_the_same_requirement_as_in_process(
    mutant: Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In process, the kill table proves ``mutant.kills`` fails; here the same rule must fail through the pipe.
    monkeypatch.chdir(ROOT)  # the backend imports the mutant from this checkout's tests package
    seen = outcomes("process", {"command": f"{BACKEND} {mutant.target}"}, requirements=[mutant.kills])
    assert seen.get(mutant.kills) == "failed", (
        f"mutant {mutant.name} served by the Python backend survived {mutant.kills}: {seen.get(mutant.kills)}"
    )


def test_a_python_driver_that_prints_to_stdout_cannot_corrupt_the_protocol(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The Python backend moves file descriptor 1 to stderr before loading the driver.
    monkeypatch.chdir(ROOT)
    seen = outcomes(
        "process",
        {"command": f"{BACKEND} tests.protocol.noisy_driver:harness", "validate": "true"},
        areas=("point_reads", "replay"),
    )
    assert seen and all(outcome == "passed" for outcome in seen.values()), seen


@pytest.mark.parametrize("driver", ["local", "sqlite"])
def test_the_faults_area_reaches_the_same_outcomes_through_the_backend_with_its_messages_checked(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fault hook stays with the suite: the backend asks it before each exchange, including the
    # ones the SQLite driver makes while it is being connected.
    monkeypatch.chdir(ROOT)
    seen = outcomes("process", {"command": f"{BACKEND} {driver}", "validate": "true"}, areas=("faults",))
    assert seen and "passed" in seen.values(), seen
    assert seen == outcomes(driver, {}, areas=("faults",))


def test_a_driver_whose_backend_stops_answering_is_inconclusive_as_a_hang_in_process_is_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In process a hung read is stopped by the check's deadline: inconclusive, no verdict on the rule.
    # Through the pipe the exchange timeout notices it first, and the verdict must be the same.
    monkeypatch.chdir(ROOT)
    requirement = "point_reads.absent-keys-read-as-none"
    seen = outcomes(
        "process",
        {"command": f"{BACKEND} tests.protocol.hanging_driver:harness", "timeout": "1"},
        requirements=[requirement],
    )
    assert seen == {requirement: "inconclusive"}, seen
