"""The pytest plugin as a third-party repository uses it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

# The checks of the point_reads area (a new point_reads check changes it, here and in the other two
# files that run that area: tests/plugin/test_failure_reports.py, tests/cli/test_without_xdist.py).
POINT_READS_CHECKS = 22

SUITES = ["-p", "no:cacheprovider", "--pyargs", "runlane_conformance.suites"]


def test_suites_run_against_a_driver_named_on_the_command_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--runlane-area", "point_reads", "-v"
    )
    result.assert_outcomes(passed=POINT_READS_CHECKS)
    result.stdout.fnmatch_lines(
        ["*test_get_returns_one_result_per_position_in_order[[]point_reads.exact-positions[]] PASSED*"]
    )


def test_report_header_names_driver_profile_and_seed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--runlane-area", "point_reads"
    )
    result.stdout.fnmatch_lines(
        [
            "runlane driver: tiny",
            "runlane profile: durability=process clock=client index=strong append=False*",
            "runlane hypothesis profile: quick, seed: *",
        ]
    )


def test_a_forced_seed_is_the_one_printed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--runlane-area", "point_reads", "--hypothesis-seed", "1234"
    )
    result.stdout.fnmatch_lines(["runlane hypothesis profile: quick, seed: 1234 *"])


def test_driver_can_be_chosen_in_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrunlane_driver = tiny\nrunlane_areas = point_reads\n")
    result = pytester.runpytest_subprocess(*SUITES)
    result.assert_outcomes(passed=POINT_READS_CHECKS)


def test_missing_driver_is_one_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*SUITES, "--runlane-area", "point_reads")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: the Runlane conformance suites need a driver*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_unknown_driver_is_one_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*SUITES, "--runlane-driver", "no-such-driver")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: driver 'no-such-driver' is not installed*"])
    assert "Traceback" not in result.stderr.str()


def test_bad_driver_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*SUITES, "--runlane-driver", "tiny", "--runlane-option", "novalue")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: driver option 'novalue' is not of the form key=value"])


def test_unknown_area_is_a_usage_error_listing_valid_areas(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*SUITES, "--runlane-driver", "tiny", "--runlane-area", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown runlane area 'nope'; valid areas: point_reads*"])


def test_bad_hypothesis_profile_in_ini_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrunlane_hypothesis_profile = extreme\n")
    result = pytester.runpytest_subprocess(*SUITES, "--runlane-driver", "tiny")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: runlane_hypothesis_profile = 'extreme'; valid values: quick, default, thorough"]
    )


def test_hypothesis_own_profile_flag_selects_our_profile_of_that_name(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES,
        "--runlane-driver",
        "tiny",
        "--runlane-area",
        "point_reads",
        "--hypothesis-profile",
        "thorough",
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["runlane hypothesis profile: thorough, seed: *"])
    result.assert_outcomes(passed=POINT_READS_CHECKS)


def test_an_unknown_hypothesis_profile_is_one_line_naming_our_flag(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--hypothesis-profile", "extreme"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --hypothesis-profile 'extreme' is not a registered *--runlane-hypothesis-profile*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_project_profile_of_the_same_name_is_left_to_hypothesis(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "from hypothesis import settings\nsettings.register_profile('thorough', max_examples=3)\n"
    )
    pytester.makepyfile(
        "from hypothesis import settings\n"
        "def test_profile():\n"
        "    assert settings.get_current_profile_name() == 'thorough'\n"
        "    assert settings().max_examples == 3\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hypothesis-profile", "thorough")
    result.assert_outcomes(passed=1)


def test_plugin_is_inert_in_projects_that_do_not_collect_the_suites(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_suites_can_be_collected_from_a_third_party_test_tree(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrunlane_driver = tiny\n")
    pytester.makepyfile(
        test_conformance="from runlane_conformance.suites.test_point_reads import *  # noqa\n"
    )
    pytester.makeconftest("from runlane_conformance.suites.conftest import *  # noqa\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=POINT_READS_CHECKS)


def test_requirement_filter_runs_only_that_requirement(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        *SUITES, "--runlane-driver", "tiny", "--runlane-requirement", "point_reads.exact-positions"
    )
    result.assert_outcomes(passed=2)


def test_a_driver_that_hangs_fails_that_check_as_timed_out_and_the_run_goes_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        hang_driver="""
import threading
from runlane_conformance.harness import load_harness


class HangingDriver:
    def __init__(self, inner, hang):
        self.inner = inner
        self.hang = hang
        self.profile = inner.profile

    def transaction(self, callback):
        if self.hang:
            threading.Event().wait()  # never returns: this check must time out
        return self.inner.transaction(callback)

    def query(self, command):
        return self.inner.query(command)

    def close(self):
        self.inner.close()


class Store:
    def __init__(self, inner, hang):
        self.inner = inner
        self.hang = hang

    def connect(self, clock=None):
        return HangingDriver(self.inner.connect(clock=clock), self.hang)

    def address(self):
        return None

    def close(self):
        self.inner.close()


class Harness:
    def __init__(self):
        self.inner = load_harness("tiny", {})
        self.stores = 0

    def open_store(self):
        self.stores += 1
        # store 1 answers the report header; store 2 belongs to the first check, which hangs
        return Store(self.inner.open_store(), hang=self.stores == 2)

    def attach(self, address):
        raise ValueError("no address")

    def close(self):
        pass


def harness(options):
    return Harness()
"""
    )
    result = pytester.runpytest_subprocess(
        *SUITES,
        "--runlane-driver",
        "hang_driver:harness",
        "--runlane-area",
        "point_reads",
        "--runlane-timeout",
        "2",
        "-p",
        "no:randomly",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == POINT_READS_CHECKS - 1 and outcomes.get("failed") == 1, outcomes
    result.stdout.fnmatch_lines(["*Timeout*"])


def test_import_suites_brings_every_area_into_a_test_module() -> None:
    from runlane_conformance.catalogue import AREAS
    from runlane_conformance.fixtures.collect import import_suites

    namespace: dict[str, object] = {}
    assert import_suites(namespace) == list(AREAS)
    assert "test_get_returns_one_result_per_position_in_order" in namespace
    assert "test_two_increments_of_one_record_both_survive" in namespace


@pytest.mark.parametrize(("profile", "budget"), [("quick", 600.0), ("default", 1800.0), ("thorough", 7200.0)])
def test_the_per_check_timeout_defaults_to_the_profile_budget_the_cli_uses(
    pytester: pytest.Pytester, profile: str, budget: float
) -> None:
    from runlane_conformance.fixtures.hypothesis_profiles import check_budget
    from runlane_conformance.fixtures.plugin import check_timeout

    config = pytester.parseconfig("--runlane-hypothesis-profile", profile)
    assert check_timeout(config) == budget == check_budget(profile)
    assert check_timeout(pytester.parseconfig("--runlane-timeout", "7")) == 7.0
