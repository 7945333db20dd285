"""The JavaScript example's backend speaks the documented protocol: every message it sends is schema-checked.

CI certifies the example in full with the CLI; this test runs the areas that
exercise every kind of request (clock and append included) with the tap on,
so a backend message that drifts from the JSON Schema fails the toolkit's own
tests. It needs Node.js 20 on PATH; without it the test skips, except under
``CI=true``, where a missing Node fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runlane_conformance.runner import run_suites

ROOT = Path(__file__).resolve().parents[2]
BACKEND = ROOT / "examples" / "node" / "backend.mjs"
pytestmark = pytest.mark.timeout(300)


def node_or_skip() -> str:
    node = shutil.which("node")
    version = "0"
    if node is not None:
        version = subprocess.run([node, "-p", "process.versions.node"], capture_output=True, text=True).stdout
    if node is None or int(version.split(".")[0] or 0) < 20:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Node.js 20 or later is not on PATH")
        pytest.skip("Node.js 20 or later is not on PATH")
    return node


def test_the_node_example_passes_with_every_message_checked_against_the_schema() -> None:
    node = node_or_skip()
    result = run_suites(
        "process",
        {"command": f"{node} {BACKEND}", "validate": "true"},
        areas=("point_reads", "sealing", "replay", "operator_reads", "append", "exclusive_selection"),
        seed=0,
    )
    outcomes = {req.id: req.outcome.value for req in result.requirements}
    assert outcomes, "no requirement ran"
    # Its store lives in the backend process (no address), so only the cross-process checks are gated.
    failed = {
        req.id: req.reason
        for req in result.requirements
        if req.outcome.value != "passed"
        and not (req.outcome.value == "gated" and str(req.reason).startswith("profile: cross_process"))
    }
    assert not failed, f"the Node example fails or skips through its backend: {failed}"
