"""A replicated store simulated in-process: the reference driver's store copied onto three members.

It lets the ``cluster_faults`` area run (and its mutants be killed) with no servers at all. Each store
opened by the harness is a ``FakeCluster`` of three members, ``m1`` to ``m3``; each member holds a full
copy of the store (a ``LocalStore``). One member is the primary: every attempt runs against it, and
each commit it applies is copied to every replica before the commit returns (synchronous replication).
The cluster declares itself to the suite (``FakeStoreHandle.cluster()``) and can:

* kill a member: if it was the primary, the first live replica takes over at once, with whatever was
  copied to it; attempts bound to the dead member fail like broken connections;
* restart a member: it comes back as a replica, rebuilt from the primary's log;
* cut a member off from its peers and heal it: the others elect a new primary at once; clients still
  connected to the cut-off member reach it, and it refuses every exchange (it knows it has no quorum).
  Healing rebuilds it from the primary's log.

Instances go through the faults suite's in-process hook (``connect_with_faults``), so a kill lands on a
counted exchange. Options (``--option key=value``) break it in one realistic way each, for the mutants:

* ``replication=lagging`` (default ``sync``): a commit is acknowledged before the replicas have it
  (they get it with the next one);
* ``reads=replica`` (default ``primary``): plain instances serve read-only attempts from a replica
  (stale with ``replication=lagging``);
* ``minority=acknowledge`` (default ``refuse``): a primary cut off from its peers keeps acknowledging
  commits, which healing drops;
* ``lost_reply=replay`` or ``unavailable`` (default ``resolve``): a commit whose answer was lost is
  replayed on the new primary, or reported as not committed.

``runlane-certify run --driver tests.correct.fake_cluster:harness --area faults --area cluster_faults``
certifies the correct one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from runlane_conformance import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageConflictError,
    StorageProfile,
    StorageTransaction,
)
from runlane_conformance.faults import FaultHook, InjectedFault
from runlane_conformance.harness import DriverOptionError
from runlane_conformance.local.driver import FaultyLocalTransaction, LocalStorageDriver, local_profile
from runlane_conformance.local.store import LocalStore, StoreConflict

T = TypeVar("T")

_CHOICES = {
    "replication": ("sync", "lagging"),
    "reads": ("primary", "replica"),
    "minority": ("refuse", "acknowledge"),
    "lost_reply": ("resolve", "replay", "unavailable"),
}
Writes = Sequence[tuple[str, Any]]


class MemberStore(LocalStore):
    """One member's copy of the store; a commit applied on the primary is handed to the cluster to copy."""

    def __init__(self, member: Member) -> None:
        super().__init__()
        self.member = member

    def _apply(self, writes: Writes) -> None:
        super()._apply(writes)
        self.member.cluster.replicate(self.member, list(writes))

    def replay(self, writes: Writes) -> None:
        """Apply replicated (or logged) ``writes`` without handing them on."""
        with self._lock:
            LocalStore._apply(self, writes)

    def _finish(self, token: int, snapshot: int | None, held: Any) -> None:
        # An attempt that began on another member (before a failover) ends here without its snapshot.
        if snapshot is not None and snapshot not in self._live:
            snapshot = None
        super()._finish(token, snapshot, held)


class Member:
    def __init__(self, name: str, cluster: FakeCluster) -> None:
        self.name = name
        self.cluster = cluster
        self.alive = True
        self.isolated = False
        self.log: list[list[tuple[str, Any]]] = []
        self.store = MemberStore(self)

    def rebuild(self, log: Sequence[list[tuple[str, Any]]]) -> None:
        self.store = MemberStore(self)
        for writes in log:
            self.store.replay(writes)
        self.log = list(log)


