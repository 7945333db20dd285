"""One supervised child process: starting it, talking to it, reading it, and ending it.

A ``Child`` is the supervisor's handle on one ``run.child`` process: its three pipes (events in,
commands out, everything it prints in), the checks handed to it, the one in flight, and what it has
said so far. Nothing here decides what an event means (``run.supervise`` does); this module only
moves bytes and signals, within the bounds a hostile driver cannot stretch: output is kept capped
(``capped``), a stack file is read up to ``MAX_STACK_BYTES``, and a write of a command never blocks.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..protocol.client import CPU_SLOT_VARIABLE
from .capped import CappedOutput
from .child import COMMANDS_FD_VARIABLE, EVENTS_FD_VARIABLE
from .child_events import EventLines
from .environment import closed_process_environment

__all__ = [
    "MAX_STACK_BYTES",
    "OUTPUT_READS_AFTER_DEATH",
    "OUTPUT_READS_PER_WAKE",
    "Child",
    "ChildSpec",
    "how_it_ended",
    "spawn_child",
]

#: Most of a stack file read for one check (faulthandler's dump of every thread is far smaller).
MAX_STACK_BYTES = 1024 * 1024
#: Reads of a child's output per wake-up (64 KiB each), so a flood cannot starve the event pipes.
OUTPUT_READS_PER_WAKE = 16
#: Reads of a dead child's output before it is closed (a daemon it left may hold the pipe open).
OUTPUT_READS_AFTER_DEATH = 256


@dataclass(frozen=True)
class ChildSpec:
    """What every child is told (written to a JSON file it reads at start)."""

    driver: str
    options: Mapping[str, str]
    pytest_args: Sequence[str]
    trusted: Sequence[str]
    cwd_on_path: str | None


@dataclass
class Child:
    """The supervisor's handle on one child process and what it knows of it."""

    index: int
    process: subprocess.Popen[bytes]
    events: BinaryIO
    commands: BinaryIO
    stack_path: Path
    output_stream: BinaryIO
    probe: bool
    output: CappedOutput = field(default_factory=CappedOutput)
    output_open: bool = True
    lines: EventLines = field(default_factory=EventLines)
    assigned: deque[str] = field(default_factory=deque)
    in_flight: str | None = None
    started_at: float = 0.0
    # A child writes stacks only when it dies of a fatal signal or when we ask (SIGUSR1, after moving
    # this offset), so everything past the offset belongs to the check that was in flight.
    stack_offset: int = 0
    ready: bool = False
    stopped: bool = False
    session_done: bool = False
    exit_event: int | None = None
    child_error: str | None = None
    ran_any: bool = False
    spawned_at: float = field(default_factory=time.monotonic)
    cleanup_since: float | None = None
    #: With several workers, which one this is (0 .. workers - 1, a replacement takes its predecessor's).
    slot: int = 0
    dead: bool = False
    timed_out: bool = False
    #: The check whose end this child reported last (a second end for it is a forgery).
    last_ended: str | None = None
    #: The one-time events (probe, plugins, collected) this child already sent.
    seen: set[str] = field(default_factory=set)

    def send(self, message: dict[str, Any]) -> None:
        """Write one command line; a child that is gone is not an error here (its death is seen)."""
        rest = memoryview((json.dumps(message) + "\n").encode())
        with contextlib.suppress(OSError):
            while rest:  # unbuffered: a signal can cut one write short, and the rest must follow
                rest = rest[self.commands.write(rest) :]

    def kill(self) -> None:
        """Kill the child's whole process group (and the child), and wait for it briefly."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def read_output(self, selector: selectors.BaseSelector, reads: int = OUTPUT_READS_PER_WAKE) -> None:
        """Take what the child printed so far into its capped buffer (never more than ``reads`` reads)."""
        for _ in range(reads):
            if not self.output_open:
                return
            try:
                chunk = self.output_stream.read(65536)
            except BlockingIOError:
                return
            except (OSError, ValueError):
                chunk = b""
            if chunk is None:
                return
            if not chunk:
                self.close_output(selector)
                return
            self.output.feed(chunk)

    def close_output(self, selector: selectors.BaseSelector) -> None:
        """Stop reading the child's output (it ended, or the child is being closed)."""
        if not self.output_open:
            return
        self.output_open = False
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(self.output_stream)
        with contextlib.suppress(OSError):
            self.output_stream.close()

    def read_events(self) -> list[bytes] | None:
        """The event lines one read completes; ``None`` when there was nothing to read yet."""
        try:
            chunk = self.events.read(65536)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        return self.lines.feed(chunk) if chunk else []

    def drain_events(self) -> list[bytes]:
        """Every event line still in the pipe of a child that ended (a last line may lack its newline)."""
        lines: list[bytes] = []
        for _ in range(1000):
            try:
                chunk = self.events.read(65536)
            except (BlockingIOError, OSError, ValueError):
                chunk = None
            if not chunk:
                break
            lines += self.lines.feed(chunk)
        return lines + self.lines.feed(b"\n")

    def stack_since(self) -> str | None:
        """What the child wrote to its stack file past ``stack_offset`` (``None`` if nothing)."""
        with contextlib.suppress(OSError):
            with open(self.stack_path, encoding="utf-8", errors="replace") as stream:
                stream.seek(self.stack_offset)
                text = stream.read(MAX_STACK_BYTES).strip()
            return text or None
        return None


def _signal_name(number: int) -> str:
    with contextlib.suppress(ValueError):
        return signal.Signals(number).name
    return f"signal {number}"


def how_it_ended(returncode: int | None) -> str:
    """A child's end in words: ``exited with status N``, ``was killed by SIGKILL`` ..."""
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        return f"was killed by {_signal_name(-returncode)}"
    return f"exited with status {returncode}"


def spawn_child(
    spec: ChildSpec, *, index: int, probe: bool, directory: Path, stop_path: Path, slot: int | None
) -> Child:
    """Start child ``index`` (the probe child if ``probe``) in a session of its own.

    ``slot`` (with several workers) is exported so a backend the child starts runs on the CPU it
    names; ``None`` exports nothing. The child's spec and stack file live in ``directory``.
    """
    spec_path = directory / f"child-{index}.json"
    stack_path = directory / f"child-{index}.stack"
    document = {
        "driver": spec.driver,
        "options": dict(spec.options),
        "pytest_args": list(spec.pytest_args),
        "trusted": list(spec.trusted),
        "cwd_on_path": spec.cwd_on_path,
        "probe": probe,
        "stack_path": str(stack_path),
        "stop_path": str(stop_path),
    }
    spec_path.write_text(json.dumps(document), encoding="utf-8")
    stack_path.touch()
    events_read, events_write = os.pipe()
    commands_read, commands_write = os.pipe()
    output_read, output_write = os.pipe()
    env = closed_process_environment()
    if slot is not None:
        env[CPU_SLOT_VARIABLE] = str(slot)
    env[EVENTS_FD_VARIABLE] = str(events_write)
    env[COMMANDS_FD_VARIABLE] = str(commands_read)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "runlane_conformance.run.child", str(spec_path)],
            stdin=subprocess.DEVNULL,
            stdout=output_write,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(events_write, commands_read),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        for fd in (events_write, commands_read, output_write):
            os.close(fd)
    os.set_blocking(events_read, False)
    os.set_blocking(output_read, False)
    return Child(
        index=index,
        process=process,
        events=os.fdopen(events_read, "rb", buffering=0),
        commands=os.fdopen(commands_write, "wb", buffering=0),
        stack_path=stack_path,
        output_stream=os.fdopen(output_read, "rb", buffering=0),
        probe=probe,
        slot=slot or 0,
    )
