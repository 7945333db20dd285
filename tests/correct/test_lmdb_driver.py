"""A driver on LMDB, written from the docs as a new author would, certifies with exclusive candidates
and gets the same verdict, requirement by requirement, in process and with ``--isolation process``.

LMDB runs one write transaction at a time, so ``tests/correct/lmdb_driver.py`` is a lock-style driver:
competitors wait for the first attempt to end. It is durable and offers a store address, so the
cross-process checks run too, in both modes: LMDB's lock file tells live readers apart by process id,
and an isolated run's backends share one PID namespace (``run/sandbox.py``), so no two of them have
the same id. ``lmdb`` is a dev dependency; without it this module is skipped, except under
``CI=true``, where a missing test dependency fails the run instead of hiding it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation
from runlane_conformance.run.certify import certify_driver
from runlane_conformance.run.model import RunResult
from tests.profiles.certified import assert_certified

if importlib.util.find_spec("lmdb") is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("lmdb is not installed under CI=true: pip install -e '.[dev]' installs it")
    pytest.skip(
        "lmdb is not installed (a dev dependency: pip install -e '.[dev]'); the LMDB driver is not judged",
        allow_module_level=True,
    )

DRIVER = "tests.correct.lmdb_driver:harness"
ROOT = Path(__file__).resolve().parents[2]


def _outcomes(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {req.id: (req.outcome.value, req.reason) for req in result.requirements}


@pytest.mark.timeout(2400)
def test_the_lmdb_driver_certifies_with_exclusive_and_the_same_outcomes_in_both_modes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    in_process = certify_driver(DRIVER, {}, seed=0, isolation=Isolation.NONE)
    assert_certified(in_process, DRIVER)
    assert str(in_process.level) == "core+exclusive+faults"
    offered = set(in_process.facts.offered())
    assert {"exclusive_candidates", "durable", "cross_process", "faults"} <= offered, offered

    isolated = certify_driver(DRIVER, {}, seed=0, isolation=Isolation.PROCESS)
    assert_certified(isolated, DRIVER)
    assert str(isolated.level) == str(in_process.level)
    differing = {
        rid: (outcome, _outcomes(isolated).get(rid))
        for rid, outcome in _outcomes(in_process).items()
        if _outcomes(isolated).get(rid) != outcome
    }
    assert _outcomes(isolated) == _outcomes(in_process), f"outcomes differ between the modes: {differing}"
