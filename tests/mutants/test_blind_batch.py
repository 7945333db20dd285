"""The blind batch is well formed: every driver loads, names a real requirement and a dimension.

Certifying the batch costs a full quick certification per driver, so it lives
in ``benchmarks/blind_batch.py``; these checks are the cheap part that keeps
the batch usable (a renamed requirement or a broken factory shows up here).
"""

from __future__ import annotations

import importlib
from typing import Any

from runlane_conformance.catalogue import all_requirements
from runlane_conformance.harness import load_harness
from tests.mutants.blind_batch import BLIND_MUTANTS, CONTROLS
from tests.mutants.catalog import all_mutants


def _factory(target: str) -> object:
    module, _sep, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def test_the_blind_batch_has_at_least_thirty_drivers_over_eight_dimensions() -> None:
    assert len(BLIND_MUTANTS) >= 30
    assert len({mutant.dimension for mutant in BLIND_MUTANTS}) >= 8


def test_every_blind_driver_names_a_requirement_of_the_catalogue() -> None:
    known = all_requirements()
    unknown = sorted({mutant.kills for mutant in BLIND_MUTANTS} - set(known))
    assert not unknown, f"requirements not in the catalogue: {unknown}"


def test_blind_driver_names_are_unique_and_match_their_factories() -> None:
    names = [mutant.name for mutant in [*CONTROLS, *BLIND_MUTANTS]]
    assert len(names) == len(set(names))
    for mutant in [*CONTROLS, *BLIND_MUTANTS]:
        assert mutant.target.endswith(f":{mutant.name}")
        assert callable(_factory(mutant.target))


def test_the_kill_table_does_not_collect_the_blind_batch_yet() -> None:
    collected = {mutant.name for mutant in all_mutants()}
    assert not collected & {mutant.name for mutant in BLIND_MUTANTS}


def test_every_local_based_blind_driver_opens_a_store_and_commits() -> None:
    from runlane_conformance import StorageTableName
    from runlane_conformance.contract.values import StorageRecordKey

    for mutant in [*CONTROLS, *BLIND_MUTANTS]:
        harness = load_harness(mutant.target, {})
        try:
            store = harness.open_store()
            driver = store.connect()
            key = StorageRecordKey(StorageTableName.RUNS, ("env", "nothing-here"))

            def read(tx: Any, key: StorageRecordKey = key) -> Any:
                return tx.get([key])

            assert driver.transaction(read) == [None]
            store.close()
        finally:
            harness.close()
