"""Shared set-up for the CLI and runner tests.

``fake_suite/`` is a miniature conformance suite that the runner is pointed at
in these tests; it must never be collected by the toolkit's own test run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runlane_conformance import runner

collect_ignore = ["fake_suite"]

FAKE_SUITE = Path(__file__).parent / "fake_suite"
FAKE_DRIVER = f"{__package__}.fake_driver:harness"


@pytest.fixture
def fake_suite(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the runner at the fake suite; yields the driver spec of the fake driver."""
    monkeypatch.setattr(runner, "SUITE_ARGS", (str(FAKE_SUITE),))
    yield FAKE_DRIVER
