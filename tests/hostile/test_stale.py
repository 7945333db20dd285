"""No stale pass on any path, through the real ``runlane-certify`` process as CI runs it.

An earlier run's certified report at ``--report`` must never outlive a later run that did not
reach a verdict, however early or however it ended: a SIGTERM while the program is still
starting, a configuration that cannot be read, a disk too full for the ``running`` marker.
``badge`` never overwrites the report it reads; ``--workers`` is bounded; and the orphans a driver
leaves are reaped while the run goes on, not left as zombies until its end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runlane_conformance.report.files import read_report
from runlane_conformance.report.schema import is_unfinished
from runlane_conformance.run.scaling import MAX_WORKERS
from tests.hostile.conftest import ROOT, certify_command, hostile_env
from tests.hostile.drivers import TARGET

#: A report an earlier run left; it claims a certification.
STALE = '{"certification": {"certified": true}, "stale": true}\n'
#: The console script's own entry point, which holds SIGTERM from its first line.
ENTRY = "import sys; from runlane_conformance.cli.entry import main; main(sys.argv[1:])"
#: The same, with a SIGTERM arriving right after that first line (before the app is even imported).
EARLY_SIGTERM = (
    "import os, signal, sys\n"
    "from runlane_conformance.cli import entry\n"
    "held = entry.hold_termination\n"
    "def hold_then_terminated():\n"
    "    held()\n"
    "    os.kill(os.getpid(), signal.SIGTERM)\n"
    "entry.hold_termination = hold_then_terminated\n"
    "entry.main(sys.argv[1:])\n"
)


def _stale_report(tmp_path: Path) -> Path:
    report = tmp_path / "report.json"
    report.write_text(STALE)
    return report


def _refused_by_badge(report: Path, tmp_path: Path) -> bool:
    done = subprocess.run(
        certify_command("badge", str(report), "--svg", str(tmp_path / "badge.svg")),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode == 2 and not (tmp_path / "badge.svg").exists()


def test_a_sigterm_right_after_the_first_line_leaves_an_interrupted_report_not_the_earlier_pass(
    tmp_path: Path,
) -> None:
    report = _stale_report(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", EARLY_SIGTERM, "run", "--driver", "local", "--report", str(report)],
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    document = read_report(report)
    assert is_unfinished(document) and document["run"]["status"] == "interrupted"
    assert _refused_by_badge(report, tmp_path)


def test_a_sigterm_while_the_config_is_read_leaves_an_interrupted_report_not_the_earlier_pass(
    tmp_path: Path,
) -> None:
    report = _stale_report(tmp_path)
    config = tmp_path / "config.toml"
    os.mkfifo(config)  # reading it blocks until a writer comes: the run is held before its plan
    process = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "run", "--config", str(config), "--report", str(report)],
        cwd=ROOT,
        env=hostile_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while report.read_text() == STALE and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    document = read_report(report)
    assert is_unfinished(document) and document["run"]["status"] == "interrupted"
    assert _refused_by_badge(report, tmp_path)


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(("--driver", "local", "--workers", str(MAX_WORKERS + 1)), id="too-many-workers"),
        pytest.param(("--driver", "local", "--workers", "0"), id="no-workers"),
        pytest.param(("--driver", "local", "--junit", "/nonexistent/dir/junit.xml"), id="bad-junit"),
        pytest.param(("--config", "/nonexistent/pyproject.toml"), id="missing-config"),
        pytest.param(("--driver", "local", "--profile", "nope"), id="unknown-profile"),
    ],
)
def test_a_usage_error_replaces_the_earlier_pass_with_a_broken_report_and_says_one_line(
    tmp_path: Path, arguments: tuple[str, ...]
) -> None:
    report = _stale_report(tmp_path)
    done = subprocess.run(
        certify_command("run", "--report", str(report), *arguments),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("runlane-certify: error: "), done.stderr
    # Either replaced by a broken report or, refused before the marker, emptied: never the old pass.
    text = report.read_text()
    assert text == "" or read_report(report)["run"]["status"] == "broken", text[:300]
    assert _refused_by_badge(report, tmp_path)


def test_workers_beyond_the_bound_are_refused_with_the_bound_named(tmp_path: Path) -> None:
    done = subprocess.run(
        certify_command("run", "--driver", "local", "--workers", "1000000"),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "runlane-certify: error: Invalid value for '--workers': "
        f"workers must be at most {MAX_WORKERS}, got 1000000"
    )


_FULL_DISK = """
set -e
mount -t tmpfs -o size=64k tmpfs "$DISK"
printf '%s' "$STALE" > "$DISK/report.json"
head -c 1048576 /dev/zero > "$DISK/filler" 2>/dev/null || true
set +e
"$PYTHON" -c "$ENTRY" run --driver local --report "$DISK/report.json" 2>"$OUT/stderr"
echo $? > "$OUT/code"
if [ -e "$DISK/report.json" ]; then cat "$DISK/report.json" > "$OUT/report"; else echo gone > "$OUT/gone"; fi
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) to mount a small tmpfs")
def test_a_disk_too_full_for_the_running_marker_leaves_no_earlier_pass(tmp_path: Path) -> None:
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    env = hostile_env(tmp_path, DISK=str(disk), OUT=str(out), STALE=STALE, PYTHON=sys.executable, ENTRY=ENTRY)
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", _FULL_DISK],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not (out / "code").exists():
        pytest.skip(f"no user and mount namespace here to make a full disk in: {done.stderr.strip()}")
    assert (out / "code").read_text().strip() == "2", (out / "stderr").read_text()
    stderr = (out / "stderr").read_text().strip().splitlines()
    assert len(stderr) == 1 and "No space left on device" in stderr[0], stderr
    assert "emptied" in stderr[0]
    left = (out / "report").read_text() if (out / "report").exists() else ""
    assert "certified" not in left, "the earlier pass survived a run that could not write its marker"


