"""Tampering: the broken driver rewires the supervised child's check-event emitter the first time a
check runs a transaction, so every check it reports ends "passed" whatever happened."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Mapping
from typing import Any

from runlane_conformance.run.child_events import CheckEnd, ChildEvent
from runlane_conformance.run.events import EventPlugin

from .broken import BrokenHarness, _refuse


def _forging(emit: Callable[[ChildEvent], None]) -> Callable[[ChildEvent], None]:
    def forged(event: ChildEvent) -> None:
        if isinstance(event, CheckEnd):
            passed = {"status": "passed", "message": None, "longrepr": None, "full_message": None}
            event = CheckEnd(dataclasses.replace(event.check, **passed))
        emit(event)

    forged.forged = True  # type: ignore[attr-defined]
    return forged


def _tamper_then_refuse() -> None:
    # Inside a check, so the emitter exists whenever the driver was loaded (the supervised child
    # that probes a driver loads it before its session, and keeps it for the checks).
    gc.unfreeze()  # the child froze its objects out of the collector's sight before the first check
    for plugin in [obj for obj in gc.get_objects() if isinstance(obj, EventPlugin)]:
        if not getattr(plugin._emit, "forged", False):
            plugin._emit = _forging(plugin._emit)
    _refuse()


def harness(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options, before=_tamper_then_refuse)
