"""The backend runs on the CPU of the toolkit thread that started it, and that thread gets its CPUs back."""

from __future__ import annotations

import os
import sys

import pytest

from runlane_conformance.harness import DriverOptionError
from runlane_conformance.protocol.client import CPU_SLOT_VARIABLE
from runlane_conformance.protocol.process import process_harness

BACKEND = f"{sys.executable} -m runlane_conformance.backend --driver local"

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
        reason="needs sched_setaffinity and at least two CPUs",
    ),
]


def test_a_colocated_backend_shares_the_starting_threads_single_cpu_until_it_is_closed() -> None:
    before = os.sched_getaffinity(0)
    harness = process_harness({"command": BACKEND})
    try:
        pinned = os.sched_getaffinity(0)
        assert len(pinned) == 1 and pinned <= before
        assert os.sched_getaffinity(harness.backend()._process.pid) == pinned
        store = harness.open_store()
        driver = store.connect()
        assert driver.transaction(lambda tx: tx.get([])) == []
        store.close()
    finally:
        harness.close()
    assert os.sched_getaffinity(0) == before


def test_colocate_false_leaves_every_cpu_to_the_operating_system() -> None:
    before = os.sched_getaffinity(0)
    harness = process_harness({"command": BACKEND, "colocate": "false"})
    try:
        assert os.sched_getaffinity(0) == before
        assert os.sched_getaffinity(harness.backend()._process.pid) == before
    finally:
        harness.close()


def test_colocate_takes_true_or_false() -> None:
    with pytest.raises(DriverOptionError, match="colocate"):
        process_harness({"command": BACKEND, "colocate": "sometimes"})


def test_a_worker_slot_names_the_cpu_so_two_workers_backends_do_not_share_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    for slot in (0, 1):
        monkeypatch.setenv(CPU_SLOT_VARIABLE, str(slot))
        harness = process_harness({"command": BACKEND})
        try:
            assert os.sched_getaffinity(harness.backend()._process.pid) == {allowed[slot % len(allowed)]}
        finally:
            harness.close()
