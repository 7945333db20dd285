"""Tampering: the broken driver raises the skip our own gating would raise, from code compiled under a
suite file's name, so in the checks' process the skip looks as if a suite had gated the check off."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import runlane_conformance.suites

from .broken import BrokenHarness

SUITE_FILE = str(Path(runlane_conformance.suites.__file__).parent / "test_sealing.py")
_SKIP = compile("import pytest\npytest.skip('profile: append not offered')\n", SUITE_FILE, "exec")


def _skip() -> None:
    exec(_SKIP, {})


def harness(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options, before=_skip)
