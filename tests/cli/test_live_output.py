"""Live progress reaches the terminal while the checks run (pytest must not swallow it).

Rich refreshes its progress display from a background thread at any moment,
including while a check is running, so output written during a check must
reach the real stdout. The stand-in here is a driver that writes a line to
the process's original stdout from inside every transaction.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

LOUD_DRIVER = """
import sys
from runlane_conformance.harness import load_harness

REAL_STDOUT = sys.stdout  # bound before any capture starts, like the CLI's console


class Loud:
    def __init__(self, inner):
        self.inner = inner
        self.profile = inner.profile

    def transaction(self, callback):
        REAL_STDOUT.write("DURING-CHECK\\n")
        REAL_STDOUT.flush()
        return self.inner.transaction(callback)

    def query(self, command):
        return self.inner.query(command)

    def close(self):
        self.inner.close()


class Store:
    def __init__(self, inner):
        self.inner = inner

    def connect(self, clock=None):
        return Loud(self.inner.connect(clock=clock))

    def address(self):
        return None

    def close(self):
        self.inner.close()


class Harness:
    def __init__(self):
        self.inner = load_harness("local", {})

    def open_store(self):
        return Store(self.inner.open_store())

    def attach(self, address):
        raise ValueError("no address")

    def close(self):
        self.inner.close()


def harness(options):
    return Harness()
"""


def test_output_written_to_the_terminal_during_a_check_is_not_swallowed(tmp_path: Path) -> None:
    (tmp_path / "loud_driver.py").write_text(LOUD_DRIVER, encoding="utf-8")
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        import loud_driver
        from runlane_conformance.runner import run_suites

        result = run_suites("loud_driver:harness", areas=["point_reads"], seed=1)
        assert result.certified or result.tests, "the run produced no checks"
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300, check=True
    )
    seen = done.stdout.count("DURING-CHECK")
    assert seen >= 7, f"output written while checks ran was swallowed by the runner: {done.stdout!r}"
