"""The harness behind the ``redis`` entry point: one fresh key prefix per store.

Options (``--runlane-option key=value``):

* ``url``: the server and database (default ``redis://127.0.0.1:6379/0``); on a
  cluster, any one node (database 0), from which the others are discovered;
* ``cluster``: ``off`` (default: a standalone server, ``redis.Redis``) or
  ``single-slot`` (a Redis Cluster through ``redis.cluster.RedisCluster``,
  every key of a store in one hash slot). Any other topology is refused
  with the reason: see ``CLUSTER_TOPOLOGIES``;
* ``nodes``: on a cluster, more nodes to learn the topology from when the
  URL's node is down (``host:port,host:port``);
* ``replicas``: on a cluster, how many replicas must hold a commit before it is acknowledged (``WAIT``;
  default 0); fewer in time is ``StorageCommitUnknownError``;
* ``control``: on a cluster, the directory ``scripts/cluster up`` wrote; the stores then declare the
  cluster (``cluster()``) so the ``cluster_faults`` area may kill and restart its nodes;
* ``max_transaction_attempts``: how many lost attempts before ``StorageConflictError`` (default 32);
* ``exclusive_hold_ms``: how long an exclusive hold survives an owner that never releases it (a
  crashed process), in milliseconds (default 60000);
* the five limits (``max_point_reads``, ``max_query_results``,
  ``max_transaction_records``, ``max_record_bytes``, ``max_transaction_bytes``):
  each replaces that one default; together they must stay coherent.

``open_store()`` picks the prefix ``{runlane:<uuid>}:`` (nothing is written
until the first commit); closing the store deletes every key under it with
``SCAN`` + ``UNLINK``. ``address()`` is ``(url, prefix)``, which a child
process hands to ``attach()`` to open instances on the same store.

Fault injection: a store names the server its instances talk to
(``proxy_target()``: the URL's host and port, or on a cluster the primary
serving the store's slot) and opens instances whose connections all go to
another address (``connect_through(address)``; on a cluster the client maps
that primary's address to the proxy's), so the ``faults`` suite can put its
loopback proxy in between.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.exceptions import RedisClusterException

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    Clock,
    StorageLimits,
    positive_int_option,
    storage_limits_from_options,
)

from .driver import Client, RedisStorageDriver, cluster_nodes

if TYPE_CHECKING:
    from .control import RedisDeclaredCluster

__all__ = [
    "CLUSTER_TOPOLOGIES",
    "DEFAULT_URL",
    "MULTI_SLOT_REFUSAL",
    "RedisHarness",
    "RedisOptionError",
    "RedisStoreHandle",
    "cluster_option",
    "delete_prefix",
    "harness",
    "new_prefix",
    "nodes_option",
    "probe",
]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
_OPTIONS = (
    "url",
    "cluster",
    "nodes",
    "max_transaction_attempts",
    "exclusive_hold_ms",
    "replicas",
    "control",
    *STORAGE_LIMIT_OPTIONS,
)
#: The values of the ``cluster`` option this driver accepts: a standalone server, or one slot per store.
CLUSTER_TOPOLOGIES = ("off", "single-slot")
#: Why a store cannot be spread over a cluster's slots (the refusal of any other ``cluster`` value).
MULTI_SLOT_REFUSAL = (
    "a Runlane transaction may touch any key of its store, and Redis Cluster runs a multi-key "
    "MULTI/EXEC (or script) only when every key is in one hash slot, so a store spread over slots "
    "could not commit atomically. Use cluster=single-slot: every key of a store shares one hash tag, "
    "so one slot on one primary (atomic, but that store gets no sharding; different stores land on "
    "different slots)"
)
_SCAN_BATCH = 1000
#: With ``replicas=N``: how long a commit waits for its replicas before it is reported as unknown (ms).
REPLICA_WAIT_MS = 2000


class RedisOptionError(ValueError):
    """A bad ``--runlane-option`` or address; the message is one line for the user."""


def probe(
    url: str, timeout: float = 3.0, *, cluster: bool = False, nodes: Sequence[tuple[str, int]] = ()
) -> str | None:
    """``None`` when the server at ``url`` (with ``cluster``: the cluster) answers ``PING``; else why not."""
    try:
        client: Any
        if cluster:
            client = RedisCluster.from_url(
                url,
                startup_nodes=cluster_nodes(nodes),
                socket_connect_timeout=timeout,
                socket_timeout=timeout,
            )
        else:
            client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, RedisClusterException, ValueError, OSError) as error:
        return " ".join(str(error).split()) or type(error).__name__
    return None


def new_prefix() -> str:
    """A fresh store prefix; the braces make it the Redis Cluster hash tag of every key under it."""
    return f"{{runlane:{uuid.uuid4().hex}}}:"


def _is_prefix(text: str) -> bool:
    if not (text.startswith("{runlane:") and text.endswith("}:")):
        return False
    ident = text[len("{runlane:") : -2]
    return len(ident) == 32 and all(char in "0123456789abcdef" for char in ident)


def delete_prefix(client: Client, prefix: str) -> int:
    """Delete every key that starts with ``prefix`` (SCAN + UNLINK); returns how many went."""
    if not _is_prefix(prefix):  # never let a malformed prefix turn into a wide pattern
        raise RedisOptionError(f"{prefix!r} is not a runlane store prefix")
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}*", count=_SCAN_BATCH):
        batch.append(key)
        if len(batch) >= _SCAN_BATCH:
            deleted += int(client.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(client.unlink(*batch))
    return deleted


class RedisStoreHandle:
    """One key prefix; ``connect()`` opens independent instances (each its own client) on it."""

    def __init__(self, harness: RedisHarness, prefix: str, *, owned: bool) -> None:
        self._harness = harness
        self.prefix = prefix
        self._owned = owned
        self._drivers: list[RedisStorageDriver] = []
        self._closed = False

    def connect(self, *, clock: Clock | None = None) -> RedisStorageDriver:
        return self._open(self._harness.url, clock)

    def proxy_target(self) -> tuple[str, int]:
        """The ``(host, port)`` the faults suite's proxy stands in for.

        Standalone: the server in the URL. Cluster: the primary that serves
        this store's slot now (every command of the store goes there).
        """
        if self._harness.cluster:
            return self.slot_primary()  # asked now: a failover may have moved the slot
        parts = urlsplit(self._harness.url)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise RedisOptionError(
                f"redis url {self._harness.url!r} names no TCP host, so faults cannot be proxied"
            )
        return parts.hostname, parts.port or 6379

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> RedisStorageDriver:
        """An instance on this store whose connections all go to ``address`` instead of the server."""
        host, port = address
        if self._harness.cluster:
            target = self.proxy_target()

            def remap(node: tuple[str, int]) -> tuple[str, int]:
                return (host, port) if (node[0], int(node[1])) == target else node

            return self._open(self._harness.url, clock, address_remap=remap)
        parts = urlsplit(self._harness.url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
        return self._open(urlunsplit(parts._replace(netloc=netloc)), clock)

    def _open(self, url: str, clock: Clock | None, *, address_remap: Any = None) -> RedisStorageDriver:
        if self._closed:
            raise RedisOptionError(f"the store {self.prefix} was closed")
        harness = self._harness
        driver = harness.driver_class(
            url,
            self.prefix,
            clock=clock,
            limits=harness.limits,
            max_transaction_attempts=harness.max_transaction_attempts,
            hold_ms=harness.exclusive_hold_ms,
            **(
                {
                    "cluster": True,
                    "address_remap": address_remap,
                    "startup_nodes": harness.nodes,
                    "wait_replicas": (harness.replicas, REPLICA_WAIT_MS),
                }
                if harness.cluster
                else {}
            ),
        )
        self._drivers.append(driver)
        return driver

    def slot_primary(self) -> tuple[str, int]:
        """The ``(host, port)`` of the node serving this store's slot, as the cluster says now."""
        admin = self._harness._admin_client()
        admin.nodes_manager.initialize()
        node = admin.get_node_from_key(self.prefix)
        return str(node.host), int(node.port)

    def address(self) -> tuple[str, str]:
        """``(url, prefix)``: enough for another process to reach the same store."""
        return (self._harness.url, self.prefix)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in self._drivers:
            driver.close()
        self._drivers.clear()
        if self._owned:
            self._harness._drop(self)


