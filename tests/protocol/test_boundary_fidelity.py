"""Isolation never changes what a driver's own code meets, nor which hooks its store offers.

A driver's ``except`` clauses decide what it does, so the exception its code catches must be the
same whether the checks run next to it or behind the backend protocol: the same class (or a
stand-in with the same built-in bases), the very object its own read raised when a callback let
that through, the same arguments, and the same ``__cause__``/``__context__`` chain. The observing
driver (``observing_driver.py``) turns what it caught into its error message, so each callback
below must yield the same message in both modes.

And every optional hook the in-process store handle offers (the protocols in
``runlane_conformance.harness``) must have a way across the protocol and be offered by the
``process`` driver's handle whenever the backend's store offers it.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance import harness_protocols
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.errors import StorageConflictError, StorageUsageError
from runlane_conformance.contract.values import StorageRecordKey
from runlane_conformance.faults.plan import Fault, FaultInjector, FaultKind
from runlane_conformance.harness import DriverHarness, StoreHandle, load_harness
from runlane_conformance.protocol.process import STORE_HOOKS, ProcessHarness, ProcessStoreHandle
from runlane_conformance.protocol.schema import protocol_schema
from runlane_conformance.suites._callback_errors import CallbackAbort

ROOT = Path(__file__).resolve().parents[2]
OBSERVING = "tests.protocol.observing_driver:harness"
EVERY_HOOK = "tests.protocol.observing_driver:hooks_harness"
pytestmark = pytest.mark.timeout(120)
KEY = StorageRecordKey(next(iter(StorageTableName)), ("k",))


class CheckConnectionError(ConnectionError):
    """A callback's own ConnectionError subclass: a driver's ``except ConnectionError`` must catch it."""


def lets_its_read_error_through(tx: Any) -> None:
    tx.get([KEY])


def wraps_its_read_error(tx: Any) -> None:
    try:
        tx.get([KEY])
    except ConnectionError as error:
        raise RuntimeError("wrapped by the callback") from error


def chains_its_read_error_implicitly(tx: Any) -> None:
    try:
        tx.get([KEY])
    except ConnectionError:
        raise LookupError("raised while handling the read's error") from None


def chains_while_handling(tx: Any) -> None:
    try:
        tx.get([KEY])
    except ConnectionError:
        raise KeyError("during")  # noqa: B904 - the implicit context is what this callback checks


def raising(error: BaseException) -> Callable[[Any], None]:
    def callback(tx: Any) -> None:
        raise error

    callback.__name__ = f"raises_{type(error).__name__}"
    return callback


CALLBACKS: dict[str, Callable[[Any], None]] = {
    "lets its read's ConnectionError through": lets_its_read_error_through,
    "wraps the read's error with raise ... from": wraps_its_read_error,
    "suppresses the read's error with from None": chains_its_read_error_implicitly,
    "raises while handling the read's error": chains_while_handling,
    "raises KeyboardInterrupt": raising(KeyboardInterrupt()),
    "raises SystemExit(3)": raising(SystemExit(3)),
    "raises GeneratorExit": raising(GeneratorExit()),
    "raises a BaseException of the suites": raising(CallbackAbort("stop")),
    "raises ValueError with two arguments": raising(ValueError("plain", 7)),
    "raises its own ConnectionError subclass": raising(CheckConnectionError("the check's own")),
    "raises a contract error": raising(StorageConflictError("the callback's conflict")),
}


def _seen(store: StoreHandle, callback: Callable[[Any], None], *, faults: bool = False) -> dict[str, Any]:
    if faults:
        injector = FaultInjector()
        injector.arm(Fault(FaultKind.CUT, 1))
        driver = store.connect_with_faults(injector)  # type: ignore[attr-defined]
    else:
        driver = store.connect()
    try:
        with pytest.raises(StorageUsageError) as caught:
            driver.transaction(callback)
    finally:
        driver.close()
    return json.loads(str(caught.value))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def both_modes() -> Iterator[dict[str, StoreHandle]]:
    """One store of the observing driver in process, and one through the Python backend."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        local = load_harness(OBSERVING)
        isolated = ProcessHarness(f"{sys.executable} -m runlane_conformance.backend --driver {OBSERVING}")
        stores = {"in process": local.open_store(), "isolated": isolated.open_store()}
        try:
            yield stores
        finally:
            for store in stores.values():
                store.close()
            local.close()
            isolated.close()


@pytest.mark.parametrize("name", CALLBACKS)
def test_a_drivers_own_code_meets_the_same_exception_from_a_callback_in_both_modes(
    both_modes: dict[str, StoreHandle], name: str
) -> None:
    callback = CALLBACKS[name]
    in_process = _seen(both_modes["in process"], callback)
    isolated = _seen(both_modes["isolated"], callback)
    assert isolated == in_process, f"the callback that {name}: the driver met something else when isolated"


