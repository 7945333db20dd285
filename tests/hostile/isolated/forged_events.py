"""Tampering: loading the broken driver rewires the supervised child's check-event emitter, so
every check it reports ends "passed" whatever happened."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

from runlane_conformance.run.events import EventPlugin

from .broken import BrokenHarness


def _forging(emit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def forged(event: dict[str, Any]) -> None:
        if event.get("event") == "end":
            passed = {"status": "passed", "message": None, "longrepr": None, "full_message": None}
            event = {**event, "check": {**event["check"], **passed}}
        emit(event)

    return forged


def harness(options: Mapping[str, str]) -> Any:
    for plugin in [obj for obj in gc.get_objects() if isinstance(obj, EventPlugin)]:
        plugin._emit = _forging(plugin._emit)
    return BrokenHarness(options)
