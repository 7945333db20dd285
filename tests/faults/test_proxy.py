"""The fault proxy and its in-process twin break exactly the write they are armed for, and nothing else."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from runlane_conformance.faults import (
    Fault,
    FaultInjector,
    FaultKind,
    FaultProxy,
    FaultProxyError,
    InjectedFault,
)

TIMEOUT = 10.0


class _LineServer(socketserver.ThreadingTCPServer):
    """Answers every line ``x`` with ``ok:x``; remembers every line it received, in order."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _LineHandler)
        self.received: list[str] = []
        self.lock = threading.Lock()


class _LineHandler(socketserver.StreamRequestHandler):
    server: _LineServer

    def handle(self) -> None:
        for raw in self.rfile:
            line = raw.decode().rstrip("\n")
            with self.server.lock:
                self.server.received.append(line)
            self.wfile.write(f"ok:{line}\n".encode())
            self.wfile.flush()


@pytest.fixture
def server() -> Iterator[_LineServer]:
    made = _LineServer()
    thread = threading.Thread(target=made.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield made
    made.shutdown()
    made.server_close()
    thread.join(TIMEOUT)


@pytest.fixture
def proxy(server: _LineServer) -> Iterator[FaultProxy]:
    with FaultProxy(server.server_address[:2]) as made:  # type: ignore[arg-type]
        yield made


class _Client:
    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=TIMEOUT)
        self.reader = self.sock.makefile("rb")

    def ask(self, *parts: str) -> str:
        """Send ``parts`` (one request, possibly in several sends) and read the one-line answer."""
        for part in parts:
            self.sock.sendall(part.encode())
        answer = self.reader.readline()
        if not answer:
            raise ConnectionError("closed")
        return answer.decode().rstrip("\n")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def test_traffic_passes_unchanged_and_each_request_flight_counts_as_one_write(
    server: _LineServer, proxy: FaultProxy
) -> None:
    proxy.arm(None)
    client = _Client(proxy.address)
    try:
        assert client.ask("a", "b", "c\n") == "ok:abc"  # three sends before the answer: one write
        assert client.ask("d\n") == "ok:d"
    finally:
        client.close()
    assert proxy.writes == 2 and not proxy.fired
    assert server.received == ["abc", "d"]


def test_writes_are_counted_across_connections_and_only_while_armed(proxy: FaultProxy) -> None:
    first = _Client(proxy.address)
    first.ask("before\n")
    proxy.arm(None)
    second = _Client(proxy.address)
    try:
        first.ask("x\n")
        second.ask("y\n")
        first.ask("z\n")
    finally:
        first.close()
        second.close()
    assert proxy.writes == 3


def test_a_cut_write_never_reaches_the_server_and_the_client_sees_a_broken_connection(
    server: _LineServer, proxy: FaultProxy
) -> None:
    proxy.arm(Fault(FaultKind.CUT, 2))
    client = _Client(proxy.address)
    try:
        assert client.ask("one\n") == "ok:one"
        with pytest.raises(OSError):
            client.ask("two\n")
    finally:
        client.close()
    assert proxy.fired
    assert server.received == ["one"]


def test_a_lost_reply_was_processed_by_the_server_but_never_reaches_the_client(
    server: _LineServer, proxy: FaultProxy
) -> None:
    proxy.arm(Fault(FaultKind.LOSE_REPLY, 1))
    client = _Client(proxy.address)
    try:
        with pytest.raises(OSError):
            client.ask("commit\n")
    finally:
        client.close()
    assert proxy.fired
    assert server.received == ["commit"], "the server must have processed the request before the cut"


def test_refuse_loses_the_reply_then_refuses_every_new_connection_until_disarmed(
    server: _LineServer, proxy: FaultProxy
) -> None:
    proxy.arm(Fault(FaultKind.REFUSE, 1))
    client = _Client(proxy.address)
    with pytest.raises(OSError):
        client.ask("processed\n")
    client.close()
    again = _Client(proxy.address)
    with pytest.raises(OSError):
        again.ask("refused\n")
    again.close()
    proxy.disarm()
    after = _Client(proxy.address)
    try:
        assert after.ask("back\n") == "ok:back"
    finally:
        after.close()
    assert server.received == ["processed", "back"]


def test_a_delayed_write_is_delivered_and_answered(server: _LineServer, proxy: FaultProxy) -> None:
    proxy.arm(Fault(FaultKind.DELAY, 1, delay=0.01))
    client = _Client(proxy.address)
    try:
        assert client.ask("slow\n") == "ok:slow"
    finally:
        client.close()
    assert proxy.fired and server.received == ["slow"]


def test_other_writes_and_connections_are_untouched_by_a_fault(
    server: _LineServer, proxy: FaultProxy
) -> None:
    proxy.arm(Fault(FaultKind.CUT, 2))
    bystander = _Client(proxy.address)
    victim = _Client(proxy.address)
    try:
        assert bystander.ask("a\n") == "ok:a"
        with pytest.raises(OSError):
            victim.ask("b\n")
        assert bystander.ask("c\n") == "ok:c"
    finally:
        bystander.close()
        victim.close()
    assert server.received == ["a", "c"]


def test_the_proxy_forwards_only_to_loopback_and_stops_by_itself() -> None:
    with pytest.raises(FaultProxyError, match="loopback"):
        FaultProxy(("192.0.2.1", 5432))
    with pytest.raises(FaultProxyError, match="port"):
        FaultProxy(("127.0.0.1", 0))
    expired = FaultProxy(("127.0.0.1", 9), lifetime=0)
    try:
        client = _Client(expired.address)  # the listener may accept before it notices; it never answers
        with pytest.raises(OSError):
            client.ask("x\n")
        client.close()
    except OSError:
        pass
    finally:
        expired.close()
    expired.close()  # idempotent


def test_fault_values_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        Fault(FaultKind.CUT, 0)
    with pytest.raises(ValueError):
        Fault(FaultKind.DELAY, 1, delay=60)
    assert "write 3" in Fault(FaultKind.LOSE_REPLY, 3).describe()


# -- the in-process injector -----------------------------------------------------------------------


def test_the_injector_runs_actions_unchanged_and_counts_only_while_armed() -> None:
    injector = FaultInjector()
    assert injector.round_trip(lambda: 1) == 1
    injector.arm(None)
    assert [injector.round_trip(list(range(n)).__len__) for n in range(3)] == [0, 1, 2]
    assert injector.writes == 3 and not injector.fired


@pytest.mark.parametrize(
    ("kind", "ran", "raises"),
    [
        (FaultKind.CUT, False, True),
        (FaultKind.LOSE_REPLY, True, True),
        (FaultKind.DELAY, True, False),
        (FaultKind.REFUSE, True, True),
    ],
)
def test_the_injector_breaks_exactly_the_named_round_trip(kind: FaultKind, ran: bool, raises: bool) -> None:
    injector = FaultInjector()
    injector.arm(Fault(kind, 2, delay=0.0))
    done: list[int] = []
    injector.round_trip(lambda: done.append(1))
    if raises:
        with pytest.raises(InjectedFault):
            injector.round_trip(lambda: done.append(2))
    else:
        injector.round_trip(lambda: done.append(2))
    assert (2 in done) is ran and injector.fired
    if kind is FaultKind.REFUSE:
        with pytest.raises(InjectedFault):
            injector.round_trip(lambda: done.append(3))
        injector.disarm()
    injector.round_trip(lambda: done.append(4))
    assert 4 in done and 3 not in done
