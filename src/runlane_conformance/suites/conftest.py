"""Fixtures shared by every suite module (the driver fixtures come from the plugin)."""

from __future__ import annotations

import uuid

import pytest

from runlane_conformance.fixtures.records import Leases


@pytest.fixture
def leases() -> Leases:
    """Lease builders in an environment unique to this check."""
    return Leases(environment=f"env-{uuid.uuid4().hex[:8]}")
