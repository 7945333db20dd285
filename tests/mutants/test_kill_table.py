"""The suites can fail: every broken driver is caught by the requirement it breaks.

Each mutant wraps the reference driver and violates one rule. Running that
rule's checks against it must report the rule as failed; a check that no
mutant can make fail would certify anything.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runlane_conformance import StorageIndexConsistency
from runlane_conformance.catalogue import all_requirements
from runlane_conformance.fixtures import hypothesis_profiles
from tests.conftest import KILL_TABLE_ROW
from tests.mutants.catalog import Mutant, all_mutants
from tests.mutants.runner import requirement_outcomes
from tests.shared_runs import suites_run

MUTANTS = all_mutants()


@pytest.fixture
def no_shrinking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Report each failure as Hypothesis first found it: a kill needs the verdict, not the smallest example.

    Shrinking was most of the kill table's time (the cursor mutants spent 11-15 s each on it, 1.3-2.8 s
    without). How well failures shrink is measured where it matters: ``benchmarks/time_to_failure.py``
    and the failure-report tests, which keep the profile's budget.
    """
    monkeypatch.setitem(hypothesis_profiles.SHRINK_BUDGET_SECONDS, "quick", 0.0)


@pytest.mark.usefixtures("no_shrinking")
@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_mutant_is_killed_by_the_requirement_it_breaks(
    mutant: Mutant, record_property: Callable[[str, object], None]
) -> None:
    outcomes, _ = requirement_outcomes(mutant.target, requirements=[mutant.kills])
    verdict = outcomes.get(mutant.kills, "not run")
    killed = "yes" if verdict == "failed" else f"NO ({verdict})"
    record_property(KILL_TABLE_ROW, (mutant.name, mutant.kills, killed))
    assert verdict == "failed", (
        f"mutant {mutant.name} ({mutant.breaks}) survived requirement {mutant.kills}: outcome {verdict}"
    )


def test_every_requirement_has_a_mutant_that_it_kills() -> None:
    covered = {mutant.kills for mutant in MUTANTS}
    missing = sorted(set(all_requirements()) - covered)
    assert not missing, f"requirements no mutant can make fail: {missing}"


def test_every_mutant_names_a_catalogued_requirement() -> None:
    catalog = all_requirements()
    unknown = sorted({mutant.kills for mutant in MUTANTS} - set(catalog))
    assert not unknown, f"mutants name requirements that do not exist: {unknown}"


@pytest.mark.timeout(900)
def test_reference_driver_passes_every_requirement() -> None:
    # The same run as tests/profiles/test_every_profile_certifies.py's client clock: run once, shared.
    outcomes, messages = requirement_outcomes("local", shared=True)
    failed = {req: messages.get(req, "") for req, outcome in outcomes.items() if outcome == "failed"}
    assert not failed, f"the reference driver fails: {failed}"
    assert outcomes, "no conformance check ran against the reference driver"


@pytest.mark.timeout(900)
def test_reference_driver_with_lagging_indexes_passes_every_requirement() -> None:
    """The suites' eventual branches run for real: the reference driver with ``index_lag=3`` certifies too."""
    # The same run as tests/profiles/test_every_profile_certifies.py's eventual indexes: shared.
    result = suites_run("local", {"index_lag": "3"}, seed=0)
    assert result.profile.index_consistency is StorageIndexConsistency.EVENTUAL
    failed = {
        req.id: "\n".join(f"{test.nodeid}: {test.message}" for test in req.failures)
        for req in result.requirements
        if req.outcome.value == "failed"
    }
    assert not failed, f"the reference driver with lagging indexes fails: {failed}"
    assert any(req.outcome.value == "passed" for req in result.requirements)
