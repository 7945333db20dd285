"""The built distributions carry everything a certification run needs, outside this checkout.

``python -m build`` makes the sdist first and then the wheel *from the sdist*, so a
wheel that has every file also proves the sdist is complete. A file that exists in
``src/`` but not in the wheel would only show up as a missing-file error on a user's
machine, so the wheel is listed and compared with the source tree.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import runlane_conformance

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "runlane_conformance"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, f"python -m build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    return out


def _only(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {directory}, found {[p.name for p in found]}"
    return found[0]


def _package_files() -> set[str]:
    """Every file of the package as it would be installed (bytecode caches excluded)."""
    return {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def test_the_wheel_contains_every_file_of_the_package(dist: Path) -> None:
    wheel = _only(dist, "runlane_conformance-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    missing = sorted(_package_files() - names)
    assert missing == [], f"files in src/ but not in the wheel: {missing}"


def test_the_wheel_ships_the_data_files_a_run_reads(dist: Path) -> None:
    wheel = _only(dist, "runlane_conformance-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "runlane_conformance/py.typed" in names
    vectors = {name for name in names if name.startswith("runlane_conformance/fixtures/vectors/")}
    assert any(name.endswith("/cursors.json") for name in vectors)
    assert any(name.startswith("runlane_conformance/fixtures/vectors/documents/") for name in vectors)
    suites = {name for name in names if name.startswith("runlane_conformance/suites/test_")}
    assert len(suites) >= 10, f"the suites are missing from the wheel: {sorted(suites)}"


def test_the_wheel_registers_the_cli_plugin_and_reference_driver(dist: Path) -> None:
    wheel = _only(dist, "runlane_conformance-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (entry_points_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        (metadata_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        entry_points_text = archive.read(entry_points_name).decode()
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    parser = configparser.ConfigParser()
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(entry_points_text)
    assert parser["console_scripts"]["runlane-certify"] == "runlane_conformance.cli.entry:main"
    assert parser["pytest11"]["runlane_conformance"] == "runlane_conformance.fixtures.plugin"
    assert parser["runlane.storage_drivers"]["local"] == "runlane_conformance.local.harness:local_harness"
    assert metadata["Version"] == runlane_conformance.__version__
    assert metadata["License-Expression"] == "MIT"


def test_the_sdist_carries_the_sources_tests_docs_and_licence(dist: Path) -> None:
    sdist = _only(dist, "runlane_conformance-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for required in ("LICENSE", "README.md", "pyproject.toml", "docs/contract.md", "tests/test_packaging.py"):
        assert required in names, f"{required} is missing from the sdist"
    assert not any(name.startswith(".venv/") for name in names)
