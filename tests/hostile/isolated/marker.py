"""A correct driver (the reference one) whose import leaves a marker naming the importing process.

Each import writes ``imported.<pid>`` in ``RUNLANE_HOSTILE_DIR`` holding that process's PID and
``sys.argv``, so a test can tell the backend that serves it from any of the judge's processes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from runlane_conformance.harness import DriverHarness, load_harness

_directory = os.environ.get("RUNLANE_HOSTILE_DIR")
if _directory:
    Path(_directory, f"imported.{os.getpid()}").write_text(
        json.dumps({"pid": os.getpid(), "argv": sys.argv}), encoding="utf-8"
    )


def harness(options: Mapping[str, str]) -> DriverHarness:
    return load_harness("local", options)
