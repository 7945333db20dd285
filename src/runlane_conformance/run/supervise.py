"""The supervisor: runs checks in child processes and keeps the verdict in this one.

Each child (``run.child``) probes or collects, then runs the checks this process
hands it one at a time and streams their start and end back. Because the parent
knows at every moment which check each child is running, any abnormal end is
pinned on that check:

* the child exits (any status, 0 included) or dies of a signal: the check in
  flight fails with "the driver process exited with status N during `id`";
* the check runs past its deadline: the parent asks the child for every
  thread's stack (SIGUSR1, answered by ``faulthandler`` even from C code),
  waits briefly, kills the child's whole process group, and records the check
  as *inconclusive* (a deadline guards against hangs; it is not evidence about
  the driver) with "timed out after N s" and the stack (or "no stack available");
* checks handed to a dead child but not started go back to the queue, and a
  fresh child takes over; a crashed worker's check is a failure, never a gap.

A child's stdout and stderr come through one pipe that this process reads as the
output arrives, keeping only its head and tail (``capped``): whatever a driver
prints, the parent's memory stays bounded and nothing is spooled to disk.

``--workers N`` is the same loop with N children. Ctrl-C kills every child's
process group within a second and returns what was established, marked
interrupted. ``--maxfail N`` stops handing out checks once N have failed: the
checks in flight finish, no child starts another (each asks for a stop file
before every check), the sessions end normally, and the outcome says stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..contract.errors import RunlaneError
from ..contract.values import StorageLimits, StorageProfile
from ..fixtures.gating import ProfileFacts
from ..harness import DriverLoadError
from ..protocol.client import CPU_SLOT_VARIABLE
from .capped import CappedOutput
from .child import COMMANDS_FD_VARIABLE, EVENTS_FD_VARIABLE
from .environment import closed_process_environment
from .model import INCONCLUSIVE_HINT, CheckResult, Outcome, RunBrokenError
from .plan import PlannedCheck, deadline_for, planned_from_event
from .raw import RawCheck
from .reaper import is_subreaper, reap_adopted
from .scaling import IDLE_SHARE_TO_GROW, WINDOW_SECONDS, IdleMeter

__all__ = ["ChildSpec", "Supervisor", "SupervisorOutcome"]

#: How long a child that was asked for its stack gets to write it before it is killed.
STACK_GRACE_SECONDS = 2.0
#: How long a child may take to load the driver, probe it and collect the suites.
STARTUP_SECONDS = 120.0
#: How long the driver's session cleanup may take after the last check.
CLEANUP_SECONDS = 60.0
#: Children that die before running a single check, in a row, before the run gives up on the rest.
MAX_STARTUP_DEATHS = 3
#: Most checks handed to one child at a time: their command lines must fit in the pipe's buffer,
#: or a write to a child busy with a check could block this process.
MAX_HANDED_OUT = 64
#: Longest event line a child may send; anything longer is not ours and is dropped unread.
MAX_EVENT_LINE = 16 * 1024 * 1024
#: Most of a stack file read for one check (faulthandler's dump of every thread is far smaller).
MAX_STACK_BYTES = 1024 * 1024
#: Reads of a child's output per wake-up (64 KiB each), so a flood cannot starve the event pipes.
OUTPUT_READS_PER_WAKE = 16
#: Reads of a dead child's output before it is closed (a daemon it left may hold the pipe open).
OUTPUT_READS_AFTER_DEATH = 256
#: Fresh children started after crashes, in all, before the remaining checks are given up as not run.
MAX_RESPAWNS = 100


@dataclass(frozen=True)
class ChildSpec:
    """What every child is told (written to a JSON file it reads at start)."""

    driver: str
    options: Mapping[str, str]
    pytest_args: Sequence[str]
    trusted: Sequence[str]
    cwd_on_path: str | None


@dataclass
class SupervisorOutcome:
    """What the supervised run established, before requirement folding."""

    facts: ProfileFacts
    collected: tuple[PlannedCheck, ...]
    checks: dict[str, CheckResult]
    problems: list[str]
    plugins: list[tuple[str, str]]
    interrupted: bool
    output: str
    stopped: bool = False
    #: The most children that ran at once (``--workers auto`` may add some on the way).
    peak_workers: int = 1


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    events: BinaryIO
    commands: BinaryIO
    stack_path: Path
    output_stream: BinaryIO
    probe: bool
    output: CappedOutput = field(default_factory=CappedOutput)
    output_open: bool = True
    buffer: bytearray = field(default_factory=bytearray)
    skipping_line: bool = False
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


def _signal_name(number: int) -> str:
    with contextlib.suppress(ValueError):
        return signal.Signals(number).name
    return f"signal {number}"


def _how_it_ended(returncode: int | None) -> str:
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        return f"was killed by {_signal_name(-returncode)}"
    return f"exited with status {returncode}"


def _profile_from_json(data: Mapping[str, Any]) -> StorageProfile:
    return StorageProfile(
        durability=data["durability"],
        clock_authority=data["clock_authority"],
        index_consistency=data["index_consistency"],
        limits=StorageLimits(**data["limits"]),
        exclusive_candidates=bool(data["exclusive_candidates"]),
        append=bool(data["append"]),
    )


class Supervisor:
    """Runs one certification in ``workers`` supervised children; see the module docstring."""

    def __init__(
        self,
        spec: ChildSpec,
        *,
        workers: int,
        check_timeout: float,
        explicit_timeout: bool = False,
        max_failures: int | None = None,
        on_plan: Callable[[ProfileFacts, tuple[PlannedCheck, ...]], Sequence[PlannedCheck]],
        on_start: Callable[[PlannedCheck], None],
        on_end: Callable[[RawCheck | CheckResult], CheckResult],
        on_shrinking: Callable[[PlannedCheck], None] = lambda check: None,
        grow_to: int | None = None,
    ) -> None:
        self._spec = spec
        self._workers_wanted = workers
        # --workers auto: more children while the machine's processors sit idle (run.scaling).
        self._grow_to = grow_to if grow_to is not None and grow_to > workers else None
        self._idle = IdleMeter() if self._grow_to is not None else None
        self._next_growth = 0.0
        self._peak = workers
        self._timeout = check_timeout
        self._explicit_timeout = explicit_timeout
        self._on_plan = on_plan
        self._on_start = on_start
        self._on_end = on_end
        self._on_shrinking = on_shrinking
        self._max_failures = max_failures
        self._failures = 0
        self._stopping = False
        self._directory = Path(tempfile.mkdtemp(prefix="runlane-run-"))
        self._stop_path = self._directory / "stop"
        self._selector = selectors.DefaultSelector()
        self._workers: list[_Worker] = []
        self._spawned = 0
        self._respawns = 0
        self._startup_deaths = 0
        self._queue: deque[str] = deque()
        self._planned: dict[str, PlannedCheck] = {}
        self._facts: ProfileFacts | None = None
        self._collected: tuple[PlannedCheck, ...] | None = None
        self._checks: dict[str, CheckResult] = {}
        self._problems: list[str] = []
        self._plugins: list[tuple[str, str]] = []
        self._outputs: list[str] = []
        # As the subreaper (the CLI's own process), orphans the driver leaves are ours to reap.
        self._reaping = is_subreaper()
        self._rejected = 0

    # --- children -------------------------------------------------------------------------------
    def _spawn(self, probe: bool) -> _Worker:
        index = self._spawned
        self._spawned += 1
        spec_path = self._directory / f"child-{index}.json"
        stack_path = self._directory / f"child-{index}.stack"
        spec = {
            "driver": self._spec.driver,
            "options": dict(self._spec.options),
            "pytest_args": list(self._spec.pytest_args),
            "trusted": list(self._spec.trusted),
            "cwd_on_path": self._spec.cwd_on_path,
            "probe": probe,
            "stack_path": str(stack_path),
            "stop_path": str(self._stop_path),
        }
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        stack_path.touch()
        events_read, events_write = os.pipe()
        commands_read, commands_write = os.pipe()
        output_read, output_write = os.pipe()
        env = closed_process_environment()
        slot = 0
        if self._workers_wanted > 1:
            # Spread over the CPUs: a backend the child starts runs on the CPU its slot names.
            used = {worker.slot for worker in self._workers if not worker.dead}
            free = sorted(set(range(self._workers_wanted)) - used)
            slot = free[0] if free else index % self._workers_wanted
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
        worker = _Worker(
            index=index,
            process=process,
            events=os.fdopen(events_read, "rb", buffering=0),
            commands=os.fdopen(commands_write, "wb", buffering=0),
            stack_path=stack_path,
            output_stream=os.fdopen(output_read, "rb", buffering=0),
            probe=probe,
            slot=slot,
        )
        self._selector.register(worker.events, selectors.EVENT_READ, worker)
        self._selector.register(worker.output_stream, selectors.EVENT_READ, worker)
        self._workers.append(worker)
        return worker

    def _send(self, worker: _Worker, message: dict[str, Any]) -> None:
        rest = memoryview((json.dumps(message) + "\n").encode())
        with contextlib.suppress(OSError):
            while rest:  # unbuffered: a signal can cut one write short, and the rest must follow
                rest = rest[worker.commands.write(rest) :]

    def _kill(self, worker: _Worker) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            worker.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=5)

    def _close(self, worker: _Worker) -> None:
        if worker.dead:
            return
        worker.dead = True
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(worker.events)
        self._read_output(worker, OUTPUT_READS_AFTER_DEATH)
        self._close_output(worker)
        for stream in (worker.events, worker.commands):
            with contextlib.suppress(OSError):
                stream.close()
        text = worker.output.text()
        if text.strip():
            self._outputs.append(text)

    def _read_output(self, worker: _Worker, reads: int = OUTPUT_READS_PER_WAKE) -> None:
        """Take what the child printed so far into its capped buffer (never more than ``reads`` reads)."""
        for _ in range(reads):
            if not worker.output_open:
                return
            try:
                chunk = worker.output_stream.read(65536)
            except BlockingIOError:
                return
            except (OSError, ValueError):
                chunk = b""
            if chunk is None:
                return
            if not chunk:
                self._close_output(worker)
                return
            worker.output.feed(chunk)

    def _close_output(self, worker: _Worker) -> None:
        if not worker.output_open:
            return
        worker.output_open = False
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(worker.output_stream)
        with contextlib.suppress(OSError):
            worker.output_stream.close()

    def _stack_since(self, worker: _Worker) -> str | None:
        with contextlib.suppress(OSError):
            with open(worker.stack_path, encoding="utf-8", errors="replace") as stream:
                stream.seek(worker.stack_offset)
                text = stream.read(MAX_STACK_BYTES).strip()
            return text or None
        return None

    # --- results and stopping early --------------------------------------------------------------
    def _record(self, nodeid: str, result: RawCheck | CheckResult) -> None:
        """Judge and keep one check's result; stop the run once ``max_failures`` checks failed."""
        judged = self._on_end(result)
        self._checks[nodeid] = judged
        if judged.outcome is not Outcome.NOT_RUN and judged.failed:
            self._failures += 1
            if self._max_failures is not None and self._failures >= self._max_failures:
                self._stop()

    def _stop(self) -> None:
        """No further check starts anywhere: the queue is dropped, every child finds the stop file
        before its next check and ends its session normally; checks in flight still finish."""
        if self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            self._stop_path.touch()
        self._queue.clear()
        for worker in self._workers:
            if not worker.dead and not worker.stopped:
                worker.stopped = True
                self._send(worker, {"op": "stop"})

    # --- dispatch -------------------------------------------------------------------------------
    def _feed(self, worker: _Worker) -> None:
        """Hand a ready worker its next checks, then ``stop`` once the queue is empty.

        A worker always holds at least two checks (the second tells pytest what
        comes next, so fixtures are torn down at the right time); a lone worker
        holds up to ``MAX_HANDED_OUT``. Checks a dead worker had not started go
        back to the queue.
        """
        if not worker.ready or worker.stopped or worker.dead:
            return
        # Serial: hand out a pipe-full at a time, so the child never waits for us between checks.
        # Parallel: one check ahead only; a long check must not hold a batch hostage while the
        # other worker idles (a check's length is unknown until it ends).
        # With --maxfail, one ahead as well: a child then waits for our answer to each check's end
        # before it starts the next, so it never starts a check after the one that stopped the run.
        depth = (
            MAX_HANDED_OUT
            if self._workers_wanted == 1 and self._grow_to is None and self._max_failures is None
            else 2
        )
        while len(worker.assigned) < depth and self._queue:
            nodeid = self._queue.popleft()
            worker.assigned.append(nodeid)
            self._send(worker, {"op": "run", "nodeid": nodeid})
        # With --maxfail the end of the queue is announced only in answer to an end (the child then
        # holds just the check it will run next), so that answer comes after we judged that end.
        if not self._queue and (self._max_failures is None or len(worker.assigned) <= 1):
            worker.stopped = True
            self._send(worker, {"op": "stop"})

    def _reject(self, worker: _Worker, what: str) -> None:
        """An event the child that sent it had no business sending: a run problem, never evidence.

        Each child's events follow one order (probe, plugins and collection from the probe child
        only, once; then for each check handed to it a start and one end, for that check alone),
        so anything else was forged or reordered by something that can write into the pipe.
        """
        self._rejected += 1
        if self._rejected == 1:
            self._problems.append(
                f"a check process's event stream was tampered with ({what}); "
                "events outside the order the judge expects are never accepted as results"
            )

    def _overrule(self, nodeid: str) -> None:
        """Replace a check's recorded result with a failure: its events cannot be told from forgeries."""
        from .verdict import unfinished_check

        planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
        self._checks[nodeid] = self._on_end(
            unfinished_check(
                planned,
                f"two different ends were reported for `{self._label(nodeid)}`: "
                "its events were tampered with, so neither is evidence",
                outcome=Outcome.FAILED,
            )
        )

    def _handle(self, worker: _Worker, event: object) -> None:
        if not isinstance(event, dict):
            self._reject(worker, "an event that is not an object")
            return
        try:
            self._accept(worker, event)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            if isinstance(error, RunlaneError):
                raise
            self._reject(worker, f"a malformed {str(event.get('event'))[:40]!r} event")

    def _accept(self, worker: _Worker, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind in ("probe", "probe_error") and not worker.probe:
            self._reject(worker, f"a {kind} event from a child that is not the probe")
            return
        if kind in ("probe", "probe_error", "plugins", "collected", "ready"):
            if kind in worker.seen:
                self._reject(worker, f"a second {kind} event from one child")
                return
            worker.seen.add(str(kind))
        if kind == "probe":
            self._facts = ProfileFacts(
                profile=_profile_from_json(event["profile"]),
                operator_reads=bool(event["operator_reads"]),
                cross_process=bool(event["cross_process"]),
                faults=bool(event.get("faults", False)),
            )
        elif kind == "probe_error":
            raise DriverLoadError(str(event.get("message", "the driver could not be loaded")))
        elif kind == "plugins" and (worker.probe or not self._plugins):
            self._plugins = [(str(name), str(version)) for name, version in event["plugins"]]
        elif kind == "collect_error":
            raise RunBrokenError(f"collecting the suites failed: {event.get('message')}", self._output())
        elif kind == "collected":
            checks = tuple(planned_from_event(c) for c in event["checks"])
            if self._collected is None:
                if not checks:
                    raise RunBrokenError("no checks were collected for this run", self._output())
                self._collected = checks
            elif {c.nodeid for c in checks} != {c.nodeid for c in self._collected}:
                raise RunBrokenError("two child processes collected different checks", self._output())
        elif kind == "ready":
            worker.ready = True
        elif kind == "start":
            nodeid = str(event["nodeid"])
            if worker.in_flight is not None or nodeid not in worker.assigned:
                self._reject(worker, f"a start of `{nodeid[:200]}`, which this child was not about to run")
                return
            worker.in_flight = nodeid
            worker.started_at = time.monotonic()
            worker.ran_any = True
            self._startup_deaths = 0
            if nodeid in self._planned:
                self._on_start(self._planned[nodeid])
        elif kind == "shrinking":
            nodeid = str(event.get("nodeid"))
            if nodeid != worker.in_flight:
                self._reject(
                    worker, f"a shrinking notice for `{nodeid[:200]}`, which is not the check in flight"
                )
            elif nodeid in self._planned:
                self._on_shrinking(self._planned[nodeid])
        elif kind == "end":
            raw = RawCheck.from_json(event["check"])
            if raw.nodeid != worker.in_flight:
                self._reject(worker, f"an end of `{raw.nodeid[:200]}`, which is not the check in flight")
                if raw.nodeid == worker.last_ended:
                    # Two ends for one check: one of them was forged, and nothing says which.
                    self._overrule(raw.nodeid)
                return
            worker.in_flight = None
            worker.last_ended = raw.nodeid
            with contextlib.suppress(ValueError):
                worker.assigned.remove(raw.nodeid)
            if raw.nodeid not in self._checks:
                self._record(raw.nodeid, raw)
            self._feed(worker)
        elif kind == "session_done":
            worker.session_done = True
            worker.cleanup_since = time.monotonic()
        elif kind == "child_error":
            worker.child_error = str(event.get("message"))
        elif kind == "exit":
            worker.exit_event = int(event.get("code", 0))

    def _read(self, worker: _Worker) -> None:
        try:
            chunk = worker.events.read(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            for line in self._lines(worker, chunk):
                if line.strip():
                    try:
                        event = json.loads(line)
                    except ValueError:
                        self._reject(worker, "a line that is not JSON")
                        continue
                    self._handle(worker, event)

    @staticmethod
    def _lines(worker: _Worker, chunk: bytes) -> list[bytes]:
        """The complete event lines ``chunk`` finishes; a line past ``MAX_EVENT_LINE`` is dropped."""
        lines: list[bytes] = []
        while chunk:
            end = chunk.find(b"\n")
            if end < 0:
                if not worker.skipping_line:
                    worker.buffer += chunk
                    if len(worker.buffer) > MAX_EVENT_LINE:
                        worker.buffer, worker.skipping_line = bytearray(), True
                return lines
            if not worker.skipping_line:
                lines.append(bytes(worker.buffer) + chunk[:end])
            worker.buffer, worker.skipping_line = bytearray(), False
            chunk = chunk[end + 1 :]
        return lines

    def _drain(self, worker: _Worker) -> None:
        """Handle every event still in the pipe of a child that ended (a last line may lack its newline)."""
        lines: list[bytes] = []
        for _ in range(1000):
            try:
                chunk = worker.events.read(65536)
            except (BlockingIOError, OSError, ValueError):
                chunk = None
            if not chunk:
                break
            lines += self._lines(worker, chunk)
        lines += self._lines(worker, b"\n")
        for line in lines:
            if line.strip():
                try:
                    event = json.loads(line)
                except ValueError:
                    self._reject(worker, "a line that is not JSON")
                    continue
                self._handle(worker, event)

    def _fail_in_flight(
        self,
        worker: _Worker,
        message: str,
        stack: str | None,
        duration: float,
        outcome: Outcome = Outcome.FAILED,
    ) -> None:
        nodeid = worker.in_flight
        if nodeid is None:
            return
        worker.in_flight = None
        with contextlib.suppress(ValueError):
            worker.assigned.remove(nodeid)
        planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
        from .verdict import unfinished_check

        self._record(
            nodeid, unfinished_check(planned, message, duration=duration, stack=stack, outcome=outcome)
        )

    def _after_death(self, worker: _Worker) -> None:
        """A child is gone: pin its end on the check in flight, requeue the rest, maybe replace it."""
        self._drain(worker)
        returncode = worker.process.poll()
        ended = _how_it_ended(returncode)
        if worker.in_flight is not None:
            stack = self._stack_since(worker)
            self._fail_in_flight(
                worker,
                f"the driver process {ended} during `{self._label(worker.in_flight)}`",
                stack,
                time.monotonic() - worker.started_at,
            )
        elif not worker.session_done and not worker.timed_out and (worker.ready or not worker.probe):
            # No check was running (a driver thread ended the process between checks, or a fresh
            # child died while loading the driver): nothing to pin it on, but it is not a clean run.
            self._problems.append(
                f"a driver process {ended} "
                + ("between checks" if worker.ran_any else "while loading the driver, before any check")
            )
        if worker.assigned and not self._stopping:
            self._queue.extendleft(reversed(worker.assigned))
        worker.assigned.clear()
        if worker.timed_out:
            pass  # killed by us at a deadline, perhaps just as it finished: not a cleanup failure
        elif worker.session_done and (worker.child_error or (worker.exit_event is None and returncode != 0)):
            detail = worker.child_error or ended
            self._problems.append(f"the driver's session cleanup failed: {detail}")
        elif worker.session_done and worker.exit_event is None and returncode == 0:
            self._problems.append("the driver's session cleanup ended the process before pytest finished")
        self._close(worker)
        if not worker.ran_any and not worker.session_done:
            self._startup_deaths += 1
        if worker.probe and (self._facts is None or self._collected is None):
            message = worker.child_error or f"the driver process {ended} while loading the driver"
            if self._facts is None:
                raise DriverLoadError(f"driver {self._spec.driver!r}: {message}")
            raise RunBrokenError(f"collecting the suites failed: {message}", self._output())

    def _deadline(self, nodeid: str) -> float:
        planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
        return deadline_for(planned, self._timeout, explicit=self._explicit_timeout)

    def _label(self, nodeid: str) -> str:
        planned = self._planned.get(nodeid)
        if planned is not None and planned.requirement_id:
            return planned.requirement_id
        return nodeid

    def _replace_workers(self) -> None:
        alive = [w for w in self._workers if not w.dead]
        while self._queue and len(alive) < self._workers_wanted:
            if self._startup_deaths >= MAX_STARTUP_DEATHS or self._respawns >= MAX_RESPAWNS:
                self._give_up(
                    f"did not run: the driver process died {self._respawns + 1} times"
                    if self._respawns >= MAX_RESPAWNS
                    else "did not run: fresh driver processes kept dying before running a check"
                )
                return
            self._respawns += 1
            alive.append(self._spawn(probe=False))

    def _maybe_grow(self, now: float) -> None:
        """Add a child when, over the last window, half the machine's processor time went unused.

        Only while checks are queued beyond what the children already hold, never while a child
        is still starting (its imports would hide the idle time it is about to use), and never
        past the ceiling ``auto`` set. See ``run.scaling``.
        """
        if self._grow_to is None or self._idle is None or self._stopping or now < self._next_growth:
            return
        self._next_growth = now + WINDOW_SECONDS
        idle = self._idle.idle_share()
        alive = [w for w in self._workers if not w.dead]
        if (
            idle is None
            or idle < IDLE_SHARE_TO_GROW
            or len(alive) != self._workers_wanted
            or len(alive) >= self._grow_to
            or len(self._queue) <= len(alive)
            or any(not w.ready for w in alive)
        ):
            return
        self._workers_wanted += 1
        self._spawn(probe=False)
        self._peak = max(self._peak, self._workers_wanted)

    def _give_up(self, message: str) -> None:
        from .verdict import unfinished_check

        while self._queue:
            nodeid = self._queue.popleft()
            planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
            self._checks[nodeid] = self._on_end(unfinished_check(planned, message, outcome=Outcome.NOT_RUN))

    def _time_out(self, worker: _Worker) -> None:
        nodeid = worker.in_flight
        assert nodeid is not None
        elapsed = time.monotonic() - worker.started_at
        with contextlib.suppress(OSError):
            worker.stack_offset = worker.stack_path.stat().st_size
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.process.pid, signal.SIGUSR1)
        deadline = time.monotonic() + STACK_GRACE_SECONDS
        last_size, stable_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            with contextlib.suppress(OSError):
                size = worker.stack_path.stat().st_size
                if size != last_size:
                    last_size, stable_since = size, time.monotonic()
                elif size > worker.stack_offset and time.monotonic() - stable_since > 0.2:
                    break
        stack = self._stack_since(worker) or "no stack available (the process did not answer SIGUSR1)"
        worker.timed_out = True
        self._kill(worker)
        self._drain(worker)
        if worker.in_flight == nodeid:
            # A deadline is a guard against hangs, not a measure of the driver: a check stopped by it
            # found nothing either way, so it is inconclusive, never failed (and never certified).
            self._fail_in_flight(
                worker,
                f"timed out after {self._deadline(nodeid):g} s in `{self._label(nodeid)}`: inconclusive, "
                + INCONCLUSIVE_HINT,
                stack,
                elapsed,
                outcome=Outcome.INCONCLUSIVE,
            )
        self._after_death(worker)

    # --- the loop -------------------------------------------------------------------------------
    def _output(self) -> str:
        texts = list(self._outputs)
        for worker in self._workers:
            if not worker.dead:
                self._read_output(worker)
                texts.append(worker.output.text())
        return "\n".join(texts)

    def run(self) -> SupervisorOutcome:
        interrupted = False
        try:
            self._spawn(probe=True)
            for _ in range(1, self._workers_wanted):
                self._spawn(probe=False)
            self._loop()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            for worker in self._workers:
                if not worker.dead:
                    if interrupted or worker.process.poll() is None:
                        self._kill(worker)
                    self._close(worker)
            self._selector.close()
            shutil.rmtree(self._directory, ignore_errors=True)
        if interrupted:
            if self._facts is None or self._collected is None:
                raise KeyboardInterrupt
            for worker in self._workers:
                if worker.in_flight is not None:
                    self._fail_interrupted(worker)
        if self._facts is None or self._collected is None:
            raise RunBrokenError("the run ended before the suites were collected", self._output())
        return SupervisorOutcome(
            facts=self._facts,
            collected=self._collected,
            checks=self._checks,
            problems=self._problems,
            plugins=self._plugins,
            interrupted=interrupted,
            output=self._output(),
            stopped=self._stopping,
            peak_workers=self._peak,
        )

    def _fail_interrupted(self, worker: _Worker) -> None:
        from .verdict import unfinished_check

        nodeid = worker.in_flight
        assert nodeid is not None
        planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
        self._checks[nodeid] = self._on_end(
            unfinished_check(planned, "interrupted while running", outcome=Outcome.NOT_RUN)
        )

    def _startup_deadline_passed(self, worker: _Worker) -> bool:
        return not worker.ready and time.monotonic() - worker.spawned_at > STARTUP_SECONDS

    def _loop(self) -> None:
        planned = False
        while True:
            for key, _ in self._selector.select(timeout=0.1):
                worker = key.data
                assert isinstance(worker, _Worker)
                if key.fileobj is worker.output_stream:
                    self._read_output(worker)
                else:
                    self._read(worker)
            if not planned and self._facts is not None and self._collected is not None:
                planned = True
                order = self._on_plan(self._facts, self._collected)
                self._planned = {check.nodeid: check for check in self._collected}
                self._queue.extend(check.nodeid for check in order)
            now = time.monotonic()
            for worker in list(self._workers):
                if worker.dead:
                    continue
                if planned:
                    self._feed(worker)
                if worker.in_flight is not None and now - worker.started_at > self._deadline(
                    worker.in_flight
                ):
                    self._time_out(worker)
                elif worker.process.poll() is not None:
                    self._after_death(worker)
                elif self._startup_deadline_passed(worker) and worker.in_flight is None:
                    self._kill(worker)
                    worker.child_error = f"did not load and collect within {STARTUP_SECONDS:g} s"
                    self._after_death(worker)
                elif worker.cleanup_since is not None and now - worker.cleanup_since > CLEANUP_SECONDS:
                    self._problems.append(
                        f"the driver's session cleanup did not finish within {CLEANUP_SECONDS:g} s"
                    )
                    self._kill(worker)
                    worker.cleanup_since = None
                    self._close(worker)
            if self._reaping:
                reap_adopted({w.process.pid for w in self._workers if w.process.returncode is None})
            if planned:
                self._maybe_grow(now)
                self._replace_workers()
                alive = [w for w in self._workers if not w.dead]
                if not alive and not self._queue:
                    return
