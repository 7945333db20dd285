"""A correct driver that says whether its secret option reached it, and how it was started.

Takes ``secret=VALUE`` (removed before the reference driver sees the options). Writes
``seen.<pid>`` into ``RUNLANE_HOSTILE_DIR``: its own command line, and whether the secret
arrived, then waits for ``release`` (bounded) so a test can look at every process meanwhile.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from runlane_conformance.harness import DriverHarness, load_harness

HOLD_SECONDS = 60.0


def harness(options: Mapping[str, str]) -> DriverHarness:
    rest = dict(options)
    secret = rest.pop("secret", None)
    directory = Path(os.environ["RUNLANE_HOSTILE_DIR"])
    cmdline = Path("/proc/self/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    (directory / f"seen.{os.getpid()}").write_text(
        json.dumps({"cmdline": cmdline, "secret": secret}), encoding="utf-8"
    )
    until = time.monotonic() + HOLD_SECONDS
    while not (directory / "release").exists() and time.monotonic() < until:
        time.sleep(0.02)  # bounded: the test releases it once it has looked at every process
    return load_harness("local", rest)
