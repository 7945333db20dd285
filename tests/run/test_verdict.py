"""The run's one verdict: decided in one place, and the exit code is nothing but a lookup of it."""

from __future__ import annotations

import pytest

from runlane_conformance.cli.common import EXIT_CODES, ExitCode, exit_code_for
from runlane_conformance.run.certification import Certification, Verdict, decide_verdict
from runlane_conformance.run.outcomes import RunStatus

CERTIFIED = Certification(True, "core", (), ())
REFUSED = Certification(False, "none", ("a.b",), ())


def _decide(
    status: RunStatus,
    certification: Certification = CERTIFIED,
    *,
    failed: bool = False,
    inconclusive: bool = False,
    problems: bool = False,
    stale: bool = False,
) -> Verdict:
    return decide_verdict(
        status,
        certification,
        failed=failed,
        inconclusive=inconclusive,
        problems=problems,
        stale_expectations=stale,
    )


def test_every_verdict_has_an_exit_code() -> None:
    assert set(EXIT_CODES) == {verdict.value for verdict in Verdict}


@pytest.mark.parametrize(
    ("verdict", "code"),
    [
        (_decide(RunStatus.COMPLETE), ExitCode.CERTIFIED),
        (_decide(RunStatus.COMPLETE, REFUSED, failed=True), ExitCode.REQUIREMENT_FAILED),
        (_decide(RunStatus.INCONCLUSIVE, REFUSED, inconclusive=True), ExitCode.INCONCLUSIVE),
        (_decide(RunStatus.PARTIAL, REFUSED), ExitCode.CERTIFIED),
        (_decide(RunStatus.PARTIAL, REFUSED, failed=True), ExitCode.REQUIREMENT_FAILED),
        (_decide(RunStatus.PARTIAL, REFUSED, inconclusive=True), ExitCode.INCONCLUSIVE),
        (_decide(RunStatus.STOPPED, REFUSED, failed=True), ExitCode.REQUIREMENT_FAILED),
        (_decide(RunStatus.INTERRUPTED, REFUSED, failed=True), ExitCode.INTERRUPTED),
        (_decide(RunStatus.COMPLETE, stale=True), ExitCode.REQUIREMENT_FAILED),
    ],
)
def test_the_exit_code_is_the_tables_entry_for_the_verdict(verdict: Verdict, code: ExitCode) -> None:
    assert exit_code_for(verdict) is code


def test_a_run_problem_denies_even_when_every_requirement_passed() -> None:
    assert _decide(RunStatus.COMPLETE, REFUSED, problems=True) is Verdict.NOT_CERTIFIED
    assert _decide(RunStatus.PARTIAL, REFUSED, problems=True) is Verdict.PARTIAL_FAILED


def test_inconclusive_is_never_a_failure_but_a_failure_outweighs_it() -> None:
    assert _decide(RunStatus.INCONCLUSIVE, REFUSED, inconclusive=True) is Verdict.INCONCLUSIVE
    assert _decide(RunStatus.COMPLETE, REFUSED, failed=True, inconclusive=True) is Verdict.NOT_CERTIFIED


def test_a_stale_expected_failure_makes_a_certified_run_not_clean() -> None:
    assert _decide(RunStatus.COMPLETE, stale=True) is Verdict.NOT_CLEAN


def test_an_interrupted_or_stopped_run_is_never_certified_whatever_it_found() -> None:
    assert _decide(RunStatus.INTERRUPTED) is Verdict.INTERRUPTED
    assert _decide(RunStatus.STOPPED) is Verdict.STOPPED


def test_a_complete_run_certifies_only_as_its_certification_says() -> None:
    assert _decide(RunStatus.COMPLETE, CERTIFIED) is Verdict.CERTIFIED
    assert _decide(RunStatus.COMPLETE, REFUSED) is Verdict.NOT_CERTIFIED


def test_a_should_failure_keeps_the_certification_and_still_exits_1() -> None:
    """The verdict never contradicts the certification the report claims: certified, but not exit 0."""
    verdict = _decide(RunStatus.COMPLETE, CERTIFIED, failed=True)
    assert verdict is Verdict.CERTIFIED_SHOULD_FAILED
    assert exit_code_for(verdict) is ExitCode.REQUIREMENT_FAILED
    assert _decide(RunStatus.COMPLETE, REFUSED, failed=True) is Verdict.NOT_CERTIFIED


def test_a_not_clean_run_says_what_its_checks_came_to_first() -> None:
    assert _decide(RunStatus.COMPLETE, REFUSED, failed=True, stale=True) is Verdict.NOT_CLEAN
    assert _decide(RunStatus.COMPLETE, REFUSED, failed=True, stale=False) is Verdict.NOT_CERTIFIED


def test_every_verdict_but_not_clean_has_a_headline_of_its_own() -> None:
    from runlane_conformance.cli.verdict_view import HEADLINES

    assert set(HEADLINES) == set(Verdict) - {Verdict.NOT_CLEAN}


def test_a_run_problem_outweighs_an_inconclusive_requirement_in_the_verdict_and_so_in_the_headline() -> None:
    """Before the headline followed the verdict, this run said INCONCLUSIVE (exit 4) and exited 1."""
    assert _decide(RunStatus.INCONCLUSIVE, REFUSED, inconclusive=True, problems=True) is Verdict.NOT_CERTIFIED
