"""How a run's isolation mode is handed to the children and shown to whoever reads its verdict."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

from runlane_conformance.protocol.isolation import BACKEND_MODULE, Isolation, served_driver
from runlane_conformance.report.badge import badge_for, isolation_note


def _document(isolation: str, *, certified: bool = True) -> dict[str, Any]:
    return {
        "certification": {"certified": certified, "complete": True, "level": "core+append"},
        "driver": {"spec": "mydriver"},
        "environment": {"isolation": isolation, "sandbox": "bubblewrap" if isolation == "process" else None},
    }


def test_an_isolated_run_hands_the_backend_its_options_off_the_command_line() -> None:
    options = {"dsn": "postgres://u:p w@h/db", "limit": "3"}
    driver, served = served_driver("mypkg.harness:factory", options, Isolation.PROCESS)
    assert driver == "process" and set(served) == {"command", "backend_options"}
    # The command line is visible to every local user (ps): no option value may be on it.
    assert shlex.split(served["command"]) == [
        sys.executable,
        "-m",
        BACKEND_MODULE,
        "--driver",
        "mypkg.harness:factory",
    ]
    assert json.loads(served["backend_options"]) == options


def test_a_sandboxed_run_prefixes_the_backend_command_with_the_sandbox() -> None:
    _, served = served_driver("local", {}, Isolation.PROCESS, ["bwrap", "--unshare-pid", "--"])
    assert shlex.split(served["command"])[:4] == ["bwrap", "--unshare-pid", "--", sys.executable]
    assert "backend_options" not in served


def test_without_isolation_the_children_get_the_driver_as_asked_for() -> None:
    assert served_driver("local", {"a": "1"}, Isolation.NONE) == ("local", {"a": "1"})


def test_the_process_driver_itself_is_not_wrapped_in_a_second_backend() -> None:
    options = {"command": "node backend.mjs"}
    assert served_driver("process", options, Isolation.PROCESS) == ("process", options)


def test_an_isolated_certification_says_so_on_its_badge() -> None:
    assert badge_for(_document("process")).message == "core+append (isolated)"
    assert isolation_note(_document("process")).startswith("isolation: process")


def test_an_in_process_certification_keeps_its_level_and_its_note_says_where_the_driver_ran() -> None:
    assert badge_for(_document("none")).message == "core+append"
    assert isolation_note(_document("none")).startswith("isolation: none")


def test_a_refused_certification_is_not_certified_whatever_its_isolation() -> None:
    assert badge_for(_document("process", certified=False)).message == "not certified"


def test_an_isolated_run_s_worker_processes_serve_the_driver_through_the_same_backend() -> None:
    """Cross-process checks start worker processes that attach to the store: under isolation they must
    load the served harness (the ``process`` driver with its backend command), not the raw options,
    which name no backend; every such check failed to start before (a verdict isolation changed)."""
    from runlane_conformance.run.certify import certify_driver
    from runlane_conformance.run.model import RequirementOutcome

    requirement = "completion_waits.marker-across-processes"
    result = certify_driver("sqlite", {}, requirements=[requirement], seed=0, isolation=Isolation.PROCESS)
    outcome = result.requirement(requirement)
    assert outcome.outcome is RequirementOutcome.PASSED, [test.message for test in outcome.failures]