class FakeCluster:
    """Three members, one primary; implements the suite's ``PartitionableCluster``."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)
        self.lock = threading.RLock()
        self.by_name = {name: Member(name, self) for name in ("m1", "m2", "m3")}
        self.primary_name: str | None = "m1"
        self.pending: list[tuple[str, Any]] | None = None  # replication=lagging: the commit not yet copied

    # -- replication -----------------------------------------------------------------------------

    def replicate(self, source: Member, writes: list[tuple[str, Any]]) -> None:
        with self.lock:
            source.log.append(writes)
            if source.name != self.primary_name:
                return  # a cut-off member's commit reaches nobody
            deliver: list[tuple[str, Any]] | None = writes
            if self.options["replication"] == "lagging":
                deliver, self.pending = self.pending, writes
            if deliver is None:
                return
            for member in self.replicas():
                member.store.replay(deliver)
                member.log.append(deliver)

    def replicas(self) -> list[Member]:
        return [
            m for m in self.by_name.values() if m.alive and not m.isolated and m.name != self.primary_name
        ]

    def _promote(self) -> None:
        self.pending = None  # a commit not copied yet is gone with the old primary
        candidates = self.replicas()
        self.primary_name = candidates[0].name if candidates else None

    def primary_member(self) -> Member | None:
        return None if self.primary_name is None else self.by_name[self.primary_name]

    # -- the DeclaredCluster side ----------------------------------------------------------------

    def members(self) -> Sequence[str]:
        return tuple(self.by_name)

    def primary(self) -> str:
        with self.lock:
            if self.primary_name is None:
                raise RuntimeError("no member serves the store")
            return self.primary_name

    def kill(self, member: str) -> None:
        with self.lock:
            self.by_name[member].alive = False
            if member == self.primary_name:
                self._promote()

    def restart(self, member: str) -> None:
        with self.lock:
            target = self.by_name[member]
            primary = self.primary_member()
            target.alive = True
            target.rebuild(primary.log if primary is not None else target.log)
            if self.primary_name is None:
                self.primary_name = member

    def settle(self, *, timeout: float) -> bool:
        with self.lock:
            return self.primary_name is not None

    def isolate_from_peers(self, member: str) -> None:
        with self.lock:
            self.by_name[member].isolated = True
            if member == self.primary_name:
                self._promote()

    def heal(self, member: str) -> None:
        with self.lock:
            target = self.by_name[member]
            target.isolated = False
            primary = self.primary_member()
            if primary is not None and primary is not target:
                target.rebuild(primary.log)  # what it acknowledged alone is dropped

    # -- routing ---------------------------------------------------------------------------------

    def route(self, instance: FakeClusterDriver, *, reading: bool) -> tuple[Member, MemberStore]:
        """The member an attempt of ``instance`` talks to, and that member's copy at this moment."""
        with self.lock:
            pinned = self.by_name[instance.pinned]
            if pinned.isolated and pinned.alive:
                return pinned, pinned.store  # the client's connection still reaches the cut-off member
            if reading and self.options["reads"] == "replica" and instance.plain:
                replicas = self.replicas()
                if replicas:
                    return replicas[-1], replicas[-1].store
            primary = self.primary_member()
            if primary is None:
                return pinned, pinned.store  # nobody serves: the gate refuses
            instance.pinned = primary.name
            return primary, primary.store

    def reachable(self, member: Member, store: MemberStore, *, reading: bool) -> str | None:
        """Why an exchange with ``member`` (its copy ``store``) fails now; ``None`` when it goes through."""
        with self.lock:
            if not member.alive or member.store is not store:
                return f"member {member.name} is down"
            if member.isolated:
                if self.options["minority"] == "acknowledge":
                    return None
                return f"member {member.name} has lost its peers and refuses to serve"
            if member.name != self.primary_name and not (reading and self.options["reads"] == "replica"):
                return f"member {member.name} no longer serves the store"
            return None


class _Gate:
    """The cluster's side of every exchange: refuses what the member can no longer serve, then the hook."""

    def __init__(
        self, cluster: FakeCluster, member: Member, store: MemberStore, hook: FaultHook | None
    ) -> None:
        self.cluster, self.member, self.store, self.hook = cluster, member, store, hook
        self.reading = False

    def round_trip(self, action: Callable[[], T]) -> T:
        def guarded() -> T:
            reason = self.cluster.reachable(self.member, self.store, reading=self.reading)
            if reason is not None:
                raise InjectedFault(reason)
            return action()

        return guarded() if self.hook is None else self.hook.round_trip(guarded)


