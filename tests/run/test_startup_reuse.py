"""What a run's start-up reuses or narrows must never change what the run covers.

The parent builds the requirement catalogue from the ``catalogue`` package, never from a file a
driver could rewrite (``run.catalog``), and a restricted run collects only its areas' suite
modules (``run.certify._collected``). Both are only correct under the conditions tested here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runlane_conformance.catalogue import all_requirements
from runlane_conformance.run.catalog import suite_catalog


def test_the_catalogue_is_the_one_the_suites_declare_whatever_the_cache_directories_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A catalogue planted where the toolkit once cached it, every level turned into SHOULD.
    forged = [
        {"id": r.id, "level": "SHOULD", "clause": r.clause, "summary": r.summary, "capability": r.capability}
        for r in all_requirements().values()
    ]
    for directory in (tmp_path / "runlane-conformance" / "catalog", tmp_path / "chosen"):
        directory.mkdir(parents=True)
        for name in ("catalog.json", "catalog-planted.json"):
            (directory / name).write_text(json.dumps(forged), encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("RUNLANE_CATALOG_CACHE", str(tmp_path / "chosen"))
    planted = sorted(tmp_path.rglob("*"))
    assert suite_catalog() == all_requirements()
    assert list(suite_catalog()) == list(all_requirements())
    assert sorted(tmp_path.rglob("*")) == planted, "reading the catalogue wrote a file"


_COLLECT = """
import json, sys
import pytest
from runlane_conformance.run.events import EventPlugin
checks = []
def emit(event):
    if type(event).__name__ == "Collected":
        checks.extend(event.checks)
args = ["-c", "/dev/null", "--noconftest", "-p", "no:cacheprovider", "-p", "_hypothesis_pytestplugin",
        "-p", "runlane_conformance.fixtures.plugin", "-p", "runlane_conformance.suites.conftest",
        "--collect-only", "-q", "--runlane-driver", "local", "--pyargs", "runlane_conformance.suites"]
pytest.main(args, plugins=[EventPlugin(emit, ())])
sys.__stdout__.write("CHECKS " + json.dumps([[c.nodeid, c.requirement_id] for c in checks]) + "\\n")
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


def test_a_run_writes_no_catalogue_anywhere_only_its_bytecode_cache(tmp_path: Path) -> None:
    """The catalogue is never cached: a run leaves nothing under the cache or home directories but
    the children's compiled bytecode (``run.environment.bytecode_cache``)."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from runlane_conformance.cli.app import main; main(sys.argv[1:])",
            "run",
            "--driver",
            "local",
            "--requirement",
            "json_boundary.schema-version-one-only",
            "--examples",
            "none",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(cache)},
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    written = sorted(
        str(path.relative_to(tmp_path))
        for path in tmp_path.rglob("*")
        if path.is_file() and "pycache" not in path.relative_to(tmp_path).parts
    )
    assert written == [], written
    assert not list(tmp_path.rglob("*catalog*.json"))
