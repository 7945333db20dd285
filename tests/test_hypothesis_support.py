"""Hypothesis's own errors reach a driver author in plain words, and a stopped search never passes."""

from __future__ import annotations

import pytest
from _pytest.outcomes import Failed
from hypothesis.errors import FailedHealthCheck, FlakyFailure, FlakyStrategyDefinition, Unsatisfiable

from runlane_conformance.fixtures.evidence import CheckInconclusive
from runlane_conformance.suites._hypothesis_support import SearchBudget, plain_hypothesis_errors


def _raised_through(error: BaseException, budget: SearchBudget | None = None) -> str:
    with pytest.raises(AssertionError) as caught, plain_hypothesis_errors("the property", budget):
        raise error
    return str(caught.value)


def test_a_flaky_failure_is_explained_with_its_first_failure() -> None:
    text = _raised_through(FlakyFailure("flaky", [AssertionError("lost update")]))
    assert "failed once and passed" in text and "FlakyFailure" in text
    assert "AssertionError: lost update" in text


def test_a_flaky_failure_from_a_timeout_is_inconclusive_not_a_failure() -> None:
    wrapper = RuntimeError("wrapped")
    wrapper.__cause__ = Failed("Timeout (>120.0s) from pytest-timeout.")
    with pytest.raises(CheckInconclusive) as caught, plain_hypothesis_errors("the property"):
        raise FlakyFailure("flaky", [wrapper])
    text = str(caught.value)
    assert text.startswith("inconclusive: the property: timed out (Timeout (>120.0s) from pytest-timeout.)")
    assert "--check-timeout" in text


def test_an_inconsistent_replay_is_explained() -> None:
    text = _raised_through(FlakyStrategyDefinition("Inconsistent data generation!"))
    assert "not repeatable" in text and "FlakyStrategyDefinition" in text


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (FailedHealthCheck("too slow"), "not a verdict on the driver"),
        (Unsatisfiable("none"), "nothing was checked"),
    ],
)
def test_health_checks_and_unsatisfiable_strategies_are_the_checks_problem(
    error: Exception, words: str
) -> None:
    text = _raised_through(error)
    assert words in text and type(error).__name__ in text


def test_a_search_past_its_guard_without_a_counterexample_is_inconclusive() -> None:
    budget = SearchBudget(seconds=0.0)
    assert budget.active() is False
    with (
        pytest.raises(CheckInconclusive, match="found nothing") as caught,
        plain_hypothesis_errors("the property", budget),
    ):
        pass
    assert str(caught.value).startswith("inconclusive: the property: could not finish")
    assert "--check-timeout" in str(caught.value) and "--workers" in str(caught.value)


def test_a_stopped_search_with_a_counterexample_fails_not_inconclusive() -> None:
    budget = SearchBudget(seconds=None)
    assert budget.active() is True
    budget.note_failure("step 1: lost update")
    budget.seconds = 0.0
    assert budget.active() is False
    with pytest.raises(AssertionError) as caught, plain_hypothesis_errors("the property", budget):
        pass
    assert not isinstance(caught.value, CheckInconclusive), "a counterexample is evidence: a failure"


def test_a_search_counts_its_examples_and_steps() -> None:
    budget = SearchBudget(seconds=None)
    for _ in range(3):
        assert budget.active()
        budget.step()
        budget.step()
    assert (budget.examples, budget.steps) == (3, 6)


def test_a_search_out_of_budget_while_shrinking_shows_the_first_counterexample() -> None:
    budget = SearchBudget(seconds=None)
    assert budget.active() is True
    budget.note_failure("step 1: lost update")
    budget.seconds = 0.0
    assert budget.active() is False
    with (
        pytest.raises(AssertionError, match="step 1: lost update"),
        plain_hypothesis_errors("the property", budget),
    ):
        raise FlakyFailure("replayed example now does nothing", [AssertionError("x")])


def test_a_stopped_search_fails_with_the_reason_given() -> None:
    budget = SearchBudget(seconds=None)
    budget.stop("the driver replays without bound")
    assert budget.active() is False
    with (
        pytest.raises(AssertionError, match="replays without bound"),
        plain_hypothesis_errors("the property", budget),
    ):
        pass


_CHECK_SECONDS_PROBE = """
import pytest
from runlane_conformance.suites._hypothesis_support import check_seconds

@pytest.mark.runlane_requirement("model.serial-equivalent-histories")
def test_probe(request):
    print("CHECK-SECONDS", check_seconds(request))
"""


@pytest.mark.parametrize(
    ("args", "seconds"),
    [
        (["--runlane-hypothesis-profile", "quick"], 600.0),
        (["--runlane-hypothesis-profile", "thorough"], 7200.0),
        (["--runlane-hypothesis-profile", "thorough", "--runlane-timeout", "77"], 77.0),
    ],
)
def test_a_check_planning_its_search_is_told_the_profiles_budget_not_a_fixed_number(
    pytester: pytest.Pytester, args: list[str], seconds: float
) -> None:
    from runlane_conformance.fixtures.hypothesis_profiles import check_budget

    assert check_budget("quick") == 600.0 and check_budget("thorough") == 7200.0, (
        "the profile budgets changed: update the expected limits of this test"
    )
    pytester.makepyfile(test_probe=_CHECK_SECONDS_PROBE)
    # Both ways a check can be run: pytest-timeout loaded (the plugin sets the marker) and not
    # (runlane-certify's child, where the supervisor keeps time and the option says how much).
    for timeout_plugin in (["-p", "timeout"], ["-p", "no:timeout"]):
        result = pytester.runpytest_inprocess("--runlane-driver", "local", "-s", *timeout_plugin, *args)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines([f"*CHECK-SECONDS {seconds}"])


def test_state_machine_checks_are_handed_out_with_the_searches() -> None:
    from types import SimpleNamespace

    from runlane_conformance.run.events import _is_property
    from runlane_conformance.suites import test_model, test_pruning, test_wait_tokens

    machines = [
        test_model.test_random_histories_match_a_serial_model,
        test_pruning.test_random_pruning_histories_keep_the_invariants,
        test_wait_tokens.test_random_wait_token_histories_match_a_model,
    ]
    for test in machines:
        assert _is_property(SimpleNamespace(obj=test)), (  # type: ignore[arg-type]
            f"{test.__name__} runs a state machine but is not planned as a search (long checks go first)"
        )
    assert not _is_property(SimpleNamespace(obj=lambda: None)), "an ordinary check was planned as a search"  # type: ignore[arg-type]


@pytest.mark.parametrize(("explicit", "limit"), [(None, "7200"), (77.0, "77")])
def test_the_child_is_told_the_limit_the_supervisor_enforces(explicit: float | None, limit: str) -> None:
    from runlane_conformance.run import certify as runner

    request = runner._validate("local", None, (), (), "thorough", 1, 1, explicit, None)
    args = runner._pytest_args(request, runner._suite_source())
    assert args[args.index("--runlane-timeout") + 1] == limit, (
        f"the child's pytest arguments must carry --runlane-timeout {limit} (the supervisor's deadline), "
        f"got {args}"
    )


def test_a_budget_spent_in_the_middle_of_an_example_stops_its_remaining_steps() -> None:
    budget = SearchBudget(seconds=None)
    assert budget.active() is True and budget.expired() is False, "a fresh budget must let an example run"
    budget.seconds = 0.0
    assert budget.expired() is True, "a spent budget must stop the steps left in the running example"
    assert budget.examples == 1, "checking between steps must not count examples"
    assert budget.reason is not None and "found nothing" in budget.reason, budget.reason
