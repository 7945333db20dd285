"""A request line reaches the backend whole, even when the pipe takes it a piece at a time.

The toolkit writes to the backend's stdin without a buffer, so each ``write`` is one system call.
A signal that arrives while a large line (a record near the byte limit) is half through the pipe
ends that call early with only part of the line written; if the rest were dropped, the backend
would wait for the end of a line that never comes and the check would time out on a correct
driver. These tests make every write short on purpose and check that the whole line arrives.
"""

from __future__ import annotations

import sys
from typing import IO

import pytest

from runlane_conformance.protocol.client import BackendProcess

pytestmark = pytest.mark.timeout(60)

# Answers each request with the length of the line it read.
BACKEND = """
import json, sys
for raw in sys.stdin:
    request = json.loads(raw)
    sys.stdout.write(json.dumps({"re": request["id"], "ok": len(raw)}) + "\\n")
    sys.stdout.flush()
"""


class _ShortWrites:
    """The backend's stdin, taking at most ``piece`` bytes per write as an interrupted call would."""

    def __init__(self, stream: IO[bytes], piece: int) -> None:
        self._stream = stream
        self._piece = piece
        self.calls = 0

    def write(self, data: bytes | memoryview) -> int:
        self.calls += 1
        return self._stream.write(data[: self._piece])

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()


def test_a_large_request_cut_short_by_the_pipe_is_finished_by_more_writes() -> None:
    process = BackendProcess([sys.executable, "-c", BACKEND], timeout=10.0, max_line_bytes=4 << 20)
    try:
        short = _ShortWrites(process._stdin, piece=4096)
        process._stdin = short  # type: ignore[assignment]
        payload = "x" * 300_000
        length = process.request("echo", {"payload": payload})
        assert isinstance(length, int) and length > len(payload)
        assert short.calls > len(payload) // 4096, "the writes were not cut short: the test proves nothing"
        # The next request starts on a fresh line: nothing of the first was left behind or mixed in.
        assert isinstance(process.request("echo", {"payload": "y"}), int)
    finally:
        process.close()
