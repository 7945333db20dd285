"""The supervisor's dispatch loop, driven by fake children: scripted event lines, no processes.

Each test hands the supervisor the lines a child would write and checks what it believed: the
checks it recorded, the commands it sent back, and the tampering it reported. A fake child has the
real ``Child`` handle with an in-memory command pipe and a process that never ends.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from runlane_conformance.fixtures.gating import ProfileFacts
from runlane_conformance.run import supervise
from runlane_conformance.run.child_events import (
    CheckEnd,
    CheckShrinking,
    CheckStart,
    ChildEvent,
    Collected,
    Plugins,
    Ready,
    encode_line,
)
from runlane_conformance.run.children import Child, ChildSpec
from runlane_conformance.run.model import CheckResult, Outcome
from runlane_conformance.run.plan import PlannedCheck
from runlane_conformance.run.raw import RawCheck
from runlane_conformance.run.supervise import Supervisor

CHECKS = (
    PlannedCheck("s.py::a", "area.a"),
    PlannedCheck("s.py::b", "area.b"),
    PlannedCheck("s.py::c", "area.c"),
)


class NeverEnds:
    """A process stand-in that is still running."""

    pid = 0
    returncode = None

    def poll(self) -> None:
        return None


def fake_child(*, probe: bool = False, index: int = 0) -> Child:
    return Child(
        index=index,
        process=cast(Any, NeverEnds()),
        events=cast(Any, io.BytesIO()),
        commands=cast(Any, io.BytesIO()),
        stack_path=Path("/nonexistent/stack"),
        output_stream=cast(Any, io.BytesIO()),
        probe=probe,
    )


def sent(child: Child) -> list[dict[str, Any]]:
    text = cast(io.BytesIO, child.commands).getvalue().decode()
    return [json.loads(line) for line in text.splitlines()]


def line(event: ChildEvent | dict[str, Any]) -> bytes:
    """The line a child writes for ``event`` (``encode_line``, as ``run.child`` does); a dict is a
    forged or malformed event, written as it is."""
    return json.dumps(event).encode() if isinstance(event, dict) else encode_line(event).encode()


def judge(result: RawCheck | CheckResult) -> CheckResult:
    if isinstance(result, CheckResult):
        return result
    outcome = Outcome.PASSED if result.status == "passed" else Outcome.FAILED
    return CheckResult(result.nodeid, result.requirement_id, "area", outcome, result.duration)


@pytest.fixture
def make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    made: list[Supervisor] = []
    monkeypatch.setattr(supervise.tempfile, "mkdtemp", lambda prefix: str(tmp_path / f"run{len(made)}"))

    def build(**options: Any) -> Supervisor:
        (tmp_path / f"run{len(made)}").mkdir()
        supervisor = Supervisor(
            ChildSpec("local", {}, [], [], None),
            workers=options.pop("workers", 1),
            check_timeout=60.0,
            on_plan=lambda facts, collected: list(collected),
            on_start=lambda check: None,
            on_end=judge,
            **options,
        )
        made.append(supervisor)
        return supervisor

    yield build
    for directory in tmp_path.iterdir():
        shutil.rmtree(directory, ignore_errors=True)


def planned(supervisor: Supervisor, child: Child) -> None:
    """Bring ``supervisor`` to the point its loop has a plan and ``child`` is ready."""
    supervisor.receive(child, line(Collected(CHECKS)))
    supervisor.receive(child, line(Ready()))
    supervisor._facts = cast(ProfileFacts, object())
    supervisor._collected = CHECKS
    supervisor._planned = {check.nodeid: check for check in CHECKS}
    supervisor._queue.extend(check.nodeid for check in CHECKS)
    supervisor._feed(child)


def problems(supervisor: Supervisor) -> list[str]:
    return list(supervisor._problems)


def test_a_serial_child_gets_every_check_then_stop(make: Any) -> None:
    supervisor, child = make(), fake_child(probe=True)
    planned(supervisor, child)
    assert sent(child) == [*({"op": "run", "nodeid": c.nodeid} for c in CHECKS), {"op": "stop"}]


def test_a_start_and_an_end_record_the_check(make: Any) -> None:
    supervisor, child = make(), fake_child(probe=True)
    planned(supervisor, child)
    supervisor.receive(child, line(CheckStart("s.py::a")))
    supervisor.receive(child, line(CheckEnd(RawCheck("s.py::a", "area.a"))))
    assert supervisor._checks["s.py::a"].outcome is Outcome.PASSED
    assert child.in_flight is None and list(child.assigned) == ["s.py::b", "s.py::c"]
    assert problems(supervisor) == []


def test_an_end_for_a_check_not_in_flight_is_tampering_not_evidence(make: Any) -> None:
    supervisor, child = make(), fake_child(probe=True)
    planned(supervisor, child)
    supervisor.receive(child, line(CheckEnd(RawCheck("s.py::a", "area.a"))))
    assert "s.py::a" not in supervisor._checks
    assert problems(supervisor) and "tampered" in problems(supervisor)[0]


def test_a_second_end_for_one_check_overrules_it_as_failed(make: Any) -> None:
    supervisor, child = make(), fake_child(probe=True)
    planned(supervisor, child)
    supervisor.receive(child, line(CheckStart("s.py::a")))
    supervisor.receive(child, line(CheckEnd(RawCheck("s.py::a", "area.a"))))
    supervisor.receive(child, line(CheckEnd(RawCheck("s.py::a", "area.a", status="failed"))))
    assert supervisor._checks["s.py::a"].outcome is Outcome.FAILED
    assert "two different ends" in (supervisor._checks["s.py::a"].message or "")


def test_a_start_of_a_check_never_handed_out_is_rejected(make: Any) -> None:
    supervisor, child = make(), fake_child(probe=True)
    planned(supervisor, child)
    supervisor.receive(child, line(CheckStart("s.py::forged")))
    assert child.in_flight is None
    assert "was not about to run" in problems(supervisor)[0]


def test_a_shrinking_notice_for_another_check_is_rejected(make: Any) -> None:
    supervisor, child = make(), fake_child(probe=True)
    planned(supervisor, child)
    supervisor.receive(child, line(CheckStart("s.py::a")))
    supervisor.receive(child, line(CheckShrinking("s.py::b")))
    assert "shrinking notice" in problems(supervisor)[0]


def test_probe_events_from_a_worker_and_repeated_one_time_events_are_rejected(make: Any) -> None:
    supervisor, probe, worker = make(), fake_child(probe=True), fake_child(index=1)
    supervisor.receive(worker, line({"event": "probe_error", "message": "forged"}))
    supervisor.receive(probe, line(Plugins((("a", "1"),))))
    supervisor.receive(probe, line(Plugins((("b", "2"),))))
    assert supervisor._plugins == [("a", "1")]
    assert "not the probe" in problems(supervisor)[0]
    assert supervisor._rejected == 2


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (b"not json", "a line that is not JSON"),
        (b"[1, 2]", "an event that is not an object"),
        (b'{"event": "start"}', "a malformed 'start' event"),
    ],
)
def test_a_line_that_is_not_a_well_formed_event_is_rejected(make: Any, text: bytes, what: str) -> None:
    supervisor, child = make(), fake_child(probe=True)
    supervisor.receive(child, text)
    assert what in problems(supervisor)[0]


def test_with_maxfail_the_first_failure_stops_every_child(make: Any) -> None:
    supervisor, child = make(max_failures=1), fake_child(probe=True)
    planned(supervisor, child)
    assert sent(child) == [{"op": "run", "nodeid": "s.py::a"}, {"op": "run", "nodeid": "s.py::b"}]
    supervisor.receive(child, line(CheckStart("s.py::a")))
    supervisor.receive(child, line(CheckEnd(RawCheck("s.py::a", "area.a", status="failed"))))
    assert sent(child)[-1] == {"op": "stop"}
    assert not supervisor._queue and supervisor._stopping


EXCLUSIVE = (
    PlannedCheck("suites/test_model.py::a", "model.a"),
    PlannedCheck("suites/test_cluster_faults.py::k1", "cluster_faults.k1"),
    PlannedCheck("suites/test_cluster_faults.py::k2", "cluster_faults.k2"),
)


def test_a_cluster_faults_check_runs_only_while_no_other_check_runs_anywhere(make: Any) -> None:
    from runlane_conformance.run.scheduling import OneAhead

    supervisor = make(workers=2)
    supervisor._hand_out = OneAhead()
    first, second = fake_child(probe=True), fake_child(index=1)
    supervisor._workers = [first, second]
    for child in (first, second):
        supervisor.receive(child, line(Ready()))
    supervisor._planned = {check.nodeid: check for check in EXCLUSIVE}
    supervisor._queue.extend(check.nodeid for check in EXCLUSIVE)
    supervisor._feed(first)
    supervisor._feed(second)
    # No other child holds anything, so the first takes the ordinary check and, to run after it, the
    # first cluster check; the second child gets nothing (and no stop: holding nothing, it blocks no one).
    assert list(first.assigned) == ["suites/test_model.py::a", "suites/test_cluster_faults.py::k1"]
    assert list(second.assigned) == [] and sent(second) == []
    supervisor.receive(first, line(CheckStart("suites/test_model.py::a")))
    supervisor.receive(first, line(CheckEnd(RawCheck("suites/test_model.py::a", "model.a"))))
    supervisor._feed(second)  # the end fed the first child the last cluster check; nothing is left
    assert list(first.assigned) == ["suites/test_cluster_faults.py::k1", "suites/test_cluster_faults.py::k2"]
    assert list(second.assigned) == [] and sent(second) == [{"op": "stop"}]


def test_a_child_holding_an_ordinary_check_is_stopped_rather_than_left_waiting_for_its_next(
    make: Any,
) -> None:
    from runlane_conformance.run.scheduling import OneAhead

    supervisor = make(workers=2)
    supervisor._hand_out = OneAhead()
    first, second = fake_child(probe=True), fake_child(index=1)
    supervisor._workers = [first, second]
    for child in (first, second):
        supervisor.receive(child, line(Ready()))
    checks = (PlannedCheck("suites/test_model.py::b", "model.b"), *EXCLUSIVE)
    supervisor._planned = {check.nodeid: check for check in checks}
    supervisor._queue.extend(check.nodeid for check in checks)
    supervisor._feed(first)  # takes model.b and model.a
    supervisor.receive(first, line(CheckStart("suites/test_model.py::b")))
    supervisor.receive(first, line(CheckEnd(RawCheck("suites/test_model.py::b", "model.b"))))
    # first now holds only model.a, which it cannot start before it learns what follows; second holds
    # nothing. first is alone, so it gets the next (exclusive) check as its upcoming one.
    assert next(iter(first.assigned)) == "suites/test_model.py::a"
    assert "suites/test_cluster_faults.py::k1" in first.assigned
    # Had second held a check, first would have been told to stop instead of waiting forever:
    supervisor2 = make(workers=2)
    supervisor2._hand_out = OneAhead()
    a, b = fake_child(probe=True), fake_child(index=1)
    supervisor2._workers = [a, b]
    for child in (a, b):
        supervisor2.receive(child, line(Ready()))
    both = (
        PlannedCheck("suites/test_model.py::x", "model.x"),
        PlannedCheck("suites/test_model.py::y", "model.y"),
    )
    supervisor2._planned = {check.nodeid: check for check in (*both, *EXCLUSIVE[1:])}
    supervisor2._queue.extend(check.nodeid for check in (*both, *EXCLUSIVE[1:]))
    a.assigned.append("suites/test_model.py::x")
    b.assigned.append("suites/test_model.py::y")
    supervisor2._queue.remove("suites/test_model.py::x")
    supervisor2._queue.remove("suites/test_model.py::y")
    supervisor2._feed(a)
    assert a.stopped and sent(a) == [{"op": "stop"}]