class ControlledRedisStoreHandle(RedisStoreHandle):
    """A store on a cluster whose nodes this harness may kill and restart (``--option control=DIR``)."""

    def cluster(self) -> RedisDeclaredCluster:
        """The cluster this store lives on, for the suite's ``cluster_faults`` area."""
        from .control import RedisDeclaredCluster  # imported late: `python -m ...cluster` runs that module

        control = self._harness.control
        assert control is not None
        return RedisDeclaredCluster(control, self.slot_primary)


class RedisHarness:
    """Opens stores as fresh key prefixes in one Redis database, and deletes them when they close."""

    #: The driver class the stores' instances are made of.
    driver_class: type[RedisStorageDriver] = RedisStorageDriver

    def __init__(
        self,
        *,
        url: str = DEFAULT_URL,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_hold_ms: int = 60_000,
        cluster: bool = False,
        nodes: Sequence[tuple[str, int]] = (),
        replicas: int = 0,
        control: Path | None = None,
    ) -> None:
        self.url = url
        #: On a cluster: how many replicas must hold a commit before it is acknowledged (``WAIT``).
        self.replicas = replicas
        #: On a cluster: the directory of ``scripts/cluster up``, whose nodes the stores may declare.
        self.control = control
        #: On a cluster: more nodes (besides the URL's) a client may learn the topology from.
        self.nodes = tuple(nodes)
        #: True on a Redis Cluster (single-slot topology): instances use ``RedisCluster``.
        self.cluster = cluster
        self.limits = limits
        self.max_transaction_attempts = max_transaction_attempts
        self.exclusive_hold_ms = exclusive_hold_ms
        self._admin: Client | None = None
        self._lock = threading.Lock()
        self._open: list[RedisStoreHandle] = []

    def _admin_client(self) -> Client:
        if self._admin is None:
            if self.cluster:
                self._admin = RedisCluster.from_url(
                    self.url,
                    startup_nodes=cluster_nodes(self.nodes),
                    socket_connect_timeout=5,
                    socket_timeout=30,
                    reinitialize_steps=1,
                )
            else:
                self._admin = redis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=30)
        return self._admin

    def open_store(self) -> RedisStoreHandle:
        kind = RedisStoreHandle if self.control is None else ControlledRedisStoreHandle
        handle = kind(self, new_prefix(), owned=True)
        with self._lock:
            self._open.append(handle)
        return handle

    def attach(self, address: object) -> RedisStoreHandle:
        """A handle on an existing store from ``address()``; closing it keeps the keys."""
        if (
            not isinstance(address, (tuple, list))
            or len(address) != 2
            or not all(isinstance(part, str) for part in address)
            or not _is_prefix(address[1])
        ):
            raise RedisOptionError(f"redis store address {address!r} is not (url, prefix)")
        url, prefix = address
        if url != self.url:
            raise RedisOptionError(f"store {prefix} lives on {url}, but this harness uses {self.url}")
        return RedisStoreHandle(self, prefix, owned=False)

    def _drop(self, handle: RedisStoreHandle) -> None:
        with self._lock:
            if handle in self._open:
                self._open.remove(handle)
            delete_prefix(self._admin_client(), handle.prefix)

    def close(self) -> None:
        for handle in list(self._open):
            handle.close()
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _positive_int(name: str, text: str) -> int:
    return positive_int_option("redis", name, text, error=RedisOptionError)


