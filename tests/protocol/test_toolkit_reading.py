"""How the toolkit's threads share the backend's stdout: whoever waits reads, and nobody is left waiting.

Stdout has no reader thread of its own: a thread waiting for an answer reads for everyone and
routes what is not its own. These tests hold answers back in a scripted backend, so that the
thread reading gets its own answer while another thread still waits for one, and check that the
other thread takes the reading over instead of waiting for its deadline.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from runlane_conformance.protocol.client import BackendProcess
from runlane_conformance.protocol.errors import BackendTimeoutError

pytestmark = pytest.mark.timeout(300)

#: The deadline of an exchange the backend does answer: starting Python and answering may take seconds
#: on a busy machine, and only a hang may miss it.
ANSWERS = 60.0

# Answers requests in the order they arrive, the second and later ones each ``DELAY`` seconds
# after the one before, once ``EXPECTED`` requests have arrived (so all of them are waiting).
# Requests whose op is ``never`` are never answered.
BACKEND = """
import json, sys, time
expected, delay = int(sys.argv[1]), float(sys.argv[2])
requests = [json.loads(sys.stdin.readline()) for _ in range(expected)]
answered = [request for request in requests if request["op"] != "never"]
for number, request in enumerate(answered):
    if number:
        time.sleep(delay)
    sys.stdout.write(json.dumps({"re": request["id"], "ok": request["op"]}) + "\\n")
    sys.stdout.flush()
sys.stdin.readline()
"""


def _backend(expected: int, delay: float, timeout: float = ANSWERS) -> BackendProcess:
    return BackendProcess(
        [sys.executable, "-c", BACKEND, str(expected), str(delay)], timeout=timeout, max_line_bytes=65536
    )


def test_a_thread_still_waiting_gets_its_answer_after_the_reading_thread_got_its_own() -> None:
    # Four threads wait at once. Whichever reads gets its answer first and stops reading; the
    # answers still owed arrive later, each one to a thread that must have taken the reading over.
    # Without the hand-over they would wait out their deadline and fail with a timeout.
    process = _backend(expected=4, delay=0.1)
    answers: dict[str, object] = {}
    errors: list[BaseException] = []
    all_sent = threading.Barrier(4)

    def ask(op: str) -> None:
        try:
            all_sent.wait(ANSWERS)
            answers[op] = process.request(op, {})
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=ask, args=(f"op{number}",)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(2 * ANSWERS)
    process.close(grace=1.0)
    assert not errors, f"a waiting thread did not get its answer: {errors[0]!r}"
    assert answers == {f"op{number}": f"op{number}" for number in range(4)}


def test_a_thread_whose_answer_never_comes_times_out_while_another_keeps_reading() -> None:
    # One request's answer never comes: the thread waiting for it fails with its 1 s timeout, not a
    # hang, whether or not it was the one reading; the other thread gets its answer (under the
    # generous deadline a busy machine cannot miss).
    process = _backend(expected=2, delay=0.0)
    errors: list[BaseException] = []
    answers: list[object] = []
    both_sent = threading.Barrier(2)

    def ask(op: str) -> None:
        try:
            both_sent.wait(ANSWERS)
            answers.append(process.request(op, {}, timeout=1.0 if op == "never" else ANSWERS))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=ask, args=(op,)) for op in ("answered", "never")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(2 * ANSWERS)
    process.close(grace=1.0)
    assert answers == ["answered"], "the request whose answer came did not get it"
    assert len(errors) == 1 and isinstance(errors[0], BackendTimeoutError)
    assert "within 1s" in str(errors[0])


# Leaves a process of its own (a new session, so the kill of the backend's group misses it)
# holding the backend's stdout open, then reads requests and never answers them.
ORPHANING_BACKEND = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(240)"], start_new_session=True)
for line in sys.stdin:
    pass
"""


def test_a_thread_reading_a_pipe_that_outlives_the_backend_learns_of_the_failure_at_once() -> None:
    # The reading thread waits on a stdout that a leftover process keeps open (for 240 s). When
    # another thread's request times out and the backend is killed, the reader must stop at once
    # with that failure, not at its own deadline (ANSWERS * 3) or when the leftover exits. "At
    # once" is judged with room to spare: within ANSWERS, a third of what waiting would take.
    process = BackendProcess(
        [sys.executable, "-c", ORPHANING_BACKEND], timeout=3 * ANSWERS, max_line_bytes=65536
    )
    errors: list[BaseException] = []

    def read_and_wait() -> None:
        try:
            process.request("open", {})
        except BaseException as error:
            errors.append(error)

    reader = threading.Thread(target=read_and_wait)
    reader.start()
    deadline = time.monotonic() + ANSWERS  # a hang guard only
    while not process._reading.locked():  # the first thread is now polling stdout
        assert time.monotonic() < deadline, "the first request never started reading"
        time.sleep(0.01)
    with pytest.raises(BackendTimeoutError):
        process.request("open", {}, timeout=0.5)
    reader.join(ANSWERS)
    process.close(grace=1.0)
    assert errors, f"the reading thread was still waiting {ANSWERS:.0f} s after the backend was killed"
    assert isinstance(errors[0], BackendTimeoutError), repr(errors[0])