def test_the_fault_hooks_connection_error_comes_back_to_the_driver_as_the_very_object_its_read_raised(
    both_modes: dict[str, StoreHandle],
) -> None:
    """The LMDB-style driver: ``except ConnectionError`` around the callback sees the hook's fault."""
    in_process = _seen(both_modes["in process"], lets_its_read_error_through, faults=True)
    isolated = _seen(both_modes["isolated"], lets_its_read_error_through, faults=True)
    assert in_process["type"] == "runlane_conformance.faults.plan.InjectedFault"
    assert in_process["connection"] and in_process["own"]
    assert isolated == in_process


def test_a_read_error_wrapped_by_the_callback_keeps_the_drivers_own_object_as_its_cause(
    both_modes: dict[str, StoreHandle],
) -> None:
    seen = _seen(both_modes["isolated"], wraps_its_read_error)
    assert seen["type"] == "builtins.RuntimeError"
    assert seen["cause"]["own"] and seen["cause"]["type"] == "builtins.ConnectionError"
    assert seen["context"]["own"]


def test_a_base_exception_of_the_callback_stays_outside_except_exception_in_the_driver(
    both_modes: dict[str, StoreHandle],
) -> None:
    seen = _seen(both_modes["isolated"], raising(CallbackAbort("stop")))
    assert seen["type"] == "runlane_conformance.suites._callback_errors.CallbackAbort"
    assert seen["exception"] is False


# --- hooks ---------------------------------------------------------------------------------------


def _optional_store_protocols() -> dict[str, list[str]]:
    """Each optional store-handle protocol of ``runlane_conformance.harness_protocols``, with its methods."""
    found: dict[str, list[str]] = {}
    for name, value in vars(harness_protocols).items():
        if not (inspect.isclass(value) and getattr(value, "_is_runtime_protocol", False)):
            continue
        if value in (StoreHandle, DriverHarness) or value.__module__ != harness_protocols.__name__:
            continue
        # A declared cluster is not carried across the backend protocol yet: an isolated run sees no
        # cluster, so cluster_faults is gated there (not applicable), never passed.
        if not name.endswith("Store") or name == "ClusterStore":
            continue
        found[name] = [
            member
            for member, item in vars(value).items()
            if inspect.isfunction(item) and not member.startswith("_")
        ]
    return found


def test_every_optional_store_hook_has_a_way_across_the_protocol() -> None:
    protocols = _optional_store_protocols()
    assert {"ProxiedStore", "FaultHookStore", "SettlingStore"} <= set(protocols)
    schema = protocol_schema()["$defs"]
    for protocol, members in protocols.items():
        for member in members:
            assert member in STORE_HOOKS, f"{protocol}.{member} has no message in the backend protocol"
            announced, handle_class = STORE_HOOKS[member]
            for op in ("open", "attach"):
                assert announced in schema["result"][op]["properties"], (op, announced)
            assert callable(getattr(handle_class, member, None)), f"{handle_class.__name__} lacks {member}"
    assert "settle" in schema["request"] and "settle" in schema["result"]


def test_the_required_store_and_harness_methods_are_forwarded() -> None:
    for protocol, forwarded in ((StoreHandle, ProcessStoreHandle), (DriverHarness, ProcessHarness)):
        for member, item in vars(protocol).items():
            if inspect.isfunction(item) and not member.startswith("_"):
                assert callable(getattr(forwarded, member, None)), f"{forwarded.__name__} lacks {member}"


def _hooks(store: object) -> set[str]:
    return {
        member
        for members in _optional_store_protocols().values()
        for member in members
        if callable(getattr(store, member, None))
    }


@pytest.mark.parametrize("driver", [EVERY_HOOK, "local", "tiny", OBSERVING])
def test_a_store_offers_the_same_hooks_in_process_and_isolated(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    local = load_harness(driver)
    isolated = ProcessHarness(f"{sys.executable} -m runlane_conformance.backend --driver {driver}")
    try:
        here, there = local.open_store(), isolated.open_store()
        try:
            assert _hooks(there) == _hooks(here)
            if "settle" in _hooks(here):
                for timeout in (0.0, 2.0):
                    assert there.settle(timeout=timeout) == here.settle(timeout=timeout)  # type: ignore[attr-defined]
            if "proxy_target" in _hooks(here):
                assert there.proxy_target() == here.proxy_target()  # type: ignore[attr-defined]
        finally:
            here.close()
            there.close()
    finally:
        local.close()
        isolated.close()
