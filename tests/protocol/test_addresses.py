"""Store addresses cross the protocol: a second backend process attaches to the first one's store."""

from __future__ import annotations

import sys

import pytest

from runlane_conformance.fixtures.records import Leases
from runlane_conformance.harness import DriverLoadError
from runlane_conformance.protocol.process import ProcessHarness
from tests.conftest import example_package

pytestmark = pytest.mark.timeout(60)


def test_a_store_opened_in_one_backend_is_shared_with_another_backend_through_its_address() -> None:
    example_package("runlane_sqlite_driver", "sqlite")
    command = f"{sys.executable} -m runlane_conformance.backend --driver sqlite"
    first, second = ProcessHarness(command), ProcessHarness(command)
    try:
        store = first.open_store()
        address = store.address()
        assert address is not None, "a durable sqlite store must be reachable from another process"
        attached = second.attach(address)
        leases = Leases(environment="addresses")
        writer, reader = store.connect(), attached.connect()
        writer.transaction(lambda tx: tx.create(leases.record("k", holder="first")))
        (seen,) = reader.transaction(lambda tx: tx.get([leases.key("k")]))
        assert seen is not None and seen.document == leases.record("k", holder="first").document
        attached.close()
        store.close()
    finally:
        second.close()
        first.close()


def test_a_process_local_store_has_no_address_and_an_address_of_another_backend_is_refused() -> None:
    harness = ProcessHarness(f"{sys.executable} -m runlane_conformance.backend --driver local")
    try:
        store = harness.open_store()
        assert store.address() is None
        with pytest.raises(DriverLoadError, match="not an address of a store of this backend"):
            harness.attach({"command": "something else", "address": {"json": "x"}})
        store.close()
    finally:
        harness.close()
