"""run_suites: the engine behind runlane-certify, exercised on a miniature fake suite.

The fake suite (``fake_suite/``) tags its checks exactly like the real suites
and fails a check when the fake driver is told to break its requirement, so
each test here plants a failure and asserts the verdict the runner reaches.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from types import SimpleNamespace

import hypothesis
import pytest

from runlane_conformance import StorageProfile
from runlane_conformance.catalogue import Requirement, RequirementLevel
from runlane_conformance.fixtures.gating import ProfileFacts
from runlane_conformance.harness import DriverLoadError, DriverNotFoundError
from runlane_conformance.run import certify
from runlane_conformance.run.events import RawCheck, _full_message
from runlane_conformance.run.plan import build_plan
from runlane_conformance.run.verdict import judge_check
from runlane_conformance.runner import (
    CheckStarted,
    CollectionFinished,
    Outcome,
    RequirementOutcome,
    RunBrokenError,
    RunEvent,
    RunStatus,
    RunUsageError,
    TestFinished,
    run_suites,
)
from tests.cli.fake_catalog import FAKE_CATALOG


def test_a_planted_failure_fails_exactly_its_requirement_and_denies_certification(fake_suite: str) -> None:
    result = run_suites(fake_suite, {"break": "limits.record-bytes-boundary"}, seed=1)
    failed = [r.id for r in result.failed_requirements]
    assert failed == ["limits.record-bytes-boundary"]
    assert result.requirement("limits.record-bytes-boundary").reason == (
        "AssertionError: the fake driver breaks limits.record-bytes-boundary on purpose"
    )
    assert not result.certified
    assert result.level == "none"


def test_a_clean_driver_is_certified_at_core_when_it_offers_no_optional_capability(fake_suite: str) -> None:
    result = run_suites(fake_suite, {}, seed=1)
    assert result.certified
    assert result.level == "core"
    assert not result.failed_requirements


def test_a_capability_not_offered_is_gated_with_its_profile_reason_and_does_not_count_against(
    fake_suite: str,
) -> None:
    result = run_suites(fake_suite, {}, seed=1)
    append = result.requirement("append.contiguous-positions")
    assert append.outcome is RequirementOutcome.GATED
    assert append.reason == "profile: append not offered"
    summary = {s.area: s for s in result.area_summaries()}["append"]
    assert (summary.passed, summary.failed, summary.gated) == (0, 0, 1)
    assert summary.gate_reasons == (("profile: append not offered", 1),)
    assert result.certified


@pytest.mark.parametrize(
    ("options", "level"),
    [
        ({"append": "true"}, "core+append"),
        ({"exclusive": "true"}, "core+exclusive"),
        ({"append": "true", "exclusive": "true"}, "core+append+exclusive"),
    ],
)
def test_offered_capabilities_that_pass_raise_the_certification_level(
    fake_suite: str, options: dict[str, str], level: str
) -> None:
    assert run_suites(fake_suite, options, seed=1).level == level


def test_an_offered_capability_that_fails_denies_certification(fake_suite: str) -> None:
    result = run_suites(fake_suite, {"append": "true", "break": "append.contiguous-positions"}, seed=1)
    assert result.requirement("append.contiguous-positions").outcome is RequirementOutcome.FAILED
    assert result.level == "none"


def test_a_requirement_fails_when_any_of_its_checks_fails(fake_suite: str) -> None:
    result = run_suites(fake_suite, {"break": "conflicts.lost-update"}, seed=3, areas=["conflicts"])
    lost_update = result.requirement("conflicts.lost-update")
    assert len(lost_update.tests) == 2
    assert lost_update.outcome is RequirementOutcome.FAILED
    assert {t.outcome for t in lost_update.tests} == {Outcome.FAILED}


def test_a_should_failure_is_reported_but_does_not_deny_certification(fake_suite: str) -> None:
    should = Requirement("conflicts.write-skew-advice", RequirementLevel.SHOULD, "c", "s")
    result = run_suites(
        fake_suite,
        {"break": "conflicts.write-skew-advice"},
        seed=1,
        catalog={**FAKE_CATALOG, should.id: should},
    )
    assert [r.id for r in result.failed_requirements] == ["conflicts.write-skew-advice"]
    assert result.must_failures == ()
    assert result.certified


def test_areas_restrict_the_run_and_mark_it_partial_which_never_certifies(fake_suite: str) -> None:
    result = run_suites(fake_suite, {}, seed=1, areas=["limits", "profile"])
    assert {t.area for t in result.tests} == {"limits", "profile"}
    assert result.status is RunStatus.PARTIAL and not result.complete
    assert not result.failed_requirements
    assert not result.certified


def test_a_requirement_filter_runs_only_that_requirement_and_is_partial(fake_suite: str) -> None:
    result = run_suites(fake_suite, {}, seed=1, requirements=["limits.point-reads-boundary"])
    assert [r.id for r in result.requirements] == ["limits.point-reads-boundary"]
    assert result.status is RunStatus.PARTIAL and not result.certified


def test_a_seed_is_chosen_when_none_is_given_and_kept_for_reproduction(fake_suite: str) -> None:
    result = run_suites(fake_suite, {}, areas=["limits"])
    assert isinstance(result.seed, int) and result.seed >= 0
    assert run_suites(fake_suite, {}, areas=["limits"], seed=4242).seed == 4242


def test_each_failure_has_a_reproduce_line_with_driver_options_seed_and_requirement(fake_suite: str) -> None:
    result = run_suites(fake_suite, {"break": "limits.point-reads-boundary"}, seed=77)
    (failure,) = result.requirement("limits.point-reads-boundary").failures
    assert result.reproduce_command(failure) == (
        f"runlane-certify run --driver {fake_suite} --option break=limits.point-reads-boundary "
        "--requirement limits.point-reads-boundary --profile quick --seed 77"
    )
    # Without the plugin's own replay command on the check, one of the plugin's shape is built: the
    # requirement named as the plugin names it, not a -k expression.
    pytest_line = result.reproduce_pytest(dataclasses.replace(failure, properties=()))
    assert "--hypothesis-seed=77" in pytest_line
    assert "--runlane-requirement limits.point-reads-boundary" in pytest_line
    assert " -k " not in pytest_line and "no:cacheprovider" not in pytest_line


def test_a_rebuilt_pytest_line_names_the_suites_package_and_the_run_s_example_database(
    fake_suite: str, tmp_path: Path
) -> None:
    result = run_suites(fake_suite, {"break": "limits.point-reads-boundary"}, seed=5, areas=["limits"])
    (failure,) = result.requirement("limits.point-reads-boundary").failures
    nodeid = "runlane_conformance/suites/test_limits.py::test_x[limits.point-reads-boundary]"
    check = dataclasses.replace(failure, nodeid=nodeid, properties=())
    kept = dataclasses.replace(result, examples=str(tmp_path / "db"))
    words = shlex.split(kept.reproduce_pytest(check))
    # The fake suite's driver is a module:factory target, which only ``python -m pytest`` finds from here.
    assert words[:5] == ["python", "-m", "pytest", "--pyargs", "runlane_conformance.suites"]
    assert words[words.index("--runlane-examples") + 1] == str(tmp_path / "db")
    anonymous = dataclasses.replace(check, requirement_id=None)
    assert "-k" in shlex.split(result.reproduce_pytest(anonymous))


def test_secret_looking_options_can_be_redacted_from_reproduce_lines(fake_suite: str) -> None:
    result = run_suites(fake_suite, {"break": "limits.point-reads-boundary"}, seed=1, areas=["limits"])
    result = type(result)(**{**result.__dict__, "options": {"password": "hunter2"}})
    (failure,) = result.failed_requirements[0].failures
    assert "hunter2" not in result.reproduce_command(failure, redact=True)
    assert "password=***" in result.reproduce_command(failure, redact=True)
    assert "hunter2" in result.reproduce_command(failure)


def test_a_reproduce_blob_stays_with_the_check_but_out_of_the_message_shown() -> None:
    blob = "@reproduce_failure('6.155.2', b'AEEF')"
    advice = f"You can reproduce this example by temporarily adding {blob} as a decorator on your test case"
    text = f"AssertionError: too big\nFalsifying example: t(n=5)\n\n{advice}"
    report = SimpleNamespace(longrepr=SimpleNamespace(reprcrash=SimpleNamespace(message=text)))
    assert _full_message(report) == "AssertionError: too big\nFalsifying example: t(n=5)"
    raw = RawCheck("suite/test_conflicts.py::t[conflicts.lost-update]", "conflicts.lost-update", "failed")
    raw.message, raw.longrepr, raw.full_message = "AssertionError: too big", text, _full_message(report)
    facts = ProfileFacts(StorageProfile(), operator_reads=False, cross_process=False)
    judged = judge_check(raw, build_plan({}, facts, (), restricted=False), facts)
    assert judged.hypothesis_blob == blob
    assert blob not in judged.text


def test_the_listener_hears_the_collection_then_every_check(fake_suite: str) -> None:
    events: list[RunEvent] = []
    result = run_suites(fake_suite, {}, seed=1, listener=events.append)
    assert isinstance(events[0], CollectionFinished)
    assert events[0].totals == {
        "limits": 5,
        "profile": 4,
        "conflicts": 3,
        "append": 1,
        "exclusive_selection": 1,
    }
    finished = [e.test for e in events[1:] if isinstance(e, TestFinished)]
    started = [e.nodeid for e in events[1:] if isinstance(e, CheckStarted)]
    assert len(finished) == len(started) == len(result.tests) == 14
    assert started == [t.nodeid for t in finished]


def test_checks_spread_over_supervised_workers_reach_the_same_verdict(fake_suite: str) -> None:
    options = {"break": "limits.query-results-boundary"}
    serial = run_suites(fake_suite, options, seed=9)
    parallel = run_suites(fake_suite, options, seed=9, workers=2)
    assert {r.id: r.outcome for r in parallel.requirements} == {r.id: r.outcome for r in serial.requirements}
    assert parallel.requirement("limits.query-results-boundary").tests[0].requirement_id == (
        "limits.query-results-boundary"
    )


def test_the_callers_hypothesis_profile_is_restored_after_a_run(fake_suite: str) -> None:
    before = hypothesis.settings.get_current_profile_name()
    run_suites(fake_suite, {}, seed=1, areas=["conflicts"])
    assert hypothesis.settings.get_current_profile_name() == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"areas": ["nope"]}, "unknown area 'nope'"),
        ({"workers": 0}, "workers must be a positive integer or 'auto'"),
        ({"workers": "many"}, "workers must be a positive integer or 'auto'"),
        ({"hypothesis_profile": "forever"}, "unknown Hypothesis profile 'forever'"),
        ({"seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_impossible_requests_are_usage_errors(fake_suite: str, kwargs: dict, message: str) -> None:
    with pytest.raises(RunUsageError, match=message):
        run_suites(fake_suite, {}, **kwargs)


def test_a_driver_that_cannot_load_fails_before_pytest_starts(fake_suite: str) -> None:
    with pytest.raises(DriverLoadError, match="cannot reach the fake database"):
        run_suites(fake_suite, {"explode": "true"})
    with pytest.raises(DriverNotFoundError):
        run_suites("no-such-driver", {})


def test_a_suite_that_cannot_be_collected_is_a_broken_run(
    fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "test_limits.py").write_text("def test_x(:\n")
    monkeypatch.setattr(certify, "SUITE_ARGS", (str(tmp_path),))
    with pytest.raises(RunBrokenError, match="collecting the suites failed"):
        run_suites(fake_suite, {})


def test_an_empty_suite_is_a_broken_run(
    fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(certify, "SUITE_ARGS", (str(tmp_path),))
    with pytest.raises(RunBrokenError, match="no checks were collected"):
        run_suites(fake_suite, {})


def test_the_reference_driver_passes_its_point_reads_area() -> None:
    result = run_suites("local", {}, seed=1, areas=["point_reads"])
    assert result.tests, "the point_reads suite collected no checks"
    assert not result.failed_requirements, [(r.id, r.reason) for r in result.failed_requirements]
    assert result.status is RunStatus.PARTIAL
    assert all(t.nodeid.startswith("runlane_conformance/suites/test_point_reads.py::") for t in result.tests)


def _machine_idle(monkeypatch: pytest.MonkeyPatch, share: float) -> None:
    """One processor, whose idle share ``auto`` reads as ``share``; a decision every 50 ms."""
    from runlane_conformance.run import scaling, scheduling

    monkeypatch.setattr(scaling.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(scaling.IdleMeter, "available", staticmethod(lambda: True))
    monkeypatch.setattr(scaling.IdleMeter, "idle_share", lambda self: share)
    monkeypatch.setattr(scheduling, "WINDOW_SECONDS", 0.05)


def test_workers_auto_adds_workers_while_the_machine_sits_idle(
    fake_suite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"break": "limits.query-results-boundary", "wait": "0.4"}
    serial = run_suites(fake_suite, options, seed=9)
    _machine_idle(monkeypatch, 0.9)
    grown = run_suites(fake_suite, options, seed=9, workers="auto")
    assert 1 < grown.workers <= 4
    assert {r.id: r.outcome for r in grown.requirements} == {r.id: r.outcome for r in serial.requirements}


def test_workers_auto_adds_none_while_the_machine_is_busy(
    fake_suite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _machine_idle(monkeypatch, 0.1)
    result = run_suites(fake_suite, {"wait": "0.2"}, seed=9, workers="auto")
    assert result.workers == 1
    assert result.certified
