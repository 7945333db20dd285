"""A loopback TCP proxy that breaks one chosen write of a driver's traffic to its server.

The harness of a network driver names the server address its connections
go to (``proxy_target()``) and opens instances that connect elsewhere
(``connect_through(address)``). The suite puts a ``FaultProxy`` in between,
so faults need nothing from the driver's internals: the driver sees exactly
what a real network failure would show it.

How a write is counted. Per connection, a new write begins with the first
bytes the client sends after the server last sent something (or after the
connection opened). For request/response protocols (PostgreSQL, Redis, also
with pipelining) that is one request flight however the kernel splits it, so
the numbering depends only on what the driver does, not on timing.

How a break is delivered. A broken connection is closed towards the server
first, gracefully (the server reads what it was sent, then end-of-file),
and the proxy waits, bounded, until the server has closed its side; only
then is the client's side reset. So by the time the driver learns of the
failure, the server has finished with the request (``LOSE_REPLY``: it
processed it and answered into the void; ``CUT``: it never saw it) and has
dropped the connection, which makes every outcome reproducible.

Safety. The proxy listens on 127.0.0.1 only, forwards only to a loopback
target, and stops by itself after ``lifetime`` seconds (or on ``close()``);
it runs one asyncio loop on one daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from types import TracebackType

from ..contract.errors import RunlaneError
from .plan import ArmedSwitch, Fault, FaultKind

__all__ = ["FaultProxy", "FaultProxyError"]

_CHUNK = 65536
#: How long a broken connection waits for the server to close its side before the client is reset.
_DRAIN_TIMEOUT = 10.0
_CONNECT_TIMEOUT = 5.0


class FaultProxyError(RunlaneError, ValueError):
    """The proxy was given a target it will not forward to, or could not start."""


def _loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


class _Link:
    """One client connection and its upstream twin."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.new_write = True  # the next client bytes start a new write
        self.broken = False
        self.lose_reply = False
        self.fault: Fault | None = None


class FaultProxy(ArmedSwitch):
    """Forwards loopback connections to ``target`` and breaks the write the armed ``Fault`` names.

    Use as a context manager, or call ``close()``. ``address`` is where the
    driver should connect instead of ``target``. Implements ``FaultSwitch``.
    """

    def __init__(self, target: tuple[str, int], *, lifetime: float = 600.0) -> None:
        host, port = target
        if not isinstance(port, int) or not 0 < port < 65536:
            raise FaultProxyError(f"fault proxy target port {port!r} is not a TCP port")
        if not _loopback(host):
            raise FaultProxyError(f"fault proxy forwards only to loopback addresses, not {host!r}")
        super().__init__()
        self.target = (host, port)
        self._refusing = False
        self._closed = False
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="runlane-fault-proxy", daemon=True
        )
        self._thread.start()
        try:
            self._server = asyncio.run_coroutine_threadsafe(
                asyncio.start_server(self._accept, "127.0.0.1", 0), self._loop
            ).result(_CONNECT_TIMEOUT)
        except Exception as error:
            self._stop_loop()
            raise FaultProxyError(f"fault proxy could not listen on 127.0.0.1: {error}") from error
        sockname = self._server.sockets[0].getsockname()
        self.address: tuple[str, int] = ("127.0.0.1", int(sockname[1]))
        self._loop.call_soon_threadsafe(self._loop.call_later, lifetime, self._expire)

    # -- the FaultSwitch side ---------------------------------------------------------------------

    def _on_arm(self) -> None:
        self._refusing = False

    # -- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening, reset every connection and stop the proxy's thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(_CONNECT_TIMEOUT)
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_CONNECT_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        self._server.close()
        for link in list(self._links):
            self._reset(link)
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await asyncio.gather(*others, return_exceptions=True)
                await self._server.wait_closed()

    def _expire(self) -> None:
        """The lifetime is over: behave as closed (the owner may still call ``close()``)."""
        with self._lock:
            self._closed = True
        self._server.close()
        for link in list(self._links):
            self._reset(link)

    # -- forwarding -------------------------------------------------------------------------------

    def _reset(self, link: _Link) -> None:
        link.broken = True
        for writer in (link.client, link.upstream):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.transport.abort()
        self._links.discard(link)

    def _decide(self) -> Fault | None:
        """Count one new write; return the fault to apply to it, if any."""
        with self._lock:
            if not self._armed:
                return None
            self._writes += 1
            fault = self._fault
            if fault is None or self._writes != fault.at:
                return None
            self._fired = True
            if fault.kind is FaultKind.REFUSE:
                self._refusing = True
            return fault

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            refuse = self._closed or self._refusing
        link = _Link(writer)
        if refuse:
            self._reset(link)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.target), _CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError):
            self._reset(link)
            return
        link.upstream = up_writer
        self._links.add(link)
        with contextlib.suppress(asyncio.CancelledError):  # shutting down: reset below either way
            await asyncio.gather(
                self._client_to_server(link, reader, up_writer),
                self._server_to_client(link, up_reader, writer),
                return_exceptions=True,
            )
        self._reset(link)

    async def _break(self, link: _Link, up_reader: asyncio.StreamReader | None = None) -> None:
        """Close towards the server gracefully, wait (bounded) for it to hang up, then reset the client."""
        link.broken = True
        upstream = link.upstream
        if upstream is not None:
            with contextlib.suppress(Exception):
                upstream.write_eof()
            if up_reader is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(_DRAIN_TIMEOUT):
                        while await up_reader.read(_CHUNK):
                            pass
        self._reset(link)

    async def _client_to_server(
        self, link: _Link, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter
    ) -> None:
        while not link.broken:
            data = await reader.read(_CHUNK)
            if not data:
                with contextlib.suppress(Exception):
                    upstream.write_eof()
                return
            if link.new_write:
                link.new_write = False
                fault = self._decide()
                if fault is not None:
                    link.fault = fault
                    if fault.kind is FaultKind.CUT:
                        self._fire_callback(fault)  # before the write reaches the server
                        link.broken = True  # the server-side pump drains and resets
                        with contextlib.suppress(Exception):
                            upstream.write_eof()
                        return
                    if fault.kind in (FaultKind.LOSE_REPLY, FaultKind.REFUSE):
                        link.lose_reply = True
                    elif fault.kind is FaultKind.DELAY:
                        await asyncio.sleep(fault.delay)
            upstream.write(data)
            await upstream.drain()

    async def _server_to_client(
        self, link: _Link, up_reader: asyncio.StreamReader, client: asyncio.StreamWriter
    ) -> None:
        while True:
            data = await up_reader.read(_CHUNK)
            if link.lose_reply and link.fault is not None and data:
                fault, link.fault = link.fault, None
                self._fire_callback(fault)  # the server answered the write: it was processed
            if link.broken or link.lose_reply:
                # A cut (the client pump stopped forwarding) or the first bytes of a reply to drop:
                # let the server finish and hang up, then break the client's connection.
                await self._break(link, up_reader if data else None)
                return
            if not data:
                with contextlib.suppress(Exception):
                    client.write_eof()
                return
            link.new_write = True
            client.write(data)
            await client.drain()
