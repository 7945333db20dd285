"""Hostile and sloppy drivers cannot get a pass: each ends non-zero with a verdict naming the check.

Every test runs the real ``runlane-certify`` in a subprocess against a driver
from ``drivers.py`` that misbehaves inside one check, and asserts the exact exit
status and what the report says about that check. The runs are restricted to
a requirement or two (and short deadlines) to keep them fast; a restricted run
is partial, so it exits 0 only when everything that ran passed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.run.model import INCONCLUSIVE_HINT
from tests.hostile.conftest import DRIVERS, ROOT, certify_command, hostile_env

TARGET = "sealing.reads-refused-after-now"
OTHER = "point_reads.exact-positions"


def test_a_driver_that_exits_with_status_0_mid_check_fails_that_check_and_the_run_goes_on(
    certify: Any,
) -> None:
    run = certify("os_exit_mid_check", "-r", TARGET, "-r", OTHER)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "failed"
    assert run.messages(TARGET) == [f"the driver process exited with status 0 during `{TARGET}`"]
    assert run.requirement(TARGET)["checks"] == 3
    assert run.requirement(OTHER)["outcome"] == "passed"
    assert run.report is not None and run.report["run"]["checks"]["not_run"] == 0


def test_a_harness_factory_that_calls_sys_exit_is_a_one_line_driver_loading_error(certify: Any) -> None:
    run = certify("exits_in_factory", "-r", TARGET)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "raised SystemExit" in lines[0], run.stderr
    # No results, and the report says so: the run broke before a verdict, with the same line.
    assert run.report is not None and "requirements" not in run.report
    assert run.report["run"]["status"] == "broken"
    assert lines[0].endswith(run.report["run"]["problems"][0])


def test_sys_exit_in_a_driver_close_fails_the_check_whose_teardown_it_was(certify: Any) -> None:
    run = certify("exits_in_close", "-r", TARGET, "-r", OTHER)
    assert run.returncode == 1
    assert run.requirement(TARGET)["outcome"] == "failed"
    assert all("error in teardown" in m and "SystemExit" in m for m in run.messages(TARGET))
    assert run.requirement(OTHER)["outcome"] == "passed"


def test_sys_exit_in_the_harness_session_cleanup_is_a_run_problem(certify: Any) -> None:
    run = certify("exits_in_session_cleanup", "-r", TARGET)
    assert run.returncode == 1
    assert run.report is not None
    assert any("session cleanup" in problem for problem in run.report["run"]["problems"])
    assert "RUN PROBLEM" in run.stdout


@pytest.mark.parametrize(
    ("driver", "named"),
    [
        ("raises_skiptest", "the check raised unittest.SkipTest('not today') outside the profile gating"),
        (
            "raises_pytest_skip",
            "the check raised pytest.skip('profile: append not offered') outside the profile gating",
        ),
        ("raises_pytest_xfail", "the check raised pytest.xfail('known issue')"),
        ("raises_pytest_exit", "the check raised pytest.exit('done here')"),
        ("raises_keyboard_interrupt", "the check raised KeyboardInterrupt"),
        ("raises_system_exit", "SystemExit"),
    ],
)
def test_skips_xfails_and_exits_raised_by_a_driver_fail_the_check_naming_what_was_raised(
    certify: Any, driver: str, named: str
) -> None:
    run = certify(driver, "-r", TARGET)
    assert run.returncode == 1, run.stdout + run.stderr
    requirement = run.requirement(TARGET)
    assert requirement["outcome"] == "failed"
    assert requirement["checks"] == 3
    assert all(named in message for message in run.messages(TARGET)), run.messages(TARGET)


@pytest.mark.parametrize(
    ("driver", "ended"),
    [("segfaults_mid_check", "was killed by SIGSEGV"), ("exits_3_mid_check", "exited with status 3")],
)
def test_with_two_workers_a_crashing_check_is_a_failure_never_a_gap(
    certify: Any, driver: str, ended: str
) -> None:
    run = certify(driver, "--area", "sealing", "--workers", "2")
    assert run.returncode == 1
    assert run.report is not None
    counts = run.report["run"]["checks"]
    assert counts["required"] == counts["run"] and counts["not_run"] == 0
    assert set(run.messages(TARGET)) == {f"the driver process {ended} during `{TARGET}`"}
    others = [r for r in run.report["requirements"] if r["id"] != TARGET]
    assert others and all(r["outcome"] == "passed" for r in others)
    if driver == "segfaults_mid_check":
        stacks = [f["stack"] for f in run.requirement(TARGET)["failures"]]
        assert all(stack and "_segfault" in stack for stack in stacks), stacks


def test_ambient_pytest_addopts_cannot_deselect_checks(certify: Any, tmp_path: Path) -> None:
    env = hostile_env(tmp_path, PYTEST_ADDOPTS="-k 'not after_now' -x -p no:runlane_conformance")
    run = certify("local", "-r", TARGET, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.report is not None
    assert run.report["run"]["checks"] == {
        "required": 3,
        "run": 3,
        "passed": 3,
        "failed": 0,
        "gated": 0,
        "not_run": 0,
        "inconclusive": 0,
    }


def test_an_autoloaded_or_environment_named_plugin_is_not_loaded(certify: Any, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "evil_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "evil_plugin-0.1.dist-info" / "METADATA").write_text("Name: evil-plugin\nVersion: 0.1\n")
    (site / "evil_plugin-0.1.dist-info" / "entry_points.txt").write_text("[pytest11]\nevil = evil_plugin\n")
    (site / "evil_plugin.py").write_text(
        "import pytest\n\n"
        "@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    report = yield\n"
        "    report.outcome = 'passed'\n"
        "    return report\n"
    )
    pythonpath = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = hostile_env(tmp_path, PYTHONPATH=pythonpath, PYTEST_PLUGINS="evil_plugin")
    run = certify("raises_skiptest", "-r", TARGET, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "failed"
    assert run.report is not None
    loaded = {plugin["name"] for plugin in run.report["environment"]["plugins"]}
    assert "evil_plugin" not in loaded and "runlane_conformance.fixtures.plugin" in loaded


def test_a_deadlock_inside_a_hypothesis_check_times_out_with_the_stuck_stack(certify: Any) -> None:
    started = time.monotonic()
    run = certify("deadlocks_in_hypothesis", "-r", "limits.point-reads-boundary", "--check-timeout", "3")
    assert time.monotonic() - started < 90
    # A check stopped at its deadline found nothing either way: inconclusive (exit 4), never a pass.
    assert run.returncode == 4
    assert run.requirement("limits.point-reads-boundary")["outcome"] == "inconclusive"
    failures = run.requirement("limits.point-reads-boundary")["failures"]
    assert [f["nodeid"].rpartition("::")[2].partition("[")[0] for f in failures] == [
        "test_any_split_of_the_point_read_budget_is_accepted_and_one_more_refused"
    ]
    (failure,) = failures
    assert failure["message"] == (
        f"timed out after 3 s in `limits.point-reads-boundary`: inconclusive, {INCONCLUSIVE_HINT}"
    )
    assert failure["stack"] and "_deadlock" in failure["stack"] and "drivers.py" in failure["stack"]
    assert "Flaky" not in json.dumps(run.report)


def test_a_hang_that_masks_signals_is_still_killed_and_says_no_stack_was_available(certify: Any) -> None:
    run = certify("hangs_masking_signals", "-r", TARGET, "--check-timeout", "2")
    assert run.returncode == 4
    assert run.requirement(TARGET)["outcome"] == "inconclusive"
    (failure,) = run.requirement(TARGET)["failures"]
    assert failure["message"] == f"timed out after 2 s in `{TARGET}`: inconclusive, {INCONCLUSIVE_HINT}"
    assert "no stack available" in (failure["stack"] or "")


def test_ctrl_c_ends_the_run_with_130_an_interrupted_report_and_no_orphan(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text('{"certified": true}')  # a stale report must not survive
    process = subprocess.Popen(
        certify_command(
            "run",
            "--driver",
            f"{DRIVERS}:hangs_until_interrupted",
            "-r",
            TARGET,
            "--report",
            str(report),
            "--junit",
            str(tmp_path / "junit.xml"),
        ),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    marker = tmp_path / "started"
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), process.communicate(timeout=30)
    child = int(marker.read_text())
    process.send_signal(signal.SIGINT)
    # Only a hang guard: an interrupted run that kept waiting on its driver would never end.
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout + stderr
    assert not Path(f"/proc/{child}").exists(), "the driver process outlived the interrupted run"
    document = json.loads(report.read_text())
    assert document["run"]["status"] == "interrupted"
    assert document["certification"]["certified"] is False
    assert "INTERRUPTED" in stdout
    # What never finished was not judged: counted as not run, not as failed, in the console and JUnit.
    assert "Did not run (1):" in stdout and "Failed requirements" not in stdout
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert junit.get("failures") == "0" and junit.get("errors") == "1"
    (skipped,) = junit.iter("skipped")
    assert (skipped.get("message") or "").startswith("not run: interrupted")
    (error,) = junit.iter("error")
    assert "interrupted" in (error.get("message") or "")


def test_a_leaked_non_daemon_thread_cannot_keep_the_cli_from_exiting(certify: Any) -> None:
    started = time.monotonic()
    run = certify("leaks_a_thread", "-r", TARGET, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert time.monotonic() - started < 100


def test_limits_evidence_is_what_the_checks_measured_and_a_two_faced_profile_fails(certify: Any) -> None:
    run = certify("two_faced_limits", "-r", "limits.point-reads-boundary")
    assert run.returncode == 1
    assert run.report is not None
    (problem,) = run.report["run"]["problems"]
    assert "max_point_reads at [50]" in problem and "5000" in problem
    entry = next(e for e in run.report["limits"] if e["name"] == "max_point_reads")
    assert (entry["advertised"], entry["accepted_at"], entry["rejected_at"]) == (5_000, 50, 51)
    assert entry["status"] == "failed"


def test_a_capability_hidden_from_the_probe_but_shown_to_the_checks_fails(certify: Any) -> None:
    run = certify("two_faced_append", "-r", "append.positions-contiguous")
    assert run.returncode == 1
    messages = run.messages("append.positions-contiguous")
    assert messages and all("ran although the preflight probe's profile gates it off" in m for m in messages)


@pytest.mark.parametrize("driver", ["raises_unprintable", "raises_huge_message"])
def test_an_exception_that_cannot_be_printed_or_is_huge_still_fails_cleanly(
    certify: Any, driver: str
) -> None:
    run = certify(driver, "-r", TARGET)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert run.requirement(TARGET)["outcome"] == "failed"
    assert all(len(m) < 5_000 for m in run.messages(TARGET))
    assert len(json.dumps(run.report)) < 2_000_000


def test_a_typo_that_breaks_every_call_is_one_short_block_naming_each_requirement_once(certify: Any) -> None:
    run = certify("typo", "-a", "point_reads", "-a", "sealing")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.report is not None
    failed = [r for r in run.report["requirements"] if r["outcome"] == "failed"]
    assert len(failed) == len(run.report["requirements"]) > 5
    error = "TypeError: LocalStorageDriver.transaction() takes 2 positional arguments but 3 were given"
    assert run.stdout.count(error) == 2, run.stdout  # once as it happened, once in the summary
    assert f"same error in {run.report['run']['checks']['failed']} checks of {len(failed)} requirements" in (
        run.stdout
    )
    assert run.stdout.count("reproduce:") == 1
    # Before the grouping, each of the ~35 failed checks printed its own three lines.
    assert len(run.stdout.splitlines()) < 40, run.stdout


def test_a_lost_update_shows_the_state_and_return_values_of_its_message_and_one_reproduce_line(
    certify: Any,
) -> None:
    requirement = "conflicts.serializable-interleavings"
    run = certify("tests.mutants.m_conflicts:last_writer_wins", "-r", requirement)
    assert run.returncode == 1, run.stdout + run.stderr
    summary = run.stdout.partition("Failed requirements")[2]
    for line in ("no serial order of T1 and T2 produces this outcome", "final state:", "T1 returned:"):
        assert line in summary
    assert summary.count("reproduce:") == 1
    assert f"--requirement {requirement}" in summary
    assert "@reproduce_failure" not in run.stdout


def test_a_driver_process_that_dies_counts_toward_maxfail_and_the_run_stops(certify: Any) -> None:
    run = certify("exits_3_mid_check", "-x", "-r", TARGET, "-r", OTHER)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.report is not None
    assert run.report["run"]["status"] == "stopped"
    assert run.report["run"]["checks"]["failed"] == 1
    assert run.report["run"]["checks"]["not_run"] > 0
    assert run.messages(TARGET)[0] == f"the driver process exited with status 3 during `{TARGET}`"
    assert "STOPPED after 1 failed check" in run.stdout
