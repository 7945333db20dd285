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

The parts are apart, as pytest-xdist keeps them: the events a child sends, typed and documented
(``run.child_events``); the child processes themselves (``run.children``); how checks are handed
out and when ``auto`` adds a child (``run.scheduling``); and here, the dispatch loop, with one
handler per kind of event.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract.errors import RunlaneError
from ..fixtures.gating import ProfileFacts
from ..harness import DriverLoadError
from .child_events import (
    MAX_EVENT_LINE,
    ONE_TIME_KINDS,
    PROBE_KINDS,
    CheckEnd,
    CheckShrinking,
    CheckStart,
    ChildError,
    ChildEvent,
    ChildExit,
    Collected,
    CollectError,
    Plugins,
    Probe,
    ProbeError,
    Ready,
    SessionDone,
    decode,
)
from .children import (
    OUTPUT_READS_AFTER_DEATH,
    Child,
    ChildSpec,
    how_it_ended,
    spawn_child,
)
from .model import INCONCLUSIVE_HINT, CheckResult, Outcome, RunBrokenError
from .plan import EXCLUSIVE_AREAS, PlannedCheck, deadline_for
from .raw import RawCheck
from .reaper import is_subreaper, reap_adopted
from .scheduling import MAX_HANDED_OUT, GrowWhenIdle, HandOut, policy_for
from .verdict import unfinished_check

__all__ = ["MAX_EVENT_LINE", "MAX_HANDED_OUT", "ChildSpec", "Supervisor", "SupervisorOutcome"]

