"""Drivers for the no-stale-pass tests: one that leaves exited orphans behind as it works.

Correct in every answer (they wrap the reference driver), so only the process table is at
stake. Markers go into the directory named by ``RUNLANE_HOSTILE_DIR``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from tests.hostile.drivers import Harness, _mark

#: Orphans the driver leaves, each exiting at once.
ORPHANS = 50
#: How long the driver waits (at most) to be released by the test, holding its check open.
HOLD_SECONDS = 120.0


def _orphan() -> int:
    """Fork a process whose parent exits first: it is handed to the subreaper, then exits too."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        orphan = os.fork()
        if orphan == 0:
            os.close(write_end)
            os._exit(0)
        os.write(write_end, str(orphan).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(middle, 0)
    with os.fdopen(read_end, "rb") as stream:
        return int(stream.read())


class _LeavesOrphans(Harness):
    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        pids = [_orphan() for _ in range(ORPHANS)]
        _mark("orphans", " ".join(map(str, pids)))
        directory = os.environ["RUNLANE_HOSTILE_DIR"]
        until = time.monotonic() + HOLD_SECONDS
        while not os.path.exists(os.path.join(directory, "release")) and time.monotonic() < until:
            time.sleep(0.02)  # bounded: the test releases it as soon as it has looked


def leaves_orphans(options: Mapping[str, str]) -> Harness:
    """While it loads, leaves ``ORPHANS`` exited orphans and waits to be released by the test."""
    return _LeavesOrphans(options)
