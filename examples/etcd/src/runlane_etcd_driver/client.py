"""etcd's JSON gateway through etcd3gw: one client per member per thread, reads moved between members.

etcd3gw (OpenStack's client for etcd's v3 JSON gateway) is a thin layer over
``requests``: it builds the URL, posts the JSON and maps the HTTP status to an
exception. This module uses only its ``post()`` and ``get_url()``, so every
request is one explicit HTTP call: nothing is resent behind the driver's back
(``requests`` does not retry a request whose connection broke).

``EtcdEndpoints`` keeps the member list. ``read()`` is for requests that
change nothing (or whose repetition is harmless): on a member that does not
answer, it moves on to the next member and tries again. ``write()`` sends
once, to the current member, and reports any failure to the caller, which
decides what an unanswered write means.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import requests
from etcd3gw.client import Etcd3Client
from etcd3gw.exceptions import (
    ConnectionFailedError,
    ConnectionTimeoutError,
    Etcd3Exception,
    InternalServerError,
)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "REPLY_TIMEOUT_S",
    "EndpointError",
    "EtcdEndpoints",
    "b64",
    "unb64",
]

#: Seconds to open a TCP connection to a member (loopback or LAN: a member that does not accept is down).
CONNECT_TIMEOUT_S = 3.0
#: Seconds to wait for a reply: above etcd's own proposal timeout (5 s plus two election timeouts of 1 s),
#: so a member that is alive answers (if only with an error) before the driver gives up on it.
REPLY_TIMEOUT_S = 8.0
#: The exceptions that mean the member did not answer, or answered that the cluster could not serve.
UNANSWERED = (ConnectionFailedError, ConnectionTimeoutError, InternalServerError, requests.RequestException)


class EndpointError(Exception):
    """A request failed; ``answered`` is False when no reply (or only a server-side failure) came back."""

    def __init__(self, message: str, *, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(part) for part in error.args) if error.args else str(error)
    return " ".join(text.split()) or type(error).__name__


def parse_endpoints(text: str) -> tuple[tuple[str, int], ...]:
    """``http://host:port,http://host:port`` -> ``((host, port), ...)``; ValueError on a malformed one."""
    found = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        parts = urlsplit(entry if "://" in entry else f"http://{entry}")
        if parts.scheme != "http" or not parts.hostname or parts.port is None or parts.path not in ("", "/"):
            raise ValueError(f"{entry!r} is not http://host:port")
        found.append((parts.hostname, parts.port))
    if not found:
        raise ValueError("no endpoint given")
    return tuple(found)


class EtcdEndpoints:
    """The members one driver instance talks to, and which one it talks to now."""

    def __init__(self, endpoints: Sequence[tuple[str, int]]) -> None:
        self.endpoints = tuple(endpoints)
        self._current = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        self._sessions: list[requests.Session] = []

    def _client(self, index: int) -> Etcd3Client:
        clients: dict[int, Etcd3Client] | None = getattr(self._local, "clients", None)
        if clients is None:
            clients = self._local.clients = {}
        client = clients.get(index)
        if client is None:
            host, port = self.endpoints[index]
            session = requests.Session()
            with self._lock:
                self._sessions.append(session)
            client = clients[index] = Etcd3Client(
                host,
                port,
                # requests takes (connect, read); etcd3gw passes it on but types it as one number
                timeout=(CONNECT_TIMEOUT_S, REPLY_TIMEOUT_S),  # type: ignore[arg-type]
                api_path="/v3/",
                session=session,
            )
        return client

    def _post(self, index: int, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        client = self._client(index)
        try:
            reply: dict[str, Any] = client.post(client.get_url(path), json=body)
        except UNANSWERED as error:
            raise EndpointError(f"{self.describe(index)}: {_one_line(error)}", answered=False) from error
        except Etcd3Exception as error:
            raise EndpointError(f"{self.describe(index)}: {_one_line(error)}", answered=True) from error
        except ValueError as error:  # a reply that is not JSON: cut off mid-body
            raise EndpointError(
                f"{self.describe(index)}: unreadable reply: {error}", answered=False
            ) from error
        return reply

    def describe(self, index: int) -> str:
        host, port = self.endpoints[index]
        return f"etcd member {host}:{port}"

    def _move_on(self, failed: int) -> None:
        with self._lock:
            if self._current == failed:
                self._current = (failed + 1) % len(self.endpoints)

    def read(self, path: str, body: Mapping[str, Any], *, tries: int = 0) -> dict[str, Any]:
        """A request safe to repeat: each member in turn until one answers; the last failure otherwise.

        ``tries`` (default: one per member) may ask for more, each on a new connection.
        """
        last: EndpointError | None = None
        for _try in range(max(tries, len(self.endpoints))):
            index = self._current
            try:
                return self._post(index, path, body)
            except EndpointError as error:
                if error.answered:
                    raise
                last = error
                self._move_on(index)
        assert last is not None
        raise last

    def write(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A request sent once, to the current member; on failure the next call goes to the next member."""
        index = self._current
        try:
            return self._post(index, path, body)
        except EndpointError as error:
            if not error.answered:
                self._move_on(index)
            raise

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()
