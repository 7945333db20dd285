"""Broken drivers for the model area: anomalies only a history of transactions reveals.

(A store that skips only index-range validation is not listed: with one
competitor per step its phantoms are rarely distinguishable from a serial
order within the quick profile's budget, so its kill would be a coin toss.)

These patch the reference driver's store (``runlane_conformance.local``)
because its optimistic validation cannot be broken from outside: a wrapper
never sees the commit point.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedStore, mutant_harness


class _PatchedStoreDriver(WrappedDriver):
    """Patches the shared local store once, the first time an instance connects to it."""

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        local = inner.store
        if not store.shared.get("patched"):
            store.shared["patched"] = True
            self.patch(local)

    def patch(self, local: Any) -> None:
        raise NotImplementedError


class SkipsReadValidation(_PatchedStoreDriver):
    """Commits without checking what the attempt read: lost updates and write skew go through."""

    def patch(self, local: Any) -> None:
        original = local._validate

        def validate(plan: Any) -> None:
            original(replace(plan, reads={}, ranges=()))

        local._validate = validate


MUTANTS = [
    Mutant(
        "skips-read-validation",
        "tests.mutants.m_model:skips_read_validation",
        "model.serial-equivalent-histories",
        "commits attempts whose reads changed (lost update)",
    ),
]

skips_read_validation = mutant_harness(SkipsReadValidation)
