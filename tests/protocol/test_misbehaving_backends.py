"""The protocol test kit: a backend that breaks the protocol fails clearly, never hangs and never passes.

Each scenario runs ``scripted_backend.py``, which behaves until the step it is
scripted to break. The toolkit must then raise a one-line ``BackendError``
naming what went wrong, within a bounded time, and every later call on that
backend must fail too (so nothing after the breakage can count as a pass).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runlane_conformance.contract.errors import StorageConflictError, StorageCorruptionError
from runlane_conformance.harness import DriverLoadError
from runlane_conformance.protocol.client import BackendProcess
from runlane_conformance.protocol.errors import (
    BackendError,
    BackendExitedError,
    BackendProtocolError,
    BackendTimeoutError,
)
from runlane_conformance.protocol.process import ProcessHarness

SCRIPT = Path(__file__).with_name("scripted_backend.py")
pytestmark = pytest.mark.timeout(120)
#: The deadline of every exchange a scenario answers: starting Python and answering may take seconds on
#: a busy machine, and only a hang may miss it. Where a test is about a deadline, it sets its own.
ANSWERS = 60.0


def command(scenario: str) -> str:
    return f"{sys.executable} {SCRIPT} {scenario}"


def backend(scenario: str, *, timeout: float = ANSWERS, max_line_bytes: int = 65536) -> BackendProcess:
    process = BackendProcess(
        [sys.executable, str(SCRIPT), scenario], timeout=timeout, max_line_bytes=max_line_bytes
    )
    process.request("hello", {"protocol": [1]})
    return process


def assert_poisoned(process: BackendProcess, error_type: type[BackendError], *needles: str) -> None:
    """The failure is one line naming the problem, and every later request fails the same way."""
    for _ in range(2):
        with pytest.raises(error_type) as caught:
            process.request("connect", {"store": "s1", "clock": False})
        message = str(caught.value)
        assert "\n" not in message
        for needle in needles:
            assert needle in message
    process.close(grace=1.0)


@pytest.mark.parametrize(
    ("scenario", "error_type", "needle"),
    [
        ("wrong-id", BackendProtocolError, "not waiting for an answer"),
        ("unknown-error-kind", BackendProtocolError, "'teapot', which the contract does not know"),
        ("invalid-utf8", BackendProtocolError, "not UTF-8"),
        ("stdout-pollution", BackendProtocolError, "connecting to the database"),
        ("neither-ok-nor-error", BackendProtocolError, "neither exactly ok nor error"),
        ("not-an-object", BackendProtocolError, "not a JSON object"),
        ("limit-without-details", BackendProtocolError, "without a valid limit"),
        ("exits", BackendExitedError, "code 3"),
    ],
)
def test_a_broken_answer_fails_that_request_and_every_later_one(
    scenario: str, error_type: type[BackendError], needle: str
) -> None:
    process = backend(scenario)
    with pytest.raises(error_type) as caught:
        process.request("open", {})
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)
    assert_poisoned(process, error_type, needle)


def test_a_backend_that_exits_is_reported_with_its_stderr_cleaned_and_its_credentials_hidden() -> None:
    argv = [sys.executable, str(SCRIPT), "exits", "postgres://runlane:hunter2secret@db.example/test"]
    process = BackendProcess(argv, timeout=ANSWERS, max_line_bytes=65536)
    process.request("hello", {"protocol": [1]})
    with pytest.raises(BackendExitedError) as caught:
        process.request("open", {})
    message = str(caught.value)
    assert "fatal: the storage engine could not start" in message, "the backend's stderr is not shown"
    assert "\x1b" not in message, "escape sequences from the backend's stderr reached the message"
    assert "hunter2secret" not in message, "a password in the backend's command line was shown"


def test_a_second_answer_to_one_request_poisons_the_backend() -> None:
    process = backend("duplicate-answer")
    assert process.request("open", {}) == {"store": "s1", "address": None}
    # The duplicate is read before any later answer, so the very next exchange reports it.
    assert_poisoned(process, BackendProtocolError, "a second answer")


def test_a_line_longer_than_the_limit_is_refused_without_reading_it_all() -> None:
    process = backend("huge-line", max_line_bytes=4096)
    with pytest.raises(BackendProtocolError, match="longer than 4096 bytes"):
        process.request("open", {})
    assert_poisoned(process, BackendProtocolError, "longer than 4096 bytes")


def test_an_answer_after_the_timeout_is_never_taken_for_a_later_request() -> None:
    # The backend started and said hello under the generous deadline; only 'open' gets one second, and
    # its answer comes only after the toolkit moved on (so it is late however slow the machine is).
    process = backend("late-answer")
    with pytest.raises(BackendTimeoutError, match="no answer to 'open' within 1s"):
        process.request("open", {}, timeout=1.0)
    # The late answer would carry the old id; the backend is already done for.
    assert_poisoned(process, BackendTimeoutError, "no answer to 'open'")


def test_a_backend_that_never_says_hello_fails_loading_in_one_line() -> None:
    # The backend stays silent for 30 s and then exits: a load that waited for it would fail naming
    # the exit, not the one-second deadline.
    with pytest.raises(DriverLoadError) as caught:
        ProcessHarness(command("silent-hello"), timeout=1.0)
    assert "no answer to 'hello' within 1s" in str(caught.value) and "\n" not in str(caught.value)


def test_a_backend_speaking_another_protocol_version_is_refused() -> None:
    with pytest.raises(DriverLoadError, match="speaks protocol 2; this toolkit speaks 1"):
        ProcessHarness(command("wrong-protocol"), timeout=ANSWERS)


def test_a_command_that_does_not_exist_fails_loading_in_one_line() -> None:
    with pytest.raises(DriverLoadError, match="could not start backend"):
        ProcessHarness("/nonexistent/runlane-backend --serve", timeout=ANSWERS)


def _transaction_harness(scenario: str) -> ProcessHarness:
    return ProcessHarness(command(scenario), timeout=ANSWERS)


def test_an_attempt_for_a_transaction_that_is_not_running_fails_the_transaction() -> None:
    harness = _transaction_harness("attempt-for-unknown-transaction")
    driver = harness.open_store().connect()
    ran: list[object] = []
    with pytest.raises(BackendProtocolError, match="which is not running"):
        driver.transaction(ran.append)
    assert ran == [], "a callback ran for an attempt of another transaction"
    harness.close()


def test_committing_an_attempt_that_never_ran_is_a_protocol_error_not_a_value() -> None:
    harness = _transaction_harness("commits-unknown-attempt")
    driver = harness.open_store().connect()
    with pytest.raises(BackendProtocolError, match="'a999', which is not an attempt whose callback returned"):
        driver.transaction(lambda tx: "value")
    harness.close()


def test_blaming_an_attempt_whose_callback_returned_is_a_protocol_error() -> None:
    harness = _transaction_harness("blames-innocent-attempt")
    driver = harness.open_store().connect()
    with pytest.raises(BackendProtocolError, match="that attempt's callback did not raise"):
        driver.transaction(lambda tx: "value")
    harness.close()


def test_a_well_behaved_transaction_returns_the_committed_attempts_value() -> None:
    harness = _transaction_harness("well-behaved")
    driver = harness.open_store().connect()
    assert driver.transaction(lambda tx: tx.get([])) == []
    harness.close()


def test_a_callback_error_comes_back_as_the_same_object() -> None:
    harness = _transaction_harness("well-behaved")
    driver = harness.open_store().connect()
    raised = StorageConflictError("raised by the callback itself")

    def callback(tx: object) -> None:
        raise raised

    with pytest.raises(StorageConflictError) as caught:
        driver.transaction(callback)
    assert caught.value is raised
    harness.close()


def test_a_record_with_no_contract_form_is_corruption() -> None:
    from runlane_conformance.contract.values import StorageRecordKey

    harness = _transaction_harness("corrupt-record")
    driver = harness.open_store().connect()
    with pytest.raises(StorageCorruptionError, match="invalid stored record"):
        driver.transaction(lambda tx: tx.get([StorageRecordKey("leases", ("e", "k"))]))
    harness.close()


def test_a_backend_failure_while_a_store_is_open_fails_closing_it_and_a_new_store_gets_a_new_backend() -> (
    None
):
    harness = _transaction_harness("well-behaved")
    store = harness.open_store()
    first = harness.backend()
    first.fail(BackendProtocolError, "simulated breakage")
    with pytest.raises(BackendProtocolError, match="simulated breakage"):
        store.close()
    harness.open_store().close()
    assert harness.backend() is not first
    harness.close()
