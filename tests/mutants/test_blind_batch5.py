"""The fifth blind batch is well formed: every driver loads, names a real requirement and a dimension.

Certifying the batch costs a full quick certification per driver (``benchmarks/blind_batch.py --batch 5``);
these checks are the cheap part. The drivers a check refuses are in the kill table through ``m_blind5.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

from runlane_conformance.catalogue import all_requirements
from runlane_conformance.harness import load_harness
from tests.mutants.blind_batch import BLIND_MUTANTS
from tests.mutants.blind_batch5 import BLIND5_MUTANTS
from tests.mutants.m_blind5 import KILLED_BY


def test_the_fifth_batch_has_at_least_twenty_five_drivers_over_ten_dimensions() -> None:
    assert len(BLIND5_MUTANTS) >= 25
    assert len({mutant.dimension for mutant in BLIND5_MUTANTS}) >= 10


def test_every_fifth_batch_driver_names_a_requirement_and_a_factory_of_its_own_name() -> None:
    known = all_requirements()
    assert not sorted({mutant.kills for mutant in BLIND5_MUTANTS} - set(known))
    names = [mutant.name for mutant in BLIND5_MUTANTS]
    assert len(names) == len(set(names))
    assert not set(names) & {mutant.name for mutant in BLIND_MUTANTS}, "a name of the first batch reused"
    for mutant in BLIND5_MUTANTS:
        module, _sep, attribute = mutant.target.partition(":")
        assert attribute == mutant.name
        assert callable(getattr(importlib.import_module(module), attribute))
    assert set(KILLED_BY) <= set(names)


def test_every_fifth_batch_driver_opens_a_store_and_reads() -> None:
    from runlane_conformance import StorageTableName
    from runlane_conformance.contract.values import StorageRecordKey

    key = StorageRecordKey(StorageTableName.RUNS, ("env", "nothing-here"))
    for mutant in BLIND5_MUTANTS:
        harness = load_harness(mutant.target, {})
        try:
            store = harness.open_store()

            def read(tx: Any) -> Any:
                return tx.get([key])

            assert store.connect().transaction(read) == [None]
            store.close()
        finally:
            harness.close()
