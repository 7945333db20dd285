"""``--isolation process`` in its sandbox: every route out of the backend that a hostile round found.

Each test runs the real ``runlane-certify`` in a subprocess, isolated. A sandboxed backend (its
own PID, mount, user and network namespaces, ``run.sandbox``) cannot write the judge's files, open
the check process's event pipe through ``/proc``, signal the judge, leave a daemon that outlives
the namespace, or see its options on any command line; a run that cannot make the sandbox says so
and is not marked isolated. A forged event that reaches the judge anyway is a run problem.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.protocol.client import PRIVATE_OPTIONS_FD_VARIABLE
from runlane_conformance.run.sandbox import (
    RunSandbox,
    SandboxNetwork,
    bwrap_program,
    sandbox_unavailable,
)
from tests.hostile.conftest import ROOT, certify_command, hostile_env
from tests.hostile.drivers import TARGET

ISOLATED = "tests.hostile.isolated"
PROCESS = ("--isolation", "process")
#: A secret that must never be on any process's command line.
SECRET = "s3cret-Sandbox-value"

needs_sandbox = pytest.mark.skipif(
    sandbox_unavailable(SandboxNetwork.NONE) is not None,
    reason=f"no sandbox here: {sandbox_unavailable(SandboxNetwork.NONE)}",
)


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, dict[str, Any]]:
    """Run the CLI with its report in a judge-only directory (not writable from the sandbox)."""
    judge = tmp_path / "judge"
    judge.mkdir(exist_ok=True)
    report = judge / "report.json"
    done = subprocess.run(
        certify_command("run", "--seed", "1", "--examples", "none", "--report", str(report), *args),
        cwd=ROOT,
        env=env or hostile_env(tmp_path / "markers", RUNLANE_ESCAPE_DIR=str(judge)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text())


def _requirement(report: dict[str, Any], requirement_id: str) -> dict[str, Any]:
    return next(r for r in report["requirements"] if r["id"] == requirement_id)


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@needs_sandbox
def test_a_sandboxed_backend_cannot_write_the_judges_files_open_its_pipes_or_signal_it(
    tmp_path: Path, markers: Path
) -> None:
    code, output, report = _run(tmp_path, "--driver", f"{ISOLATED}.escapes:harness", "-r", TARGET, *PROCESS)
    assert code == 1, output
    assert report["environment"]["sandbox"].startswith("bubblewrap"), report["environment"]
    assert _requirement(report, TARGET)["outcome"] == "failed"
    assert report["run"]["checks"]["passed"] == 0
    assert sorted(p.name for p in (tmp_path / "judge").glob("escaped-*")) == []


def test_without_a_sandbox_the_same_routes_open_and_a_forged_event_is_a_run_problem_never_a_pass(
    tmp_path: Path, markers: Path
) -> None:
    # No bubblewrap on PATH: the run says it is not sandboxed, and the driver gets out.
    env = hostile_env(markers, RUNLANE_ESCAPE_DIR=str(tmp_path / "judge"), PATH="/nonexistent")
    code, output, report = _run(
        tmp_path, "--driver", f"{ISOLATED}.escapes:harness", "-a", "sealing", *PROCESS, env=env
    )
    assert code == 1, output
    assert report["environment"]["sandbox"].startswith("unavailable: bubblewrap (bwrap) is not installed")
    assert "NOT sandboxed" in output and "(isolated)" not in output
    escaped = {p.name for p in (tmp_path / "judge").glob("escaped-*")}
    assert "escaped-write" in escaped and "escaped-signal" in escaped
    assert any(name.startswith("escaped-proc-") for name in escaped), escaped
    # The forged "passed" ends reached the judge's pipes: not one of them became a pass.
    assert _requirement(report, TARGET)["outcome"] == "failed"
    assert any("tampered" in problem for problem in report["run"]["problems"]), report["run"]["problems"]
    assert report["certification"]["certified"] is False


@needs_sandbox
def test_a_daemon_that_keeps_forking_a_new_generation_ends_with_the_sandbox(
    tmp_path: Path, markers: Path
) -> None:
    code, output, report = _run(tmp_path, "--driver", f"{ISOLATED}.breeds:harness", "-r", TARGET, *PROCESS)
    assert code == 0, output
    assert (markers / "breeding").exists(), "the breeder never started"
    # Every generation held this lock: free now means no generation outlived the run.
    with open(markers / "breeder.lock", "rb") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert report["run"]["status"] == "partial"


@needs_sandbox
def test_no_option_value_of_an_isolated_run_is_on_any_command_line(tmp_path: Path, markers: Path) -> None:
    judge = tmp_path / "judge"
    judge.mkdir()
    process = subprocess.Popen(
        certify_command(
            "run",
            "--driver",
            f"{ISOLATED}.options_seen:harness",
            "--option",
            f"secret={SECRET}",
            "-r",
            TARGET,
            "--examples",
            "none",
            "--report",
            str(judge / "report.json"),
            *PROCESS,
        ),
        cwd=ROOT,
        env=hostile_env(markers),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(markers.glob("seen.*")) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert list(markers.glob("seen.*")), process.communicate(timeout=30)
        # The backend holds the run here: every process of the run is alive. ps reads /proc/PID/cmdline.
        showing = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if SECRET.encode() in (entry / "cmdline").read_bytes():
                        showing.append(entry.name)
                except OSError:
                    continue
        (markers / "release").touch()
        stdout, stderr = process.communicate(timeout=180)
    finally:
        (markers / "release").touch()
        process.kill()
    # The CLI's own command line carries it (the user typed it there); no process the run started does.
    assert showing == [str(process.pid)], showing
    seen = [json.loads(path.read_text()) for path in markers.glob("seen.*")]
    assert all(entry["secret"] == SECRET for entry in seen), seen  # it did reach the driver
    assert all(SECRET not in " ".join(entry["cmdline"]) for entry in seen)
    assert process.returncode == 0, stdout + stderr


def test_startup_code_installed_with_the_driver_runs_only_in_the_backend_of_its_own_environment(
    tmp_path: Path, markers: Path
) -> None:
    # The driver's environment: an interpreter whose site directory carries a sitecustomize (what a
    # .pth file or a sitecustomize installed with the driver amounts to), recording who runs it.
    site = tmp_path / "driver-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import json, os\n"
        f"path = os.path.join({str(markers)!r}, f'startup.{{os.getpid()}}')\n"
        "open(path, 'w').write(json.dumps(open('/proc/self/cmdline').read().split(chr(0))))\n",
        encoding="utf-8",
    )
    python = tmp_path / "driver-python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site}:{ROOT} exec {sys.executable} "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    code, output, report = _run(
        tmp_path, "--driver", "local", "-r", TARGET, *PROCESS, "--backend-python", str(python)
    )
    assert code == 0, output
    ran = [json.loads(path.read_text()) for path in markers.glob("startup.*")]
    assert ran, "the driver's environment never ran: the backend did not use --backend-python"
    assert all("runlane_conformance.backend" in argv for argv in ran), ran
    assert _requirement(report, TARGET)["outcome"] == "passed"


def test_backend_python_without_isolation_is_refused_with_one_line(tmp_path: Path) -> None:
    code, output, report = _run(tmp_path, "--driver", "local", "--backend-python", sys.executable)
    assert code == 2
    assert "--backend-python needs --isolation process" in output
    assert report["run"]["status"] == "broken"


_SHOW = (
    "import json, os; print(json.dumps([os.getpid(), os.readlink('/proc/self/ns/pid'), "
    "sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.environ['TMPDIR'], "
    "os.read(int(os.environ.get('RUNLANE_BACKEND_OPTIONS_FD', '0') or 0), 100).decode() "
    "if os.environ.get('RUNLANE_BACKEND_OPTIONS_FD') else '']))"
)


#: Puts the read end of a pipe (argv[1]) on descriptor argv[2], then runs the rest of argv: a check
#: process starting a backend with its options pipe on that descriptor.
_ON_DESCRIPTOR = (
    "import os, sys; r, t = int(sys.argv[1]), int(sys.argv[2])\n"
    "if r != t: os.dup2(r, t); os.close(r)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])"
)


def _in_sandbox(sandbox: RunSandbox, options_fd: int | None = None) -> list[Any]:
    """Start one process the way a backend starts (the run's prefix), optionally with an options pipe
    on descriptor ``options_fd``; return what it saw."""
    env = dict(os.environ)
    env.pop(PRIVATE_OPTIONS_FD_VARIABLE, None)
    command = [*sandbox.prefix, sys.executable, "-c", _SHOW]
    read = None
    if options_fd is not None:
        read, write = os.pipe()
        os.write(write, b"options")
        os.close(write)
        env[PRIVATE_OPTIONS_FD_VARIABLE] = str(options_fd)
        command = [sys.executable, "-c", _ON_DESCRIPTOR, str(read), str(options_fd), *command]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            pass_fds=() if read is None else (read,),
            timeout=60,
        )
    finally:
        if read is not None:
            os.close(read)
    assert done.returncode == 0, done.stderr
    seen: list[Any] = json.loads(done.stdout)
    return seen


@needs_sandbox
def test_every_backend_of_a_run_shares_the_runs_one_pid_namespace_and_no_other_run_does(
    tmp_path: Path,
) -> None:
    # LMDB and engines like it name processes by id in a shared file: two backends of one run must
    # never have the same id, so they live in one PID namespace; another run has its own.
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with (
        RunSandbox(bwrap_program(), SandboxNetwork.NONE, str(tmp_path / "one"), own_tmp=False) as one,
        RunSandbox(bwrap_program(), SandboxNetwork.NONE, str(tmp_path / "two"), own_tmp=False) as two,
    ):
        first, second = _in_sandbox(one), _in_sandbox(one)
        other = _in_sandbox(two)
    assert first[1] == second[1] != other[1]
    assert first[1] != os.readlink("/proc/self/ns/pid")
    assert first[0] != second[0]
    # Its /proc shows the run's holder and the sandboxed processes only: no judge, no other run.
    assert max(second[2]) < 100, second[2]
    assert os.getpid() not in second[2] or os.getpid() < 100
    assert first[3] == str(tmp_path / "one") and other[3] == str(tmp_path / "two")


@needs_sandbox
@pytest.mark.parametrize("options_fd", [3, 4, 5, 9])
def test_a_backend_keeps_its_options_pipe_whatever_descriptor_it_is_on(
    tmp_path: Path, options_fd: int
) -> None:
    # The prefix opens the run's namespaces on low descriptors of its own: never on the options pipe.
    with RunSandbox(bwrap_program(), SandboxNetwork.NONE, str(tmp_path), own_tmp=False) as sandbox:
        assert _in_sandbox(sandbox, options_fd)[4] == "options"


@needs_sandbox
def test_ending_a_run_ends_every_process_left_in_its_namespace(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lock = run / "daemon.lock"
    daemon = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    for s in (0, 1, 2): os.dup2(os.open(os.devnull, os.O_RDWR), s)\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        "print('started', flush=True)\n"
    )
    sandbox = RunSandbox(bwrap_program(), SandboxNetwork.NONE, str(run))
    try:
        done = subprocess.run(
            [*sandbox.prefix, sys.executable, "-c", daemon], capture_output=True, text=True, timeout=60
        )
        assert done.stdout == "started\n", done.stderr
        held = os.open(lock, os.O_RDONLY)
    finally:
        sandbox.close()
    # The daemon outlived its backend and held the lock until the run's namespace ended.
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(held)
    assert not run.exists()  # the run's private directory went with it
