"""Drivers whose process ends or stops answering in every transaction: with ``--isolation process``
that process is the backend, so the check in flight must fail (or be inconclusive, for a hang)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from .broken import BrokenHarness


def _exit() -> None:
    os._exit(0)


def _hang() -> None:
    threading.Event().wait()


def exits(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options, before=_exit)


def hangs(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options, before=_hang)