def harness(options: Mapping[str, str]) -> RedisHarness:
    """The ``runlane.storage_drivers`` entry point target for ``redis``; connects lazily."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise RedisOptionError(
            f"redis driver does not know option(s) {', '.join(unknown)}; valid options: {', '.join(_OPTIONS)}"
        )
    url = options.get("url", DEFAULT_URL).strip()
    try:
        parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as error:
        raise RedisOptionError(f"redis driver option url={url!r} is not a redis URL: {error}") from error
    attempts = (
        _positive_int("max_transaction_attempts", options["max_transaction_attempts"])
        if "max_transaction_attempts" in options
        else 32
    )
    hold_ms = (
        _positive_int("exclusive_hold_ms", options["exclusive_hold_ms"])
        if "exclusive_hold_ms" in options
        else 60_000
    )
    limits = storage_limits_from_options("redis", options, error=RedisOptionError)
    cluster = cluster_option(options.get("cluster", "off"), url)
    nodes = nodes_option(options["nodes"]) if "nodes" in options else ()
    if nodes and not cluster:
        raise RedisOptionError("redis driver option nodes=... is for a cluster (cluster=single-slot) only")
    replicas = 0
    if "replicas" in options:
        text = options["replicas"].strip()
        if not text.isdigit():
            raise RedisOptionError(f"redis driver option replicas={text!r} is not a non-negative integer")
        replicas = int(text)
    control = _control_option(options["control"]) if "control" in options else None
    if (replicas or control is not None) and not cluster:
        raise RedisOptionError(
            "redis driver options replicas and control are for a cluster (cluster=single-slot) only"
        )
    return RedisHarness(
        url=url,
        limits=limits,
        max_transaction_attempts=attempts,
        exclusive_hold_ms=hold_ms,
        cluster=cluster,
        nodes=nodes,
        replicas=replicas,
        control=control,
    )


def _control_option(text: str) -> Path:
    """The directory ``scripts/cluster up`` wrote; refused unless it records a running cluster."""
    from .cluster import ClusterError, RedisClusterState  # imported late, as in cluster()

    directory = Path(text.strip())
    try:
        RedisClusterState.load(directory)
    except ClusterError as error:
        raise RedisOptionError(f"redis driver option control={text!r}: {error}") from error
    return directory


def nodes_option(text: str) -> tuple[tuple[str, int], ...]:
    """``host:port,host:port`` -> ``((host, port), ...)``; a malformed entry is refused."""
    nodes = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RedisOptionError(f"redis driver option nodes: {entry!r} is not host:port")
        nodes.append((host, int(port)))
    return tuple(nodes)


def cluster_option(value: str, url: str) -> bool:
    """``cluster=off`` -> False, ``cluster=single-slot`` -> True; anything else is refused with the reason."""
    value = value.strip().lower()
    if value not in CLUSTER_TOPOLOGIES:
        raise RedisOptionError(f"redis driver option cluster={value!r} is refused: {MULTI_SLOT_REFUSAL}")
    if value == "off":
        return False
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise RedisOptionError(f"cluster=single-slot needs a redis:// or rediss:// node address, not {url!r}")
    db = parts.path.strip("/") or "0"
    if db != "0":
        raise RedisOptionError(f"a Redis Cluster has only database 0, but url={url!r} names database {db}")
    return True
