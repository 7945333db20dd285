"""The lost-EXEC double apply that the faults suite exists to catch, shown on the unfixed driver.

Only public surfaces are used, as a third-party repository would: the toolkit's facade (the fault
proxy, the store's ``proxy_target``/``connect_through``) and the ``runlane-certify`` command.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import unfixed_redis
from runlane_redis_driver import harness

from runlane_conformance import Fault, FaultKind, FaultProxy, Leases, StorageTransaction

RULE = "faults.no-replay-after-possible-commit"
HERE = Path(__file__).resolve().parent


def _increment(leases: Leases, runs: list[int], name: str = "counter") -> Callable[[StorageTransaction], int]:
    def increment(tx: StorageTransaction) -> int:
        (current,) = tx.get([leases.key(name)])
        assert current is not None
        value = int(str(current.document.value["holder"]))
        runs.append(value)
        tx.replace(current, leases.record(name, holder=str(value + 1)))
        return value

    return increment


def _connected(driver: Any, leases: Leases) -> Any:
    """``driver`` after one read, so its connection and handshake are done before the proxy counts."""
    driver.transaction(lambda tx: tx.get([leases.key("calibrate")]))
    return driver


def _exec_reply_lost(factory: Callable[[Mapping[str, str]], Any]) -> tuple[int, int, list[int]]:
    """A counter increment from 0 whose EXEC reply is lost: (stored, returned, the value each run read)."""
    made = factory({})
    store = made.open_store()
    try:
        with FaultProxy(store.proxy_target()) as proxy:
            leases = Leases(environment=f"exec-{uuid.uuid4().hex[:8]}")
            calibrate, target = leases.record("calibrate", holder="0"), leases.record("counter", holder="0")
            seed = store.connect()
            seed.transaction(lambda tx: (tx.create(calibrate), tx.create(target)))
            # Count the writes of the same increment on another key: the last one is the EXEC. Each
            # instance behind the proxy first reads once, unarmed: redis-py connects lazily and pipelines
            # its handshake (two CLIENT SETINFO sent before either reply is read), which the proxy counts
            # as one write or two depending on timing, so it must happen before counting starts.
            warm = _connected(store.connect_through(proxy.address), leases)
            proxy.arm(None)
            warm.transaction(_increment(leases, [], "calibrate"))
            writes = proxy.writes
            faulty = _connected(store.connect_through(proxy.address), leases)
            proxy.arm(Fault(FaultKind.LOSE_REPLY, writes))
            runs: list[int] = []
            returned = faulty.transaction(_increment(leases, runs))
            assert proxy.fired
            proxy.disarm()
            (record,) = store.connect().transaction(lambda tx: tx.get([leases.key("counter")]))
            assert record is not None
            return int(str(record.document.value["holder"])), returned, runs
    finally:
        made.close()


def test_a_lost_exec_reply_takes_the_unfixed_counter_from_0_to_2_and_the_fixed_one_to_1() -> None:
    # The unfixed driver takes the failed EXEC for a lost race and replays: applied twice, and the
    # replay's value escapes. The fixed one reads its commit marker back and returns the first value.
    assert _exec_reply_lost(unfixed_redis.harness) == (2, 1, [0, 1])
    assert _exec_reply_lost(harness) == (1, 0, [0])


def _certify(words: list[str], report: Path) -> dict[str, Any]:
    command = shutil.which(
        "runlane-certify",
        path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    if command is None:
        pytest.fail("runlane-certify is not installed next to this Python or on PATH")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    finished = subprocess.run(
        [command, *words, "--report", str(report)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return document


def _failed(document: dict[str, Any]) -> dict[str, str]:
    entries = document["requirements"]
    return {entry["id"]: entry["reason"] for entry in entries if entry["outcome"] == "failed"}


def test_certifying_the_unfixed_driver_fails_the_double_apply_in_faults_alone_and_the_failure_replays(
    tmp_path: Path,
) -> None:
    # Every area: the double apply fails faults.* requirements and nothing else.
    document = _certify(["run", "--driver", "unfixed_redis:harness"], tmp_path / "report.json")
    failed = _failed(document)
    assert RULE in failed, failed
    assert "counter=2" in failed[RULE] and "reply to write" in failed[RULE], failed[RULE]
    assert all(rid.startswith("faults.") for rid in failed), sorted(failed)
    assert document["run"]["checks"]["not_run"] == 0, document["run"]
    passed_areas = {area["area"] for area in document["areas"] if area["requirements"]["failed"] == 0}
    assert passed_areas == {area["area"] for area in document["areas"]} - {"faults"}, passed_areas

    # The printed reproduce line breaks the same write the same way: the same first failing trial.
    (entry,) = [entry for entry in document["requirements"] if entry["id"] == RULE]
    words = shlex.split(entry["failures"][0]["reproduce"])
    assert words[:2] == ["runlane-certify", "run"], words
    again = _certify(words[1:], tmp_path / "again.json")
    assert _failed(again).get(RULE) == failed[RULE]
