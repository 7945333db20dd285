"""What a run leaves behind, through the real ``runlane-certify`` process as CI runs it.

* No stale evidence: from the moment a run starts, the report and JUnit paths hold this run's
  files (``running``, then the verdict, or ``broken``/``interrupted``), on every exit path and
  when the CLI is SIGKILLed; ``badge`` refuses all but a finished certification.
* Nothing of the driver outlives the run: a ``setsid`` daemon the driver double-forks is gone
  when the CLI exits, and cannot rewrite the report.
* The judge's memory is bounded: a check that prints 1 GiB leaves the CLI's peak RSS far below
  200 MB.
* Machine output on stdout: ``--report -`` and ``--junit -`` (or ``/dev/stdout``) through a pipe
  give parseable documents with all human output on stderr; unusable targets are refused first.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from runlane_conformance.report.files import read_report
from runlane_conformance.report.schema import is_unfinished
from tests.hostile.conftest import ROOT, certify_command, hostile_env
from tests.hostile.drivers import TARGET

TRUST = "tests.hostile.trust_drivers"
#: What an earlier run left at the target paths: it must never survive into this run.
STALE_REPORT = '{"certification": {"certified": true}, "stale": true}\n'
STALE_JUNIT = (
    '<testsuites tests="1" failures="0"><testsuite><testcase name="stale"/></testsuite></testsuites>\n'
)
#: Runs the CLI and, at exit, records its own peak memory (VmHWM): the parent alone, no children.
MEASURED = (
    "import atexit, os, sys\n"
    "def dump():\n"
    "    with open('/proc/self/status') as s, open(os.environ['RUNLANE_HWM_FILE'], 'w') as o:\n"
    "        o.write(''.join(line for line in s if line.startswith('VmHWM')))\n"
    "atexit.register(dump)\n"
    "from runlane_conformance.cli.app import main\n"
    "main(sys.argv[1:])\n"
)


def _stale(tmp_path: Path) -> tuple[Path, Path]:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    report.write_text(STALE_REPORT)
    junit.write_text(STALE_JUNIT)
    return report, junit


def _wait_for(path: Path, process: subprocess.Popen[str], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert path.exists(), process.communicate(timeout=30)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie has exited, it only waits for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[:1] != [b"Z"]


def _gone(pid: int, seconds: float = 10) -> bool:
    """Whether ``pid`` has exited (waited for up to ``seconds``, for the kernel to deliver a kill)."""
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pid)


def _badge(report: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        certify_command("badge", str(report), "--svg", str(tmp_path / "badge.svg")),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _junit_error(junit: Path) -> str:
    """The one error testcase of an unfinished run's JUnit file; its message."""
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("1", "1", "0")
    (case,) = root.iter("testcase")
    (error,) = case.iter("error")
    assert "stale" not in junit.read_text()
    return error.get("message") or ""


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a test started indirectly; any still alive at the end is killed (and the test has failed)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# --- no stale evidence ----------------------------------------------------------------------------


