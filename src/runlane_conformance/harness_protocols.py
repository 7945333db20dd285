"""What a driver author implements to be judged: a harness that opens stores, and what a store may offer.

These are protocols only, apart from how a harness is found and loaded (``harness``): the async adapter
(``aio``) builds harnesses of these shapes, and the loader serves async factories through that adapter,
so keeping the shapes here lets both depend on them without depending on each other. ``harness``
re-exports every name; import them from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from .contract.protocols import Clock, StorageDriver
from .faults.plan import FaultHook

__all__ = [
    "ClusterStore",
    "DeclaredCluster",
    "DriverHarness",
    "FaultHookStore",
    "HarnessFactory",
    "PartitionableCluster",
    "ProxiedStore",
    "SettlingStore",
    "StoreHandle",
]


@runtime_checkable
class StoreHandle(Protocol):
    """One fresh, empty, isolated store (a schema, a key prefix, a temp file...)."""

    def connect(self, *, clock: Clock | None = None) -> StorageDriver:
        """A new driver instance on this store, independent of every other instance.

        ``clock`` is honoured by drivers whose clock authority is ``client``.
        """
        ...

    def address(self) -> object | None:
        """A picklable address a child process can pass to ``DriverHarness.attach``.

        ``None`` means the store lives in this process only; cross-process
        checks then skip with that reason.
        """
        ...

    def close(self) -> None:
        """Drop the store and everything in it."""
        ...


@runtime_checkable
class ProxiedStore(Protocol):
    """Optional: a store whose instances talk to a server over TCP, so faults can be injected on the wire.

    A store offering these two methods lets the ``faults`` suite put a
    ``FaultProxy`` between its instances and the server, with no knowledge of
    the driver's internals. ``connect_through`` must open an instance exactly
    like ``connect`` does (same store, options and clock), except that every
    connection it makes, including reconnections after a failure, goes to
    ``address`` instead of ``proxy_target()``.
    """

    def proxy_target(self) -> tuple[str, int]:
        """The ``(host, port)`` of the server this store's instances connect to."""
        ...

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> StorageDriver:
        """A new instance on this store whose connections all go to ``address``."""
        ...


@runtime_checkable
class FaultHookStore(Protocol):
    """Optional: a store whose driver is not networked but can route its store exchanges through a hook.

    ``connect_with_faults(hook)`` opens an instance that calls
    ``hook.round_trip(action)`` around every exchange with its store (each
    read, each write statement, the commit) and treats the hook's
    ``InjectedFault`` exactly like a broken connection of its own.
    """

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> StorageDriver:
        """A new instance on this store whose store exchanges go through ``hook``."""
        ...


@runtime_checkable
class DeclaredCluster(Protocol):
    """The members of a replicated store and what the suite may do to each (the ``cluster_faults`` area).

    Members are named by short strings (``"127.0.0.1:7000"``, ``"etcd-2"``). Every method returns only
    once its effect is in place, and raises (any exception, one line) when it cannot do it. The suite
    calls them from one thread at a time, a bounded number of times, and always leaves every member
    running and connected when it is done.
    """

    def members(self) -> Sequence[str]:
        """Every member's name (at least two)."""
        ...

    def primary(self) -> str:
        """The member that serves the store's writes now: the primary of its slot, or the leader."""
        ...

    def kill(self, member: str) -> None:
        """Stop ``member`` at once, with no chance to clean up (``SIGKILL``)."""
        ...

    def restart(self, member: str) -> None:
        """Start a killed ``member`` again; it rejoins the cluster in whatever role the cluster gives it."""
        ...

    def settle(self, *, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds until the store is served again and every running member has
        caught up with it (a failover finished, a restarted member synced). ``False`` when time ran out."""
        ...


@runtime_checkable
class PartitionableCluster(DeclaredCluster, Protocol):
    """Optional: a cluster that can also cut one member off from its peers (not from its clients)."""

    def isolate_from_peers(self, member: str) -> None:
        """Cut ``member`` off from every other member; clients connected to it still reach it."""
        ...

    def heal(self, member: str) -> None:
        """Undo ``isolate_from_peers``: ``member`` sees its peers again."""
        ...


@runtime_checkable
class ClusterStore(Protocol):
    """Optional: a store served by several members that the suite may kill, restart and partition.

    Offered only when the harness really controls the members (it started them, or was told where their
    process control is). The store must also offer a fault mechanism (``ProxiedStore`` or
    ``FaultHookStore``) whose faulty instances reach the store through ``cluster().primary()``: the
    suite lands each kill on a counted write of that traffic.
    """

    def cluster(self) -> DeclaredCluster:
        """The cluster this store lives on."""
        ...


@runtime_checkable
class SettlingStore(Protocol):
    """Optional: a store whose eventually consistent indexes can be waited on.

    A driver that advertises ``index_consistency="eventual"`` may give its
    store handle ``settle``, so the suites can check what its indexes show
    once they have caught up without sleeping and hoping. Without it the
    suites poll the condition they check, under a deadline.
    """

    def settle(self, *, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds until every index reflects every commit finished before the call.

        Returns ``True`` once it does, ``False`` when the deadline passed
        first. The suites stop writing before they call it, so a correct
        eventual index always gets there.
        """
        ...


@runtime_checkable
class DriverHarness(Protocol):
    """What a driver author supplies: a way to open fresh stores.

    The suites never share state between checks: each check opens its own
    store, so a harness must make every store empty and isolated from every
    other (its own schema, key prefix or file).
    """

    def open_store(self) -> StoreHandle:
        """A new, empty store that no other store can see or change."""
        ...

    def attach(self, address: object) -> StoreHandle:
        """A handle on an existing store by address (used in child processes; does not own it)."""
        ...

    def close(self) -> None:
        """Release what the harness itself holds (connection pools, servers it started)."""
        ...


HarnessFactory = Callable[[Mapping[str, str]], DriverHarness]
"""The entry point's target: called with the ``--option key=value`` pairs, returns the harness.

A bad option should raise an exception whose message is one line; the CLI prints it as it is.
"""
