"""The two bounds the supervisor relies on: a child's output kept in bounded memory, and nothing left alive.

``end_descendants`` kills whole process trees, so it is exercised in a throw-away Python process
(never in the test runner itself), next to an unrelated process that must survive it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runlane_conformance.run.capped import CappedOutput

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")


def test_output_within_the_limits_is_kept_whole() -> None:
    output = CappedOutput(head=10, tail=10)
    for chunk in (b"hello ", b"world", b"!"):
        output.feed(chunk)
    assert (output.text(), output.total, output.dropped) == ("hello world!", 12, 0)


def test_output_beyond_the_limits_keeps_its_head_and_tail_and_counts_the_rest() -> None:
    output = CappedOutput(head=4, tail=6)
    output.feed(b"HEAD")
    for _ in range(1000):
        output.feed(b"middle-")
    output.feed(b"the end")
    assert output.total == 4 + 7000 + 7
    assert output.dropped == output.total - 4 - 6
    assert output.text() == f"HEAD\n[... {output.dropped} bytes of output dropped ...]\nhe end"


def test_one_huge_chunk_is_cut_to_the_limits_at_once() -> None:
    output = CappedOutput(head=3, tail=3)
    output.feed(b"a" * 3 + b"b" * 10_000_000 + b"c" * 3)
    assert output.text() == "aaa\n[... 10000000 bytes of output dropped ...]\nccc"


def test_invalid_utf8_in_a_child_output_is_replaced_not_raised() -> None:
    output = CappedOutput(head=2, tail=2)
    output.feed(b"\xff\xfe" + b"x" * 100 + b"\xc3")
    assert output.text().startswith("\ufffd\ufffd") and output.text().endswith("x\ufffd")


_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from runlane_conformance.run.reaper import become_subreaper, descendants, end_descendants, is_subreaper

    assert become_subreaper() and is_subreaper()
    read_end, write_end = os.pipe()
    if os.fork() == 0:                      # a plain child that forks a grandchild, then both sleep
        if os.fork() == 0:
            time.sleep(60); os._exit(0)
        time.sleep(60); os._exit(0)
    if os.fork() == 0:                      # the classic daemon: setsid, fork again, parent leaves
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, str(os.getpid()).encode()); time.sleep(60); os._exit(0)
        os._exit(0)
    daemon = int(os.read(read_end, 32))
    def live():
        return [entry for entry in descendants() if entry.state != "Z"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (
        len(live()) == 3 and any(e.pid == daemon and e.parent == os.getpid() for e in live())
    ):
        time.sleep(0.01)                    # the grandchild forking, the daemon reparenting to us
    before = sorted(entry.pid for entry in live())
    adopted = any(entry.pid == daemon and entry.parent == os.getpid() for entry in live())
    killed = end_descendants()
    print(json.dumps({"daemon": daemon, "before": before, "adopted": adopted, "killed": killed,
                      "after": [entry.pid for entry in descendants()]}))
    """
)


def test_end_descendants_kills_children_grandchildren_and_adopted_setsid_daemons_only(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        assert found["adopted"], "the setsid daemon was not reparented to the subreaper"
        assert found["daemon"] in found["before"] and len(found["before"]) == 3
        assert found["killed"] == 3 and found["after"] == []
        for pid in found["before"]:
            assert not Path(f"/proc/{pid}").exists()
        assert bystander.poll() is None, "a process outside the tree was killed"
    finally:
        bystander.kill()
        bystander.wait()