#: How long a child that was asked for its stack gets to write it before it is killed.
STACK_GRACE_SECONDS = 2.0
#: How long a child may take to load the driver, probe it and collect the suites.
STARTUP_SECONDS = 120.0
#: How long the driver's session cleanup may take after the last check.
CLEANUP_SECONDS = 60.0
#: Children that die before running a single check, in a row, before the run gives up on the rest.
MAX_STARTUP_DEATHS = 3
#: Fresh children started after crashes, in all, before the remaining checks are given up as not run.
MAX_RESPAWNS = 100


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
        self._growth = GrowWhenIdle(grow_to) if grow_to is not None and grow_to > workers else None
        self._hand_out: HandOut = policy_for(
            workers, growing=self._growth is not None, max_failures=max_failures
        )
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
        self._workers: list[Child] = []
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
        #: One handler per kind of child event (``run.child_events``).
        self._handlers: dict[type[Any], Callable[[Child, Any], None]] = {
            Probe: self._on_probe,
            ProbeError: self._on_probe_error,
            Plugins: self._on_plugins,
            CollectError: self._on_collect_error,
            Collected: self._on_collected,
            Ready: self._on_ready,
            CheckStart: self._on_check_start,
            CheckShrinking: self._on_check_shrinking,
            CheckEnd: self._on_check_end,
            SessionDone: self._on_session_done,
            ChildError: self._on_child_error,
            ChildExit: self._on_child_exit,
        }

    # --- children -------------------------------------------------------------------------------
    def _spawn(self, probe: bool) -> Child:
        index = self._spawned
        self._spawned += 1
        slot = None
        if self._workers_wanted > 1:
            # Spread over the CPUs: a backend the child starts runs on the CPU its slot names.
            used = {worker.slot for worker in self._workers if not worker.dead}
            free = sorted(set(range(self._workers_wanted)) - used)
            slot = free[0] if free else index % self._workers_wanted
        worker = spawn_child(
            self._spec,
            index=index,
            probe=probe,
            directory=self._directory,
            stop_path=self._stop_path,
            slot=slot,
        )
        self._selector.register(worker.events, selectors.EVENT_READ, worker)
        self._selector.register(worker.output_stream, selectors.EVENT_READ, worker)
        self._workers.append(worker)
        return worker

    def _close(self, worker: Child) -> None:
        if worker.dead:
            return
        worker.dead = True
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(worker.events)
        worker.read_output(self._selector, OUTPUT_READS_AFTER_DEATH)
        worker.close_output(self._selector)
        for stream in (worker.events, worker.commands):
            with contextlib.suppress(OSError):
                stream.close()
        text = worker.output.text()
        if text.strip():
            self._outputs.append(text)

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
                worker.send({"op": "stop"})

    # --- dispatch -------------------------------------------------------------------------------
    def _feed(self, worker: Child) -> None:
        """Hand a ready worker its next checks (as many as the hand-out policy lets it hold), then
        ``stop`` once the queue is empty and the policy allows it. Checks a dead worker had not
        started go back to the queue (``_after_death``)."""
        if not worker.ready or worker.stopped or worker.dead:
            return
        depth = self._hand_out.depth()
        while len(worker.assigned) < depth and self._queue:
            if self._exclusive(self._queue[0]) and not self._alone(worker):
                # An exclusive check waits until it would run with nothing else anywhere. A child
                # holding an ordinary check cannot start it before it learns what comes next, so it
                # is told to stop: it runs what it holds and ends, and the exclusive checks go to a
                # child that is alone (a replacement is started while the queue is not empty).
                if worker.assigned and not any(self._exclusive(nodeid) for nodeid in worker.assigned):
                    worker.stopped = True
                    worker.send({"op": "stop"})
                return
            nodeid = self._queue.popleft()
            worker.assigned.append(nodeid)
            worker.send({"op": "run", "nodeid": nodeid})
        if not self._queue and self._hand_out.may_announce_end(len(worker.assigned)):
            worker.stopped = True
            worker.send({"op": "stop"})

    def _exclusive(self, nodeid: str) -> bool:
        planned = self._planned.get(nodeid)
        return planned is not None and planned.area in EXCLUSIVE_AREAS

    def _alone(self, worker: Child) -> bool:
        """Whether no other child holds a check (one told to stop may still be running its last)."""
        return not any(other.assigned for other in self._workers if other is not worker and not other.dead)

    def _reject(self, worker: Child, what: str) -> None:
        """An event the child that sent it had no business sending: a run problem, never evidence.

        Each child's events follow one order (``run.child_events``), so anything else was forged or
        reordered by something that can write into the pipe.
        """
        self._rejected += 1
        if self._rejected == 1:
            self._problems.append(
                f"a check process's event stream was tampered with ({what}); "
                "events outside the order the judge expects are never accepted as results"
            )

    def _overrule(self, nodeid: str) -> None:
        """Replace a check's recorded result with a failure: its events cannot be told from forgeries."""
        planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
        self._checks[nodeid] = self._on_end(
            unfinished_check(
                planned,
                f"two different ends were reported for `{self._label(nodeid)}`: "
                "its events were tampered with, so neither is evidence",
                outcome=Outcome.FAILED,
            )
        )

    def receive(self, worker: Child, line: bytes) -> None:
        """Take one event line from ``worker``: decode it and dispatch it to its kind's handler.

        Anything out of order or malformed is rejected (a run problem), never believed.
        """
        if not line.strip():
            return
        try:
            event = json.loads(line)
        except ValueError:
            self._reject(worker, "a line that is not JSON")
            return
        self._handle(worker, event)

    def _handle(self, worker: Child, event: object) -> None:
        if not isinstance(event, dict):
            self._reject(worker, "an event that is not an object")
            return
        kind = event.get("event")
        if kind in PROBE_KINDS and not worker.probe:
            self._reject(worker, f"a {kind} event from a child that is not the probe")
            return
        if kind in ONE_TIME_KINDS:
            if kind in worker.seen:
                self._reject(worker, f"a second {kind} event from one child")
                return
            worker.seen.add(str(kind))
        try:
            decoded = decode(event)
            if decoded is not None:
                self._dispatch(worker, decoded)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            if isinstance(error, RunlaneError):
                raise
            self._reject(worker, f"a malformed {str(kind)[:40]!r} event")

    def _dispatch(self, worker: Child, event: ChildEvent) -> None:
        """Hand ``event`` to the one handler for its kind."""
        self._handlers[type(event)](worker, event)

    def _on_probe(self, worker: Child, event: Probe) -> None:
        self._facts = event.facts

    def _on_probe_error(self, worker: Child, event: ProbeError) -> None:
        raise DriverLoadError(event.message)

    def _on_plugins(self, worker: Child, event: Plugins) -> None:
        if worker.probe or not self._plugins:
            self._plugins = list(event.plugins)

    def _on_collect_error(self, worker: Child, event: CollectError) -> None:
        raise RunBrokenError(f"collecting the suites failed: {event.message}", self._output())

    def _on_collected(self, worker: Child, event: Collected) -> None:
        if self._collected is None:
            if not event.checks:
                raise RunBrokenError("no checks were collected for this run", self._output())
            self._collected = event.checks
        elif {c.nodeid for c in event.checks} != {c.nodeid for c in self._collected}:
            raise RunBrokenError("two child processes collected different checks", self._output())

    def _on_ready(self, worker: Child, event: Ready) -> None:
        worker.ready = True

    def _on_check_start(self, worker: Child, event: CheckStart) -> None:
        nodeid = event.nodeid
        if worker.in_flight is not None or nodeid not in worker.assigned:
            self._reject(worker, f"a start of `{nodeid[:200]}`, which this child was not about to run")
            return
        worker.in_flight = nodeid
        worker.started_at = time.monotonic()
        worker.ran_any = True
        self._startup_deaths = 0
        if nodeid in self._planned:
            self._on_start(self._planned[nodeid])

    def _on_check_shrinking(self, worker: Child, event: CheckShrinking) -> None:
        nodeid = event.nodeid
        if nodeid != worker.in_flight:
            self._reject(worker, f"a shrinking notice for `{nodeid[:200]}`, which is not the check in flight")
        elif nodeid in self._planned:
            self._on_shrinking(self._planned[nodeid])

    def _on_check_end(self, worker: Child, event: CheckEnd) -> None:
        raw = event.check
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

    def _on_session_done(self, worker: Child, event: SessionDone) -> None:
        worker.session_done = True
        worker.cleanup_since = time.monotonic()

    def _on_child_error(self, worker: Child, event: ChildError) -> None:
        worker.child_error = event.message

    def _on_child_exit(self, worker: Child, event: ChildExit) -> None:
        worker.exit_event = event.code

    def _read(self, worker: Child) -> None:
        for line in worker.read_events() or ():
            self.receive(worker, line)

    def _drain(self, worker: Child) -> None:
        """Handle every event still in the pipe of a child that ended."""
        for line in worker.drain_events():
            self.receive(worker, line)

    def _fail_in_flight(
        self,
        worker: Child,
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
        self._record(
            nodeid, unfinished_check(planned, message, duration=duration, stack=stack, outcome=outcome)
        )

    def _after_death(self, worker: Child) -> None:
        """A child is gone: pin its end on the check in flight, requeue the rest, maybe replace it."""
        self._drain(worker)
        returncode = worker.process.poll()
        ended = how_it_ended(returncode)
        if worker.in_flight is not None:
            stack = worker.stack_since()
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
        """Add a child when the growth policy says the machine's processors sit idle (``auto``)."""
        if self._growth is None:
            return
        alive = [w for w in self._workers if not w.dead]
        if not self._growth.should_grow(
            now,
            alive=len(alive),
            wanted=self._workers_wanted,
            queued=len(self._queue),
            all_ready=all(w.ready for w in alive),
            stopping=self._stopping,
        ):
            return
        self._workers_wanted += 1
        self._spawn(probe=False)
        self._peak = max(self._peak, self._workers_wanted)

    def _give_up(self, message: str) -> None:
        while self._queue:
            nodeid = self._queue.popleft()
            planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
            self._checks[nodeid] = self._on_end(unfinished_check(planned, message, outcome=Outcome.NOT_RUN))

    def _time_out(self, worker: Child) -> None:
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
        stack = worker.stack_since() or "no stack available (the process did not answer SIGUSR1)"
        worker.timed_out = True
        worker.kill()
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
                worker.read_output(self._selector)
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
                        worker.kill()
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

    def _fail_interrupted(self, worker: Child) -> None:
        nodeid = worker.in_flight
        assert nodeid is not None
        planned = self._planned.get(nodeid, PlannedCheck(nodeid, None))
        self._checks[nodeid] = self._on_end(
            unfinished_check(planned, "interrupted while running", outcome=Outcome.NOT_RUN)
        )

    def _startup_deadline_passed(self, worker: Child) -> bool:
        return not worker.ready and time.monotonic() - worker.spawned_at > STARTUP_SECONDS

    def _loop(self) -> None:
        planned = False
        while True:
            for key, _ in self._selector.select(timeout=0.1):
                worker = key.data
                assert isinstance(worker, Child)
                if key.fileobj is worker.output_stream:
                    worker.read_output(self._selector)
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
                    worker.kill()
                    worker.child_error = f"did not load and collect within {STARTUP_SECONDS:g} s"
                    self._after_death(worker)
                elif worker.cleanup_since is not None and now - worker.cleanup_since > CLEANUP_SECONDS:
                    self._problems.append(
                        f"the driver's session cleanup did not finish within {CLEANUP_SECONDS:g} s"
                    )
                    worker.kill()
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