def test_exit_2_replaces_an_earlier_report_and_junit_with_broken_ones_that_badge_refuses(
    tmp_path: Path,
) -> None:
    report, junit = _stale(tmp_path)
    done = subprocess.run(
        certify_command("run", "--driver", "no_such_driver", "--report", str(report), "--junit", str(junit)),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    document = read_report(report)
    assert is_unfinished(document)
    assert document["run"]["status"] == "broken" and document["run"]["exit_code"] == 2
    assert "no_such_driver" in document["run"]["problems"][0]
    assert document["certification"]["certified"] is False
    assert "broke before reaching a verdict" in _junit_error(junit)
    badge = _badge(report, tmp_path)
    assert badge.returncode == 2
    assert "broke before reaching a verdict" in badge.stderr
    assert not (tmp_path / "badge.svg").exists()


def test_ctrl_c_while_the_driver_loads_leaves_interrupted_outputs_not_the_earlier_pass(
    tmp_path: Path, leftovers: list[int]
) -> None:
    report, junit = _stale(tmp_path)
    process = subprocess.Popen(
        certify_command(
            "run",
            "--driver",
            f"{TRUST}:hangs_before_the_plan",
            "--report",
            str(report),
            "--junit",
            str(junit),
        ),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(tmp_path / "started", process)
    child = int((tmp_path / "started").read_text())
    leftovers.append(child)
    assert read_report(report)["run"]["status"] == "running"  # already replaced while loading
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    document = read_report(report)
    assert is_unfinished(document) and document["run"]["status"] == "interrupted"
    assert document["run"]["exit_code"] == 130
    assert "interrupted before it had a verdict" in _junit_error(junit)
    assert _gone(child), "the driver process outlived the interrupted run"
    badge = _badge(report, tmp_path)
    assert badge.returncode == 2 and "interrupted run" in badge.stderr


def test_a_sigkilled_cli_leaves_the_running_marker_which_badge_refuses(
    tmp_path: Path, leftovers: list[int]
) -> None:
    report, junit = _stale(tmp_path)
    process = subprocess.Popen(
        certify_command(
            "run",
            "--driver",
            "tests.hostile.drivers:hangs_until_interrupted",
            "-r",
            TARGET,
            "--report",
            str(report),
            "--junit",
            str(junit),
        ),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(tmp_path / "started", process)  # a check is running: the run is well under way
    child = int((tmp_path / "started").read_text())
    leftovers.append(child)
    process.send_signal(signal.SIGKILL)  # nothing of the CLI's own code runs after this
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    document = read_report(report)
    assert is_unfinished(document) and document["run"]["status"] == "running"
    assert document["run"]["exit_code"] is None
    assert document["run"]["requirements"] == [TARGET]
    assert "in progress" in _junit_error(junit)
    badge = _badge(report, tmp_path)
    assert badge.returncode == 2
    assert "has not finished (still running, or its process was killed)" in badge.stderr
    assert _gone(child), "the driver process outlived the killed CLI"


# --- nothing of the driver outlives the run ------------------------------------------------------


def test_a_setsid_daemon_the_driver_forks_is_gone_when_the_cli_exits_and_cannot_rewrite_the_report(
    tmp_path: Path, leftovers: list[int]
) -> None:
    report = tmp_path / "report.json"
    done = subprocess.run(
        certify_command("run", "--driver", f"{TRUST}:spawns_a_daemon", "-r", TARGET, "--report", str(report)),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    daemons = [json.loads(path.read_text()) for path in tmp_path.glob("daemon-*")]
    leftovers.extend(daemon["pid"] for daemon in daemons)
    assert done.returncode == 0, done.stdout + done.stderr
    # One per process that loaded the driver (the probe and the checks), each in a session of its own.
    assert len(daemons) >= 1
    assert all(daemon["sid"] != os.getsid(0) for daemon in daemons)
    # Gone by the time the CLI exited: no waiting for it here (a dead process writes nothing more).
    alive = [daemon["pid"] for daemon in daemons if Path(f"/proc/{daemon['pid']}").exists()]
    assert not alive, f"driver daemons outlived the run: {alive}"
    document = read_report(report)  # the CLI's own report, written after the daemons were ended
    assert "forged" not in document
    assert document["run"]["status"] == "partial"


# --- bounded judge memory ---------------------------------------------------------------------------


def test_a_check_that_prints_1_gib_leaves_the_judge_under_200_mb(tmp_path: Path) -> None:
    report, hwm = tmp_path / "report.json", tmp_path / "hwm"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURED,
            *("run", "--driver", f"{TRUST}:floods_output", "-r", TARGET, "--report", str(report)),
        ],
        cwd=ROOT,
        env=hostile_env(tmp_path, RUNLANE_HWM_FILE=str(hwm), RUNLANE_FLOOD_BYTES=str(1024**3)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "flooded").read_text() == str(1024**3)  # the whole GiB was written (and read)
    peak_kib = int(hwm.read_text().split()[1])
    # Before the output was capped, the same run peaked at 2.1 GB (the whole log read into memory).
    assert peak_kib < 200 * 1024, f"the CLI peaked at {peak_kib} KiB while a check printed 1 GiB"
    assert read_report(report)["run"]["status"] == "partial"
    assert elapsed < 240


# --- machine output on stdout -----------------------------------------------------------------------


def _run_to_pipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        certify_command("run", "--driver", "local", "-r", TARGET, *args),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,  # a pipe, as in `runlane-certify run --report - | jq .`
        timeout=180,
    )


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_the_report_goes_to_stdout_through_a_pipe_and_everything_human_to_stderr(
    tmp_path: Path, target: str
) -> None:
    done = _run_to_pipe(tmp_path, "--report", target, "--junit", str(tmp_path / "junit.xml"))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert document["run"]["status"] == "partial" and document["run"]["requirements"] == [TARGET]
    stderr = done.stderr.decode()
    assert "PARTIAL RUN" in stderr and "Certifying driver local" in stderr
    assert "junit:  " in stderr and "report: " not in stderr
    assert ET.parse(tmp_path / "junit.xml").getroot().get("tests")


def test_junit_goes_to_stdout_and_the_report_to_its_file(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = _run_to_pipe(tmp_path, "--junit", "-", "--report", str(report))
    assert done.returncode == 0, done.stderr
    root = ET.fromstring(done.stdout)
    assert root.tag == "testsuites" and root.get("failures") == "0"
    assert read_report(report)["run"]["status"] == "partial"
    assert b"PARTIAL RUN" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--report", "{tmp}"), "cannot write report '{tmp}': it is a directory"),
        # Not writable by anyone, root included (unlike a chmod 555 directory).
        (("--junit", "/proc/sys/junit.xml"), "directory '/proc/sys' is not writable"),
        (("--report", "{tmp}/none/r.json"), "directory '{tmp}/none' does not exist"),
        (("--report", "-", "--junit", "/dev/stdout"), "--report and --junit cannot both write to standard"),
        (("--report", "{tmp}/same", "--junit", "{tmp}/same"), "--report and --junit name the same file"),
    ],
    ids=["directory", "unwritable", "missing-directory", "both-on-stdout", "same-file"],
)
def test_an_unusable_output_target_is_refused_before_the_run_with_one_line(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    shown = tuple(arg.format(tmp=tmp_path) for arg in args)
    started = time.monotonic()
    done = _run_to_pipe(tmp_path, *shown)
    assert done.returncode == 2
    assert done.stdout == b""
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("runlane-certify: error: ") and message.format(tmp=tmp_path) in line
    assert time.monotonic() - started < 30  # refused up front, no check ran
    assert not (tmp_path / "same").exists()


def test_the_capabilities_report_goes_to_stdout_too(tmp_path: Path) -> None:
    done = subprocess.run(
        certify_command("report", "--driver", "local", "--report", "-"),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kind"] == "capabilities"
    assert b"Capabilities and limits of driver local" in done.stderr