def test_badge_refuses_to_write_over_the_report_it_reads(tmp_path: Path) -> None:
    report = _stale_report(tmp_path)
    alias = tmp_path / "alias.json"
    alias.symlink_to(report)
    hardlink = tmp_path / "hard.json"
    os.link(report, hardlink)
    for flag, target in (("--svg", report), ("--endpoint", alias), ("--svg", hardlink)):
        done = subprocess.run(
            certify_command("badge", str(report), flag, str(target)),
            cwd=ROOT,
            env=hostile_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "is the report being read" in done.stderr
        assert report.read_text() == STALE


def test_orphans_the_driver_leaves_are_reaped_while_the_run_goes_on(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    process = subprocess.Popen(
        certify_command(
            "run",
            "--driver",
            "tests.hostile.stale_drivers:leaves_orphans",
            "-r",
            TARGET,
            "--report",
            str(report),
        ),
        cwd=ROOT,
        env=hostile_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        marker = tmp_path / "orphans"
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), process.communicate(timeout=30)
        orphans = [int(pid) for pid in marker.read_text().split()]
        # The driver still holds its process open: whatever reaps the orphans now is the live run.
        deadline = time.monotonic() + 60
        while any(Path(f"/proc/{pid}").exists() for pid in orphans) and time.monotonic() < deadline:
            time.sleep(0.05)
        zombies = [pid for pid in orphans if Path(f"/proc/{pid}").exists()]
        assert process.poll() is None, "the run ended before the orphans could be looked at"
        (tmp_path / "release").touch()
        stdout, stderr = process.communicate(timeout=180)
    finally:
        (tmp_path / "release").touch()
        process.kill()
    assert not zombies, f"{len(zombies)} exited orphans were left unreaped during the run"
    assert process.returncode == 0, stdout + stderr
    assert json.loads(report.read_text())["run"]["status"] == "partial"
