"""The supervised child: probes the driver, collects the suites, and runs the checks it is handed.

Started by ``supervise`` as ``python -m runlane_conformance.run.child SPEC``.
It talks to its parent over two inherited pipes (file descriptors named in
the environment): JSON-line events out, JSON-line commands in. The parent
keeps the verdict; this process only reports what happens, so anything the
driver does to it (exit, crash, hang, leak threads) cannot change a verdict.

Guarantees:

* the stacks of all threads are written to the spec's stack file on SIGUSR1
  (the parent's deadline) and on a fatal signal (a segfault), through
  ``faulthandler``, which works even while Python code is stuck in C;
* the process dies with its parent (``PR_SET_PDEATHSIG`` on Linux), so an
  interrupted run leaves no orphan;
* when the session is over it leaves with ``os._exit``: a non-daemon thread
  the driver leaked cannot keep it alive.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..safe_text import describe_exception, one_line
from .child_events import ChildError, ChildEvent, ChildExit, Probe, ProbeError, encode_line

if TYPE_CHECKING:
    from ..harness import DriverHarness

__all__ = ["COMMANDS_FD_VARIABLE", "EVENTS_FD_VARIABLE", "main"]

EVENTS_FD_VARIABLE = "RUNLANE_EVENTS_FD"
COMMANDS_FD_VARIABLE = "RUNLANE_COMMANDS_FD"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before we asked
        os._exit(70)


class _Channel:
    """Events to the parent: each typed event as its one line (``child_events.encode_line``), flushed
    at once."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def emit(self, event: ChildEvent) -> None:
        self._stream.write(encode_line(event))
        self._stream.flush()


def _commands(stream: TextIO) -> Iterator[str | None]:
    for line in stream:
        message = json.loads(line)
        if message.get("op") != "run":
            break
        yield str(message["nodeid"])
    yield None


class _ProbedHarness:
    """A pytest plugin handing the probe's harness to the session (``adopt_harness``)."""

    def __init__(self, driver: str, options: dict[str, str], harness: DriverHarness) -> None:
        self._driver = driver
        self._options = options
        self._harness: DriverHarness | None = harness

    def pytest_configure(self, config: Any) -> None:
        from ..fixtures.plugin import adopt_harness

        harness, self._harness = self._harness, None
        if harness is not None and not adopt_harness(config, self._driver, self._options, harness):
            with contextlib.suppress(Exception):
                harness.close()


def _probe(spec: dict[str, Any], channel: _Channel) -> DriverHarness | None:
    """Probe the driver and report its facts; the harness it loaded (for the checks), or ``None``."""
    from ..harness import HarnessError
    from .probe import probe_keeping_harness

    try:
        facts, harness = probe_keeping_harness(spec["driver"], spec["options"])
    except HarnessError as error:
        channel.emit(ProbeError(one_line(error)))
        return None
    except BaseException as error:  # SystemExit or KeyboardInterrupt from a factory are driver faults too
        message = f"driver {spec['driver']!r}: loading and connecting raised {describe_exception(error)}"
        channel.emit(ProbeError(one_line(message)))
        return None
    channel.emit(Probe(facts))
    return harness


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    _die_with_parent()
    stack_file = open(spec["stack_path"], "a", encoding="utf-8")  # noqa: SIM115 - lives as long as we do
    faulthandler.enable(file=stack_file, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True, chain=False)
    events_fd = int(os.environ.pop(EVENTS_FD_VARIABLE))
    commands_fd = int(os.environ.pop(COMMANDS_FD_VARIABLE))
    for fd in (events_fd, commands_fd):
        os.set_inheritable(fd, False)
    channel = _Channel(os.fdopen(events_fd, "w", encoding="utf-8"))
    commands = os.fdopen(commands_fd, "r", encoding="utf-8")
    if spec.get("cwd_on_path"):
        sys.path.insert(0, spec["cwd_on_path"])
    code = 0
    try:
        plugins: list[object] = []
        if spec["probe"]:
            harness = _probe(spec, channel)
            if harness is None:
                channel.emit(ChildExit(0))
                os._exit(0)
            plugins.append(_ProbedHarness(spec["driver"], spec["options"], harness))
        import pytest

        from .events import EventPlugin

        stop_path = spec.get("stop_path")
        plugin = EventPlugin(
            channel.emit,
            tuple(spec["trusted"]),
            _commands(commands),
            stop_requested=(lambda: os.path.exists(stop_path)) if stop_path else (lambda: False),
        )
        code = int(pytest.main(spec["pytest_args"], plugins=[plugin, *plugins]))
    except BaseException as error:  # report, then leave: the parent decides what it means
        with contextlib.suppress(BaseException):
            channel.emit(ChildError(one_line(describe_exception(error))))
        code = 70
    with contextlib.suppress(BaseException):
        channel.emit(ChildExit(code))
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
