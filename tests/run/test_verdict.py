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
