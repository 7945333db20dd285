"""What a run's start-up reuses or narrows must never change what the run covers.

The parent reads the requirement catalogue from a cache keyed by the suite sources
(``run.catalog``), and a restricted run collects only its areas' suite modules
(``run.certify._collected``). Both are only correct under the conditions tested here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runlane_conformance.requirements import all_requirements
from runlane_conformance.run import catalog
from runlane_conformance.run.catalog import CATALOG_CACHE_VARIABLE, suite_catalog


def test_the_cached_catalogue_equals_the_one_the_suites_declare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CATALOG_CACHE_VARIABLE, str(tmp_path))
    first = suite_catalog()  # imports the suites and writes the cache
    written = list(tmp_path.glob("catalog-*.json"))
    assert len(written) == 1
    assert written[0].name == f"catalog-{catalog.catalog_digest()}.json"
    monkeypatch.setattr(catalog, "all_requirements", lambda: pytest.fail("the cache was not read"))
    second = suite_catalog()
    assert first == second == all_requirements()
    assert list(second) == list(all_requirements())


def test_a_damaged_cache_file_is_ignored_and_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CATALOG_CACHE_VARIABLE, str(tmp_path))
    path = tmp_path / f"catalog-{catalog.catalog_digest()}.json"
    path.write_text('[{"id": 1}]', encoding="utf-8")
    assert suite_catalog() == all_requirements()
    assert len(json.loads(path.read_text(encoding="utf-8"))) == len(all_requirements())


def test_switching_the_catalogue_cache_off_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CATALOG_CACHE_VARIABLE, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert suite_catalog() == all_requirements()
    assert not (tmp_path / "runlane-conformance").exists()


def test_the_digest_changes_when_a_suite_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "pkg"
    (package / "suites").mkdir(parents=True)
    (package / "requirements.py").write_text("", encoding="utf-8")
    (package / "suites" / "test_a.py").write_text("A = 1\n", encoding="utf-8")
    monkeypatch.setattr(catalog, "_PACKAGE", package)
    before = catalog.catalog_digest()
    (package / "suites" / "test_a.py").write_text("A = 2\n", encoding="utf-8")
    assert catalog.catalog_digest() != before


_COLLECT = """
import json, sys
import pytest
from runlane_conformance.run.events import EventPlugin
checks = []
def emit(event):
    if event["event"] == "collected":
        checks.extend(event["checks"])
args = ["-c", "/dev/null", "--noconftest", "-p", "no:cacheprovider", "-p", "_hypothesis_pytestplugin",
        "-p", "runlane_conformance.fixtures.plugin", "-p", "runlane_conformance.suites.conftest",
        "--collect-only", "-q", "--runlane-driver", "local", "--pyargs", "runlane_conformance.suites"]
pytest.main(args, plugins=[EventPlugin(emit, ())])
sys.__stdout__.write("CHECKS " + json.dumps([[c["nodeid"], c["requirement"]] for c in checks]) + "\\n")
"""


def test_every_check_lives_in_the_suite_module_of_its_area(tmp_path: Path) -> None:
    """What lets a restricted run collect only its areas' modules and still miss no check."""
    result = subprocess.run(
        [sys.executable, "-c", _COLLECT],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        cwd=tmp_path,
    )
    line = next(line for line in result.stdout.splitlines() if line.startswith("CHECKS "))
    checks = json.loads(line.removeprefix("CHECKS "))
    assert len(checks) > 100, result.stdout[-2000:]
    misplaced = [
        (nodeid, requirement)
        for nodeid, requirement in checks
        if requirement is None
        or re.search(r"(?:^|/)test_([a-z_]+)\.py::", nodeid).group(1) != requirement.partition(".")[0]  # type: ignore[union-attr]
    ]
    assert misplaced == []


def _request(areas: tuple[str, ...] = (), requirements: tuple[str, ...] = ()) -> object:
    from runlane_conformance.run import certify

    return certify._validate("local", {}, areas, requirements, "quick", 0, 1, None, None)


def test_a_restricted_run_collects_only_the_modules_of_its_areas_in_file_name_order() -> None:
    from runlane_conformance.run import certify

    source = certify._suite_source()
    narrowed = certify._collected(_request(areas=("point_reads", "limits")), source)  # type: ignore[arg-type]
    assert narrowed.args == (
        "--pyargs",
        "runlane_conformance.suites.test_limits",
        "runlane_conformance.suites.test_point_reads",
    )
    assert narrowed.files == source.files  # the suite digest still covers every file
    by_requirement = certify._collected(_request(requirements=("sealing.reads-refused-after-now",)), source)  # type: ignore[arg-type]
    assert by_requirement.args == ("--pyargs", "runlane_conformance.suites.test_sealing")


def test_a_full_run_collects_the_whole_suites_package() -> None:
    from runlane_conformance.run import certify

    source = certify._suite_source()
    assert certify._collected(_request(), source) == source  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_child_that_probes_the_driver_runs_its_checks_with_the_harness_it_probed(
    tmp_path: Path, workers: int
) -> None:
    # Loading a driver can cost as much as a check (a backend process to start); the probing
    # child keeps its harness for the session instead of loading the driver twice, and every
    # harness loaded is closed by the end of the run.
    notes = tmp_path / "loads"
    cli = "import sys; from runlane_conformance.cli.app import main; main(sys.argv[1:])"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            cli,
            "run",
            "--driver",
            "tests.run.counting_driver:harness",
            "--area",
            "point_reads",
            "--seed",
            "1",
            "--workers",
            str(workers),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "RUNLANE_COUNT_FILE": str(notes)},
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = notes.read_text(encoding="utf-8").splitlines()
    loads = [line.split()[1] for line in lines if line.startswith("loaded")]
    closes = [line.split()[1] for line in lines if line.startswith("closed")]
    assert len(loads) == len(set(loads)) == workers, f"a process loaded the driver twice: {lines}"
    assert sorted(closes) == sorted(loads), f"a loaded harness was not closed: {lines}"
