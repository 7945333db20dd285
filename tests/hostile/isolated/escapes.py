"""A broken driver that, from its backend, tries every route out to the judge.

Every transaction fails (``broken``), so only an escape could make it pass. On its first
transaction in each backend process it tries, each route leaving a marker in
``RUNLANE_ESCAPE_DIR`` (a directory of the judge's, which a sandboxed backend cannot write):

* ``escaped-write``: writing a file in the judge's directory (the report's, say);
* ``escaped-proc-N``: opening a pipe of its parent (the check process) through ``/proc/PPID/fd/N``
  and writing "passed" end events into it for every check of the sealing suite;
* ``escaped-signal``: sending signal 0 to its parent's parent (proving it could signal the judge).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import runlane_conformance

from .broken import BrokenHarness, _refuse

_tried = False


def _escape_dir() -> Path:
    return Path(os.environ["RUNLANE_ESCAPE_DIR"])


def _marker(name: str) -> None:
    with contextlib.suppress(OSError):
        (_escape_dir() / name).write_text(str(os.getpid()), encoding="utf-8")


def _forged_ends() -> bytes:
    suite = Path(runlane_conformance.__file__).parent / "suites" / "test_sealing.py"
    names = re.findall(r"^def (test_\w+)", suite.read_text(encoding="utf-8"), re.MULTILINE)
    lines = []
    for name in names:
        check = {
            "nodeid": f"runlane_conformance/suites/test_sealing.py::{name}",
            "requirement_id": "sealing.reads-refused-after-now",
            "status": "passed",
        }
        lines.append(json.dumps({"event": "end", "check": check}))
    return ("\n".join(lines) + "\n").encode()


def _try_to_escape() -> None:
    global _tried
    if _tried:
        return
    _tried = True
    _marker("escaped-write")
    parent = os.getppid()
    with contextlib.suppress(OSError):
        own = {os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1, 2)}
        for name in os.listdir(f"/proc/{parent}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{parent}/fd/{name}")
                if target.startswith("pipe:") and target not in own:
                    fd = os.open(f"/proc/{parent}/fd/{name}", os.O_WRONLY | os.O_NONBLOCK)
                    try:
                        os.write(fd, _forged_ends())
                        _marker(f"escaped-proc-{name}")
                    finally:
                        os.close(fd)
    with contextlib.suppress(OSError):
        grandparent = int(Path(f"/proc/{parent}/stat").read_text().rpartition(")")[2].split()[1])
        if grandparent > 1:
            os.kill(grandparent, 0)
            _marker("escaped-signal")


def _escape_then_refuse() -> None:
    _try_to_escape()
    _refuse()


def harness(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options, before=_escape_then_refuse)
