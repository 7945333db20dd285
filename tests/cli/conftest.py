"""Shared set-up for the CLI and runner tests.

``fake_suite/`` is a miniature conformance suite that the runner is pointed at
in these tests; it must never be collected by the toolkit's own test run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runlane_conformance.run import certify as runner
from tests.cli.fake_catalog import fake_catalog

collect_ignore = ["fake_suite"]

FAKE_SUITE = Path(__file__).parent / "fake_suite"
FAKE_DRIVER = f"{__package__}.fake_driver:harness"


@pytest.fixture
def fake_suite(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the runner at the fake suite; yields the driver spec of the fake driver."""
    monkeypatch.setattr(runner, "SUITE_ARGS", (str(FAKE_SUITE),))
    monkeypatch.setattr(runner, "SUITE_CATALOG", fake_catalog)
    yield FAKE_DRIVER


@pytest.fixture(autouse=True)
def examples_kept_apart(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Give every CLI test its own default example database, not ``.runlane/examples`` in the checkout:
    a failure one test saved would otherwise be replayed first by the next."""
    from runlane_conformance.cli import run_cmd

    monkeypatch.setattr(run_cmd, "DEFAULT_EXAMPLES_DIR", tmp_path_factory.mktemp("examples") / "db")


@pytest.fixture(autouse=True)
def output_width_of_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every CLI test as if writing to a CI log, whatever terminal or worker runs the tests.

    The CLI honours ``COLUMNS`` when it is set (a user's terminal, or pytest-xdist,
    which sets it to 80 in its workers); without this the tests that read the
    verdict table would depend on where they ran.
    """
    monkeypatch.delenv("COLUMNS", raising=False)
