"""The reference driver behind the in-process fault hook: how it reports and resolves each fault."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from runlane_conformance import (
    Fault,
    FaultInjector,
    FaultKind,
    StorageTransaction,
    StorageUnavailableError,
)
from runlane_conformance.fixtures.gating import fault_skip_reason
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.harness import FaultHookStore, ProxiedStore
from runlane_conformance.local.driver import LocalStorageDriver
from runlane_conformance.local.harness import LocalStoreHandle, local_harness

LEASES = Leases(environment="faults-hook")


@pytest.fixture
def store() -> Iterator[LocalStoreHandle]:
    harness = local_harness({})
    handle = harness.open_store()
    yield handle
    harness.close()


def _holder(driver: LocalStorageDriver) -> str | None:
    (record,) = driver.transaction(lambda tx: tx.get([LEASES.key("k")]))
    return None if record is None else str(record.document.value["holder"])


def _bump(runs: list[int]) -> Callable[[StorageTransaction], str]:
    def bump(tx: StorageTransaction) -> str:
        runs.append(1)
        (current,) = tx.get([LEASES.key("k")])
        assert current is not None
        tx.replace(current, LEASES.record("k", holder="bumped"))
        return "done"

    return bump


def test_the_local_store_offers_the_hook_and_not_the_proxy(store: LocalStoreHandle) -> None:
    assert isinstance(store, FaultHookStore) and not isinstance(store, ProxiedStore)
    assert fault_skip_reason(store) is None
    assert fault_skip_reason(object()) == (
        "profile: faults not offered (the harness's store has neither proxy_target()/connect_through() "
        "nor connect_with_faults())"
    )


def test_a_failed_read_dooms_the_attempt_even_if_the_callback_swallows_the_error(
    store: LocalStoreHandle,
) -> None:
    injector = FaultInjector()
    driver = store.connect_with_faults(injector)
    driver.transaction(lambda tx: tx.create(LEASES.record("k", holder="start")))
    injector.arm(Fault(FaultKind.CUT, 1))

    def swallow(tx: StorageTransaction) -> None:
        with pytest.raises(StorageUnavailableError):
            tx.get([LEASES.key("k")])
        tx.create(LEASES.record("other"))

    with pytest.raises(StorageUnavailableError):
        driver.transaction(swallow)
    injector.disarm()
    assert driver.transaction(lambda tx: tx.get([LEASES.key("other")])) == [None]


@pytest.mark.parametrize(
    ("kind", "raises", "holder"),
    [
        (FaultKind.CUT, StorageUnavailableError, "start"),
        (FaultKind.LOSE_REPLY, None, "bumped"),  # the store call returned: resolved as committed
        (FaultKind.REFUSE, None, "bumped"),
    ],
)
def test_a_fault_on_the_commit_is_reported_or_resolved_and_never_replayed(
    store: LocalStoreHandle, kind: FaultKind, raises: type[Exception] | None, holder: str
) -> None:
    injector = FaultInjector()
    driver = store.connect_with_faults(injector)
    driver.transaction(lambda tx: tx.create(LEASES.record("k", holder="start")))
    injector.arm(Fault(kind, 2))  # write 1 is the read, write 2 the commit
    runs: list[int] = []
    if raises is None:
        assert driver.transaction(_bump(runs)) == "done"
    else:
        with pytest.raises(raises):
            driver.transaction(_bump(runs))
    assert injector.fired and runs == [1]
    assert _holder(store.connect()) == holder


def test_an_unreachable_store_fails_every_transaction_until_it_is_back(store: LocalStoreHandle) -> None:
    injector = FaultInjector()
    driver = store.connect_with_faults(injector)
    driver.transaction(lambda tx: tx.create(LEASES.record("k", holder="start")))
    injector.arm(Fault(FaultKind.REFUSE, 1))
    for _ in range(2):
        with pytest.raises(StorageUnavailableError):
            driver.transaction(_bump([]))
    injector.disarm()
    assert driver.transaction(_bump([])) == "done"
