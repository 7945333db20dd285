"""Fixtures for the reference driver's own tests: one shared store, two independent instances."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runlane_conformance.local import LocalStorageDriver, LocalStoreHandle, local_harness

from .helpers import FIXED


@pytest.fixture
def handle() -> Iterator[LocalStoreHandle]:
    harness = local_harness({})
    store = harness.open_store()
    yield store
    harness.close()


@pytest.fixture
def driver(handle: LocalStoreHandle) -> LocalStorageDriver:
    return handle.connect(clock=lambda: FIXED)


@pytest.fixture
def other(handle: LocalStoreHandle) -> LocalStorageDriver:
    """A second, independent instance over the same store."""
    return handle.connect(clock=lambda: FIXED)