class _Attempt(FaultyLocalTransaction):
    def __init__(self, driver: FakeClusterDriver, gate: _Gate) -> None:
        super().__init__(gate.store, driver.profile.limits, driver.clock, gate)
        self.gate = gate
        self.lost_reply = driver.cluster.options["lost_reply"]

    def writes_staged(self) -> bool:
        return bool(self._rules.mutated or self._rules.append is not None)

    def _commit(self) -> None:
        lost: list[InjectedFault] = []
        gate = self.gate

        class Spy:
            def round_trip(self, action: Callable[[], T]) -> T:
                try:
                    return gate.round_trip(action)
                except InjectedFault as fault:
                    lost.append(fault)
                    raise

        self._hook = Spy()
        super()._commit()
        if lost and self.lost_reply == "replay":
            raise StoreConflict("the commit's answer was lost; trying again on the member that serves now")
        if lost and self.lost_reply == "unavailable":
            from runlane_conformance import StorageUnavailableError

            raise StorageUnavailableError(f"the connection broke during the commit: {lost[0]}")


class FakeClusterDriver:
    """One instance on a fake cluster: each attempt is bound to the member serving at its start."""

    def __init__(self, cluster: FakeCluster, hook: FaultHook | None, clock: Any = None) -> None:
        self.cluster = cluster
        self.hook = hook
        self.plain = hook is None
        self.clock = clock if clock is not None else (lambda: datetime.now(UTC))
        self.pinned = cluster.primary_name or "m1"
        self._profile = local_profile()
        self.max_transaction_attempts = 16

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    def transaction(self, callback: Callable[[StorageTransaction], T]) -> T:
        reason = "no attempt was made"
        reading = True
        for _number in range(self.max_transaction_attempts):
            member, store = self.cluster.route(self, reading=reading)
            gate = _Gate(self.cluster, member, store, self.hook)
            gate.reading = reading
            attempt = _Attempt(self, gate)
            try:
                result = callback(attempt)
            except BaseException:
                attempt._rollback()
                raise
            if member.name != self.cluster.primary_name and reading and attempt.writes_staged():
                attempt._rollback()  # read on a replica, but it writes: run it again on the primary
                reading = False
                continue
            gate.reading = not attempt.writes_staged()
            try:
                attempt._commit()
            except StoreConflict as conflict:
                reason = str(conflict)
                continue
            return result
        raise StorageConflictError(
            f"transaction gave up after {self.max_transaction_attempts} attempts; last: {reason}"
        )

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        _member, store = self.cluster.route(self, reading=True)
        return LocalStorageDriver(store).query(command)

    def close(self) -> None:
        pass


class FakeStoreHandle:
    def __init__(self, options: Mapping[str, str]) -> None:
        self._cluster = FakeCluster(options)

    def connect(self, *, clock: Any = None) -> FakeClusterDriver:
        return FakeClusterDriver(self._cluster, None, clock)

    def connect_with_faults(self, hook: FaultHook, *, clock: Any = None) -> FakeClusterDriver:
        return FakeClusterDriver(self._cluster, hook, clock)

    def cluster(self) -> FakeCluster:
        return self._cluster

    def address(self) -> None:
        return None

    def close(self) -> None:
        pass


class FakeClusterHarness:
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options

    def open_store(self) -> FakeStoreHandle:
        return FakeStoreHandle(self.options)

    def attach(self, address: object) -> FakeStoreHandle:
        raise DriverOptionError("the fake cluster lives in one process and cannot be attached")

    def close(self) -> None:
        pass


def harness(options: Mapping[str, str]) -> FakeClusterHarness:
    """The harness factory: the options above, each defaulting to its correct value."""
    chosen = {name: values[0] for name, values in _CHOICES.items()}
    for name, value in options.items():
        if name not in _CHOICES:
            raise DriverOptionError(f"fake cluster does not know option {name}; valid: {', '.join(_CHOICES)}")
        if value not in _CHOICES[name]:
            raise DriverOptionError(
                f"fake cluster option {name}={value!r} is not one of {', '.join(_CHOICES[name])}"
            )
        chosen[name] = value
    return FakeClusterHarness(chosen)


def configured(**options: str) -> Callable[[Mapping[str, str]], FakeClusterHarness]:
    """A harness factory with ``options`` fixed (what a mutant names)."""

    def factory(extra: Mapping[str, str]) -> FakeClusterHarness:
        return harness({**options, **extra})

    return factory
