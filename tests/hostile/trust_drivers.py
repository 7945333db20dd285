"""Drivers that try to outlive the run, sink the judge's memory, or hang before the plan.

Each is a ``module:factory`` target around the reference driver (``tests.hostile.drivers``),
correct in every answer it gives, so the run would certify if nothing else went wrong. Markers
go into the directory named by ``RUNLANE_HOSTILE_DIR``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from tests.hostile.drivers import TARGET, Harness, _mark, _when

#: How long a daemon lives at most if nothing kills it (so a failing test cannot leak it forever).
DAEMON_LIFETIME_SECONDS = 120.0
#: What a daemon writes over the report: a claim no real run made.
FORGED = {"forged": True, "certification": {"certified": True, "level": "core+append+exclusive"}}


def _directory() -> Path:
    return Path(os.environ["RUNLANE_HOSTILE_DIR"])


def _daemon_loop(directory: Path) -> None:
    """The daemon's life: say who it is, then keep forging the report until it is killed."""
    _mark(f"daemon-{os.getpid()}", json.dumps({"pid": os.getpid(), "sid": os.getsid(0)}))
    report = directory / "report.json"
    forged = json.dumps(FORGED)
    until = time.monotonic() + DAEMON_LIFETIME_SECONDS
    while time.monotonic() < until:
        with contextlib.suppress(OSError):
            partial = directory / f".forged.{os.getpid()}"
            partial.write_text(forged, encoding="utf-8")
            partial.replace(report)
        time.sleep(0.02)


def _spawn_daemon() -> int:
    """Double-fork a ``setsid`` daemon (the classic recipe) and return its pid once it runs."""
    directory = _directory()
    read_end, write_end = os.pipe()
    intermediate = os.fork()
    if intermediate == 0:
        try:
            os.close(read_end)
            os.setsid()  # a new session: out of the supervised child's process group
            daemon = os.fork()
            if daemon == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)  # holds none of the CLI's pipes
                os.write(write_end, str(os.getpid()).encode())
                os.close(write_end)
                _daemon_loop(directory)
            os._exit(0)
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(intermediate, 0)  # the daemon is now an orphan, handed to the nearest subreaper
    with os.fdopen(read_end, "rb") as stream:
        pid = int(stream.read() or b"0")
    deadline = time.monotonic() + 10
    while not (directory / f"daemon-{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # bounded: the daemon writes its marker first thing
    return pid


class _SpawnsDaemon(Harness):
    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        _spawn_daemon()


def spawns_a_daemon(options: Mapping[str, str]) -> Harness:
    """Every process that loads it leaves a ``setsid`` daemon that keeps forging the report."""
    return _SpawnsDaemon(options)


_flooded = False
_CHUNK = b"flood " * (1024 * 1024 // 6) + b"\n"


def _flood() -> None:
    """Write ``RUNLANE_FLOOD_BYTES`` (default 1 GiB) once per process, 3/4 to stdout, 1/4 to stderr."""
    global _flooded
    if _flooded:
        return
    _flooded = True
    total = int(os.environ.get("RUNLANE_FLOOD_BYTES", str(1024**3)))
    for fd, share in ((1, total * 3 // 4), (2, total - total * 3 // 4)):
        left = share
        while left > 0:
            view = memoryview(_CHUNK)[: min(left, len(_CHUNK))]
            while view:  # os.write below Python's buffers: what a C extension printing does
                written = os.write(fd, view)
                view = view[written:]
                left -= written
    _mark("flooded", str(total))


floods_output = _when(TARGET, _flood)


class _HangsBeforeThePlan(Harness):
    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        _mark("started")
        time.sleep(3600)


def hangs_before_the_plan(options: Mapping[str, str]) -> Harness:
    """Its factory never returns: the run is interrupted (or killed) while it loads the driver."""
    return _HangsBeforeThePlan(options)
