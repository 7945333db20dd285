"""A child's output kept in bounded memory: its first and last bytes, and a count of the rest.

A driver can print without limit (a C extension looping on ``fprintf``, a debug
flag left on). The supervisor reads each child's output as it arrives and keeps
it in a ``CappedOutput``: the first ``head`` bytes stay, the last ``tail`` bytes
are kept in a ring, and everything between is only counted. Memory per child is
at most ``head + tail`` plus one read, whatever the child writes; the text shown
for a broken run (the tail is where an error ends up) says how much was dropped.
"""

from __future__ import annotations

from collections import deque

__all__ = ["DEFAULT_HEAD_BYTES", "DEFAULT_TAIL_BYTES", "CappedOutput"]

#: Bytes kept from the start of a child's output (where the driver's start-up messages are).
DEFAULT_HEAD_BYTES = 16 * 1024
#: Bytes kept from the end of it (where a traceback or pytest's error summary is).
DEFAULT_TAIL_BYTES = 48 * 1024


class CappedOutput:
    """The head and tail of a byte stream, with the number of bytes dropped between them."""

    def __init__(self, head: int = DEFAULT_HEAD_BYTES, tail: int = DEFAULT_TAIL_BYTES) -> None:
        if head < 0 or tail < 0:
            raise ValueError("head and tail must not be negative")
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream; keeps memory within the limits whatever their size."""
        if not chunk:
            return
        self.total += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk or self._tail_limit == 0:
            return
        if len(chunk) >= self._tail_limit:
            self._tail.clear()
            self._tail.append(bytes(chunk[-self._tail_limit :]))
            self._tail_size = self._tail_limit
            return
        self._tail.append(bytes(chunk))
        self._tail_size += len(chunk)
        while self._tail_size > self._tail_limit:
            first = self._tail[0]
            excess = self._tail_size - self._tail_limit
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_size -= len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_size -= excess

    @property
    def dropped(self) -> int:
        """Bytes seen but kept neither in the head nor in the tail."""
        return self.total - len(self._head) - self._tail_size

    def text(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced), with a line counting what was dropped."""
        head = bytes(self._head).decode("utf-8", "replace")
        tail = b"".join(self._tail).decode("utf-8", "replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes of output dropped ...]\n{tail}"
