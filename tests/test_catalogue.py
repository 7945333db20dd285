"""The requirement catalogue is data: importable without the test machinery, and linked by value.

A requirement is a value in ``runlane_conformance.catalogue.<area>``; a check is decorated with the
value it judges and a mutant names the value it must fail. These tests hold the three together: the
catalogue and the suites declare exactly the same requirements, each one has a check, every mutant
names the catalogue's own value, and the catalogue loads (and ``runlane-certify requirements`` runs)
where pytest and Hypothesis cannot even be imported.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from runlane_conformance import catalogue
from runlane_conformance.catalogue import AREA_MODULES, AREAS, Requirement, all_requirements, check_sites
from tests.mutants.catalog import all_mutants

#: Run in a child: make pytest and Hypothesis unimportable, then use the catalogue and the CLI command.
_WITHOUT_TEST_MACHINERY = """
import importlib.abc, json, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"pytest", "_pytest", "hypothesis"}:
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, Refuse())
from runlane_conformance.catalogue import all_requirements
from runlane_conformance.cli.entry import main

assert len(all_requirements()) > 100
sys.argv = ["runlane-certify", "requirements", "--json"]
try:
    main()
except SystemExit as stop:
    assert stop.code in (0, None), stop.code
loaded = sorted(name for name in sys.modules if name.partition(".")[0] in {"pytest", "_pytest", "hypothesis"})
print("LOADED", json.dumps(loaded), file=sys.stderr)
"""


def test_the_catalogue_and_requirements_command_need_neither_pytest_nor_hypothesis() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TEST_MACHINERY], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stderr, result.stderr
    listed = json.loads(result.stdout)
    assert [row["id"] for row in listed] == sorted(
        all_requirements(), key=lambda rid: (AREAS.index(rid.partition(".")[0]), rid)
    )


def test_each_area_has_its_module_and_each_module_only_its_area() -> None:
    assert tuple(AREA_MODULES) == AREAS
    for area, module in AREA_MODULES.items():
        values = [value for value in vars(module).values() if isinstance(value, Requirement)]
        assert values, f"catalogue.{area} declares no requirement"
        assert {value.area for value in values} == {area}


def test_the_suites_check_every_requirement_of_the_catalogue_and_nothing_else() -> None:
    for area in AREAS:
        importlib.import_module(f"runlane_conformance.suites.test_{area}")
    sites = check_sites()
    unchecked = sorted(set(all_requirements()) - set(sites))
    assert not unchecked, f"requirements no check is decorated with: {unchecked}"
    assert set(sites) <= set(all_requirements())
    for sites_of in sites.values():
        for site in sites_of:
            assert site.module.startswith("runlane_conformance.suites.test_"), site
            assert site.name.startswith("test_"), site


def test_every_mutant_names_the_catalogues_own_requirement_value() -> None:
    catalogue_values = {id(value) for value in all_requirements().values()}
    strays = [mutant.name for mutant in all_mutants() if id(mutant.requirement) not in catalogue_values]
    assert not strays, f"mutants whose requirement is not a catalogue value: {strays}"


def test_a_requirement_knows_the_clauses_that_name_it() -> None:
    assert "attempts.one-mutation-per-key" in catalogue.mutations.ONE_PER_KEY.clause_ids
