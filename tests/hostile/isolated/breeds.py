"""A correct driver whose backend leaves a daemon that keeps replacing itself with a fresh process.

Each generation forks the next and exits, every few milliseconds, so a process-tree walk that
kills what it found is always one generation behind. Every generation holds the same exclusive
``flock`` on ``breeder.lock`` in ``RUNLANE_HOSTILE_DIR`` (a lock lives as long as any process
holding its open file), so the lock is free exactly when no generation is left.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Mapping
from pathlib import Path

from runlane_conformance.harness import DriverHarness, load_harness

#: At most this long, so a test that fails cannot leave it running for ever.
LIFETIME_SECONDS = 60.0
#: Between generations (bounds the CPU it costs).
GENERATION_SECONDS = 0.005

_started = False


def _breed(lock_fd: int) -> None:
    until = time.monotonic() + LIFETIME_SECONDS
    while time.monotonic() < until:
        time.sleep(GENERATION_SECONDS)
        if os.fork() != 0:
            os._exit(0)  # the parent leaves: the child, a new pid, carries on with the lock
    os.close(lock_fd)
    os._exit(0)


def _start() -> None:
    lock = Path(os.environ["RUNLANE_HOSTILE_DIR"], "breeder.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    Path(os.environ["RUNLANE_HOSTILE_DIR"], "breeding").write_text("yes", encoding="utf-8")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for standard in (0, 1, 2):
                os.dup2(null, standard)
            _breed(fd)
        os._exit(0)
    os.close(fd)


def harness(options: Mapping[str, str]) -> DriverHarness:
    global _started
    if not _started:
        _started = True
        _start()
    return load_harness("local", options)
