"""The child event vocabulary: every kind encodes and decodes to itself, and malformed ones raise; the
child side (its channel and the pytest plugin) sends nothing but these typed values."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from runlane_conformance.contract.values import StorageLimits, StorageProfile
from runlane_conformance.fixtures.gating import ProfileFacts
from runlane_conformance.run.child_events import (
    MAX_EVENT_LINE,
    CheckEnd,
    CheckShrinking,
    CheckStart,
    ChildError,
    ChildEvent,
    ChildExit,
    Collected,
    CollectError,
    EventLines,
    Plugins,
    Probe,
    ProbeError,
    Ready,
    SessionDone,
    decode,
    encode,
    encode_line,
)
from runlane_conformance.run.plan import PlannedCheck
from runlane_conformance.run.raw import RawCheck

PROFILE = StorageProfile(
    durability="durable",
    clock_authority="client",
    index_consistency="strong",
    limits=StorageLimits(
        max_point_reads=100,
        max_query_results=100,
        max_transaction_records=100,
        max_record_bytes=65536,
        max_transaction_bytes=1048576,
    ),
    exclusive_candidates=True,
    append=False,
)

EVERY_KIND: list[ChildEvent] = [
    Probe(ProfileFacts(profile=PROFILE, operator_reads=True, cross_process=False, faults=True)),
    ProbeError("driver 'x': cannot connect"),
    Plugins((("hypothesis", "6.1"), ("runlane_conformance", "1.0"))),
    CollectError("SyntaxError in a suite"),
    Collected(
        (PlannedCheck("a.py::t", "area.rule", 3.0, True, ("max_point_reads",)), PlannedCheck("b", None))
    ),
    Ready(),
    CheckStart("a.py::t"),
    CheckShrinking("a.py::t"),
    CheckEnd(RawCheck(nodeid="a.py::t", requirement_id="area.rule", status="passed", duration=0.5)),
    SessionDone(),
    ChildError("pytest raised"),
    ChildExit(1),
]


@pytest.mark.parametrize("event", EVERY_KIND, ids=lambda event: type(event).__name__)
def test_every_kind_decodes_to_what_was_encoded(event: ChildEvent) -> None:
    assert decode(encode(event)) == event


def test_every_kind_is_covered() -> None:
    assert len({encode(event)["event"] for event in EVERY_KIND}) == 12


def test_an_unknown_kind_is_ignored_not_refused() -> None:
    assert decode({"event": "from-a-newer-child"}) is None


@pytest.mark.parametrize(
    "event",
    [
        {"event": "start"},
        {"event": "end", "check": "not an object"},
        {"event": "collected", "checks": [{}]},
        {"event": "plugins", "plugins": [["only-a-name"]]},
        {"event": "exit", "code": "zero"},
        {"event": "probe", "profile": {}, "operator_reads": True, "cross_process": True},
    ],
)
def test_a_malformed_event_raises_instead_of_decoding(event: dict[str, Any]) -> None:
    with pytest.raises((KeyError, TypeError, ValueError)):
        decode(event)


def test_lines_are_framed_across_reads() -> None:
    lines = EventLines()
    assert lines.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert lines.feed(b": 2}\n") == [b'{"b": 2}']
    assert lines.feed(b"last") == []
    assert lines.feed(b"\n") == [b"last"]


def test_a_line_past_the_cap_is_dropped_and_the_next_one_still_arrives() -> None:
    lines = EventLines()
    for _ in range(3):  # a line with no end in sight: never kept beyond the cap
        assert lines.feed(b"x" * (MAX_EVENT_LINE // 2 + 1)) == []
        assert lines.pending <= MAX_EVENT_LINE
    assert lines.feed(b'tail of the long line\n{"c": 3}\n') == [b'{"c": 3}']


def test_the_childs_channel_writes_each_event_as_the_line_the_parent_decodes() -> None:
    """Both ends of the pipe: what ``run.child`` writes is framed and decoded back to the same values."""
    from runlane_conformance.run.child import _Channel

    stream = io.StringIO()
    channel = _Channel(stream)
    for event in EVERY_KIND:
        channel.emit(event)
    assert stream.getvalue() == "".join(encode_line(event) for event in EVERY_KIND)
    assert stream.getvalue().isascii()
    lines = EventLines().feed(stream.getvalue().encode())
    assert [decode(json.loads(line)) for line in lines] == EVERY_KIND


_SUITE = """
import pytest

@pytest.mark.runlane_requirement("area.kept")
@pytest.mark.timeout(7)
def test_kept():
    pass

@pytest.mark.runlane_requirement("area.broken")
def test_broken():
    assert False, "the store lost it"
"""


def test_the_plugin_emits_typed_events_in_collection_and_run_order(pytester: pytest.Pytester) -> None:
    """A fake child: the plugin in an in-process session, handed one check then told to stop."""
    from runlane_conformance.run.events import EventPlugin

    pytester.makepyfile(test_area=_SUITE)
    events: list[ChildEvent] = []
    nodeid = "test_area.py::test_broken"
    plugin = EventPlugin(events.append, (), iter([nodeid, None]))
    pytester.runpytest_inprocess("-p", "no:runlane_conformance", "-p", "no:cacheprovider", plugins=[plugin])
    kinds = [type(event) for event in events]
    assert kinds == [Plugins, Collected, Ready, CheckStart, CheckEnd, SessionDone], kinds
    collected = events[1]
    assert isinstance(collected, Collected)
    assert collected.checks == (
        PlannedCheck("test_area.py::test_kept", "area.kept", 7.0, False, ()),
        PlannedCheck(nodeid, "area.broken", None, False, ()),
    )
    assert events[3] == CheckStart(nodeid)
    end = events[4]
    assert isinstance(end, CheckEnd)
    assert (end.check.nodeid, end.check.requirement_id, end.check.status) == (nodeid, "area.broken", "failed")
    assert "the store lost it" in (end.check.message or "")
    for event in events:  # every one of them crosses the pipe unchanged
        assert decode(json.loads(encode_line(event))) == event
