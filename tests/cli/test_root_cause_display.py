"""A one-bug driver, as a new author meets it: the root cause first, values in words, no toolkit paths.

The driver is the reference driver with one bug: a replace leaves the record's old index entries behind
until the next commit (``tests.mutants.m_mutations:lazy_on_replace``), the stale entry of issue 38.
Certified over the areas that bug reaches, the console must lead with the requirement it breaks
directly, put the profile claim it spoils under it as a probable consequence, print keys and sorts
decoded, and never show the path of a toolkit file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import runlane_conformance

ROOT = Path(__file__).resolve().parents[2]
TOOLKIT = str(Path(runlane_conformance.__file__).resolve().parent)
ROOT_CAUSE = "mutations.replace-moves-index-entries"
pytestmark = pytest.mark.timeout(600)


def test_a_stale_index_entry_is_read_first_in_words_and_its_consequences_follow_it(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "runlane-certify"),
            "run",
            "--driver",
            "tests.mutants.m_mutations:lazy_on_replace",
            "--area",
            "mutations",
            "--area",
            "profile",
            "--seed",
            "1",
            "--examples",
            "none",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    failed = run.stdout.partition("Failed requirements")[2]
    headings = re.findall(r"^✗ (\S+) \(MUST\)", failed, re.M)
    assert headings[0] == ROOT_CAUSE, failed
    assert f"read first: {ROOT_CAUSE};" in failed
    for consequence in headings[1:]:
        block = failed.partition(f"✗ {consequence} ")[2]
        assert f"probably a consequence of {ROOT_CAUSE} (above)" in block.split("\n✗ ")[0], consequence
    # Keys and sorts in words: a table and id, a date between angle brackets; never their hex encoding.
    assert re.search(r"runs\('env-[0-9a-f]+', 'run-2'\), <2030-01-0\dT00:00:05\.000000Z>", failed), failed
    assert not re.search(r"[0-9a-f]{16,}", failed.replace("sha256:", "")), failed
    assert TOOLKIT not in failed and "site-packages" not in failed, failed
