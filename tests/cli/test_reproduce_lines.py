"""Every kind of driver target gets a ``pytest:`` line that replays its failure from where the run was made.

For each kind (an entry-point name, a ``module:factory`` target in the working folder, the same run
isolated in its own process, an async driver) a failing driver is certified with ``runlane-certify
run`` from a fresh folder, as a new author does. The printed ``pytest:`` line must hold no path of
this machine (no interpreter, no absolute path), and, pasted as printed into the same folder, must
fail the same requirement again. Nothing puts the checkout or the folder on ``PYTHONPATH``: a
``module:factory`` target is found only because it sits in the folder, and the entry-point driver
only because its package is installed (a ``.dist-info`` on the path, as ``pip install`` leaves).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENT = "point_reads.exact-positions"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(600)

#: A synchronous driver whose get() answers positions in reverse: fails ``point_reads.exact-positions``.
REVERSED_DRIVER = '''
"""The reference driver, but get() answers in reverse request order."""
from runlane_conformance.harness import load_harness


class Tx:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get(self, keys):
        return list(reversed(self.inner.get(keys)))


class Driver:
    def __init__(self, inner):
        self.inner = inner
        self.profile = inner.profile

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def transaction(self, callback, *args, **kwargs):
        return self.inner.transaction(lambda tx: callback(Tx(tx)), *args, **kwargs)


class Store:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def connect(self, *args, **kwargs):
        return Driver(self.inner.connect(*args, **kwargs))


class Harness:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def open_store(self):
        return Store(self.inner.open_store())

    def attach(self, address):
        return Store(self.inner.attach(address))


def harness(options):
    return Harness(load_harness("local", options))
'''

#: The same bug in an async driver (the reference driver ported to async, one coroutine overridden).
ASYNC_DRIVER = '''
"""An async driver whose get() answers in reverse request order."""
from async_wrapping import AsyncWrappedTransaction, async_port_harness


class Reversed(AsyncWrappedTransaction):
    async def get(self, keys):
        return list(reversed(await super().get(keys)))


harness = async_port_harness(transaction_class=Reversed)
'''


def _environment(path: Path | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return env


def _installed(site: Path) -> None:
    """A package ``reversed-driver`` installed into ``site``: its module and its entry point."""
    site.mkdir()
    (site / "reversed_driver.py").write_text(REVERSED_DRIVER)
    info = site / "reversed_driver-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reversed-driver\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[runlane.storage_drivers]\nreversed = reversed_driver:harness\n")


def _pytest_line(output: str) -> list[str]:
    lines = [line.strip() for line in output.splitlines() if line.strip().startswith("pytest:")]
    assert lines, output
    return shlex.split(lines[0].removeprefix("pytest:"))


def _launch(words: list[str]) -> list[str]:
    """The printed words as a shell here runs them: ``python`` and ``pytest`` from this environment."""
    first = {"python": str(BIN / "python"), "pytest": str(BIN / "pytest")}[words[0]]
    return [first, *words[1:]]


@pytest.mark.parametrize(
    ("kind", "target", "extra"),
    [
        ("entry point", "reversed", []),
        ("module:factory", "reversed_driver:harness", []),
        ("isolated", "reversed_driver:harness", ["--isolation", "process"]),
        ("async", "async_driver:harness", []),
    ],
)
def test_the_printed_pytest_line_replays_the_failure_from_the_folder_the_run_was_made_in(
    tmp_path: Path, kind: str, target: str, extra: list[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    site = None
    if kind == "entry point":
        site = tmp_path / "site"
        _installed(site)
    else:
        (work / "reversed_driver.py").write_text(REVERSED_DRIVER)
        (work / "async_driver.py").write_text(ASYNC_DRIVER)
        shutil.copyfile(ROOT / "tests" / "mutants" / "async_wrapping.py", work / "async_wrapping.py")
    env = _environment(site)
    run = subprocess.run(
        [
            str(BIN / "runlane-certify"),
            "run",
            "--driver",
            target,
            "--requirement",
            REQUIREMENT,
            "--seed",
            "7",
            *extra,
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    # The driver's bug failed the requirement, not a mistake in how the target was written.
    assert f"✗ {REQUIREMENT}" in run.stdout, run.stdout
    assert "TypeError" not in run.stdout and "AttributeError" not in run.stdout, run.stdout
    words = _pytest_line(run.stdout)
    machine = [w for w in words if w.startswith("/") or str(tmp_path) in w or sys.executable in w]
    assert machine == [], words
    assert words[words.index("--runlane-driver") + 1] == target
    assert words[words.index("--runlane-requirement") + 1] == REQUIREMENT
    assert ("--runlane-isolation" in words) == (kind == "isolated")
    # ``python -m pytest`` finds a module in the working folder; the ``pytest`` script would not.
    launcher = ["pytest"] if kind == "entry point" else ["python", "-m", "pytest"]
    assert words[: len(launcher)] == launcher
    replay = subprocess.run(
        [*_launch(words), "-p", "no:cacheprovider"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "FAILED " in replay.stdout and f"[{REQUIREMENT}]" in replay.stdout, replay.stdout
    assert " error" not in replay.stdout.splitlines()[-1] and "TypeError" not in replay.stdout, replay.stdout
