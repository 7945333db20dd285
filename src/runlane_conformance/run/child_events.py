"""The events a supervised child sends its parent: every kind, typed, with its encoding in one place.

A child (``run.child``, with ``run.events.EventPlugin`` inside its pytest session) writes one JSON
object per line to its events pipe; the supervisor reads them (``EventLines`` frames the lines) and
turns each into one of the frozen values below (``decode``). Within one child they come in this
order:

* ``probe`` (the probe child only, once): the profile the driver advertised and the optional
  capabilities the harness offers; or ``probe_error``: the driver could not be loaded;
* ``plugins`` (once): the pytest plugins loaded in the session, for the report;
* ``collected`` (once): every check the session collected; or ``collect_error``;
* ``ready`` (once): the session waits for ``run`` commands;
* per check handed to it: ``start``, any number of ``shrinking`` (Hypothesis is shrinking a
  failure), then exactly one ``end`` with the raw result;
* ``session_done``: the session's cleanup (the driver's teardown) begins;
* ``child_error``: the child itself failed outside any check (the message says how);
* ``exit``: the pytest session's exit code, sent just before the process ends.

``decode`` refuses a malformed event by raising (``KeyError``, ``TypeError``, ``ValueError`` ...);
the supervisor counts that as tampering, never as evidence. An unknown kind decodes to ``None``
and is ignored, so an older parent can read a newer child. ``encode`` is the inverse; the child
(``run.child`` and ``run.events.EventPlugin``) builds only these values and sends each as
``encode_line`` frames it, and the tests' fake children do the same, so both sides of the pipe
share one vocabulary and one encoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..contract.values import StorageLimits, StorageProfile
from ..fixtures.gating import ProfileFacts
from .plan import PlannedCheck, planned_from_event
from .raw import RawCheck

__all__ = [
    "MAX_EVENT_LINE",
    "ONE_TIME_KINDS",
    "PROBE_KINDS",
    "CheckEnd",
    "CheckShrinking",
    "CheckStart",
    "ChildError",
    "ChildEvent",
    "ChildExit",
    "CollectError",
    "Collected",
    "EventLines",
    "Plugins",
    "Probe",
    "ProbeError",
    "Ready",
    "SessionDone",
    "decode",
    "encode",
    "encode_line",
]

#: Longest event line a child may send; anything longer is not ours and is dropped unread.
MAX_EVENT_LINE = 16 * 1024 * 1024
#: Kinds only the probe child may send.
PROBE_KINDS = frozenset({"probe", "probe_error"})
#: Kinds a child sends at most once.
ONE_TIME_KINDS = frozenset({"probe", "probe_error", "plugins", "collected", "ready"})


@dataclass(frozen=True)
class Probe:
    """``probe``: what the preflight probe found (the profile and the harness's optional offers)."""

    facts: ProfileFacts


@dataclass(frozen=True)
class ProbeError:
    """``probe_error``: the driver could not be loaded or connected (one line)."""

    message: str


@dataclass(frozen=True)
class Plugins:
    """``plugins``: (module, version) of every non-builtin pytest plugin in the session."""

    plugins: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class CollectError:
    """``collect_error``: the suites did not collect; the run is broken, not the driver."""

    message: str


@dataclass(frozen=True)
class Collected:
    """``collected``: every check the session collected, in collection order."""

    checks: tuple[PlannedCheck, ...]


@dataclass(frozen=True)
class Ready:
    """``ready``: the session waits for ``run`` commands."""


@dataclass(frozen=True)
class CheckStart:
    """``start``: the child began the check ``nodeid`` (it must be one handed to it)."""

    nodeid: str


@dataclass(frozen=True)
class CheckShrinking:
    """``shrinking``: the check in flight found a failure and Hypothesis is shrinking it."""

    nodeid: str


@dataclass(frozen=True)
class CheckEnd:
    """``end``: the check in flight ended; ``check`` is its raw result, judged by the parent."""

    check: RawCheck


@dataclass(frozen=True)
class SessionDone:
    """``session_done``: the last check ended and the session's cleanup begins."""


@dataclass(frozen=True)
class ChildError:
    """``child_error``: the child failed outside any check."""

    message: str


@dataclass(frozen=True)
class ChildExit:
    """``exit``: the session's exit code, sent just before the process ends."""

    code: int


ChildEvent: TypeAlias = (
    Probe
    | ProbeError
    | Plugins
    | CollectError
    | Collected
    | Ready
    | CheckStart
    | CheckShrinking
    | CheckEnd
    | SessionDone
    | ChildError
    | ChildExit
)

_LIMIT_NAMES = (
    "max_point_reads",
    "max_query_results",
    "max_transaction_records",
    "max_record_bytes",
    "max_transaction_bytes",
)


def _profile_from_json(data: Mapping[str, Any]) -> StorageProfile:
    return StorageProfile(
        durability=data["durability"],
        clock_authority=data["clock_authority"],
        index_consistency=data["index_consistency"],
        limits=StorageLimits(**data["limits"]),
        exclusive_candidates=bool(data["exclusive_candidates"]),
        append=bool(data["append"]),
    )


def decode(event: Mapping[str, Any]) -> ChildEvent | None:
    """The typed event a decoded JSON object stands for (``None`` for a kind this parent ignores).

    Raises ``KeyError``, ``TypeError``, ``ValueError``, ``AttributeError`` or ``IndexError`` for
    a malformed event; a profile the contract refuses raises the contract's own error.
    """
    kind = event.get("event")
    if kind == "probe":
        return Probe(
            ProfileFacts(
                profile=_profile_from_json(event["profile"]),
                operator_reads=bool(event["operator_reads"]),
                cross_process=bool(event["cross_process"]),
                faults=bool(event.get("faults", False)),
                cluster=bool(event.get("cluster", False)),
                cluster_partition=bool(event.get("cluster_partition", False)),
            )
        )
    if kind == "probe_error":
        return ProbeError(str(event.get("message", "the driver could not be loaded")))
    if kind == "plugins":
        return Plugins(tuple((str(name), str(version)) for name, version in event["plugins"]))
    if kind == "collect_error":
        return CollectError(str(event.get("message")))
    if kind == "collected":
        return Collected(tuple(planned_from_event(c) for c in event["checks"]))
    if kind == "ready":
        return Ready()
    if kind == "start":
        return CheckStart(str(event["nodeid"]))
    if kind == "shrinking":
        return CheckShrinking(str(event.get("nodeid")))
    if kind == "end":
        return CheckEnd(RawCheck.from_json(event["check"]))
    if kind == "session_done":
        return SessionDone()
    if kind == "child_error":
        return ChildError(str(event.get("message")))
    if kind == "exit":
        return ChildExit(int(event.get("code", 0)))
    return None


def _planned_to_json(check: PlannedCheck) -> dict[str, Any]:
    return {
        "nodeid": check.nodeid,
        "requirement": check.requirement_id,
        "declared_timeout": check.declared_timeout,
        "property": check.searches,
        "limit_gates": list(check.limit_gates),
    }


def encode(event: ChildEvent) -> dict[str, Any]:
    """The JSON object ``event`` is sent as (``decode``'s inverse)."""
    if isinstance(event, Probe):
        profile, facts = event.facts.profile, event.facts
        return {
            "event": "probe",
            "profile": {
                "durability": profile.durability.value,
                "clock_authority": profile.clock_authority.value,
                "index_consistency": profile.index_consistency.value,
                "append": profile.append,
                "exclusive_candidates": profile.exclusive_candidates,
                "limits": {name: getattr(profile.limits, name) for name in _LIMIT_NAMES},
            },
            "operator_reads": facts.operator_reads,
            "cross_process": facts.cross_process,
            "faults": facts.faults,
            "cluster": facts.cluster,
            "cluster_partition": facts.cluster_partition,
        }
    if isinstance(event, ProbeError):
        return {"event": "probe_error", "message": event.message}
    if isinstance(event, Plugins):
        return {"event": "plugins", "plugins": [list(pair) for pair in event.plugins]}
    if isinstance(event, CollectError):
        return {"event": "collect_error", "message": event.message}
    if isinstance(event, Collected):
        return {"event": "collected", "checks": [_planned_to_json(check) for check in event.checks]}
    if isinstance(event, Ready):
        return {"event": "ready"}
    if isinstance(event, CheckStart):
        return {"event": "start", "nodeid": event.nodeid}
    if isinstance(event, CheckShrinking):
        return {"event": "shrinking", "nodeid": event.nodeid}
    if isinstance(event, CheckEnd):
        return {"event": "end", "check": event.check.to_json()}
    if isinstance(event, SessionDone):
        return {"event": "session_done"}
    if isinstance(event, ChildError):
        return {"event": "child_error", "message": event.message}
    return {"event": "exit", "code": event.code}


def encode_line(event: ChildEvent) -> str:
    """``event`` as the one line a child writes for it (ASCII JSON, newline included)."""
    return json.dumps(encode(event), ensure_ascii=True) + "\n"


class EventLines:
    """Frames one child's event pipe into lines: complete lines out, a partial one kept for later.

    A line longer than ``limit`` is not ours: it is dropped, and so is the rest of it until its
    newline, without keeping it in memory.
    """

    def __init__(self, limit: int = MAX_EVENT_LINE) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._skipping = False

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line kept so far (never more than ``limit``)."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete lines ``chunk`` finishes (``b"\\n"`` flushes a last line without one)."""
        lines: list[bytes] = []
        while chunk:
            end = chunk.find(b"\n")
            if end < 0:
                if not self._skipping:
                    self._buffer += chunk
                    if len(self._buffer) > self._limit:
                        self._buffer, self._skipping = bytearray(), True
                return lines
            if not self._skipping:
                lines.append(bytes(self._buffer) + chunk[:end])
            self._buffer, self._skipping = bytearray(), False
            chunk = chunk[end + 1 :]
        return lines
