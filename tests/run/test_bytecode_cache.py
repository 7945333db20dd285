"""Supervised children keep compiled bytecode only in the toolkit's private cache, never beside sources."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runlane_conformance.run.environment import (
    BYTECODE_CACHE_VARIABLE,
    bytecode_cache,
    closed_process_environment,
)


def test_children_compile_into_the_private_cache_under_xdg_cache_home(tmp_path: Path) -> None:
    env = closed_process_environment({"XDG_CACHE_HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
    expected = tmp_path / "runlane-conformance" / "pycache"
    assert env["PYTHONPYCACHEPREFIX"] == str(expected)
    assert expected.is_dir()
    assert "PYTHONDONTWRITEBYTECODE" not in env


def test_the_cache_directory_can_be_named(tmp_path: Path) -> None:
    chosen = tmp_path / "mine"
    env = closed_process_environment({BYTECODE_CACHE_VARIABLE: str(chosen)})
    assert env["PYTHONPYCACHEPREFIX"] == str(chosen)


def test_switching_the_cache_off_writes_no_bytecode_at_all(tmp_path: Path) -> None:
    env = closed_process_environment({BYTECODE_CACHE_VARIABLE: "off", "XDG_CACHE_HOME": str(tmp_path)})
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "PYTHONPYCACHEPREFIX" not in env
    assert not (tmp_path / "runlane-conformance").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write to a read-only directory")
def test_an_unwritable_cache_location_falls_back_to_writing_no_bytecode(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    env = closed_process_environment({"XDG_CACHE_HOME": str(locked)})
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "PYTHONPYCACHEPREFIX" not in env


def test_a_cache_location_that_is_a_file_falls_back_to_writing_no_bytecode(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    assert bytecode_cache({BYTECODE_CACHE_VARIABLE: str(blocker / "pycache")}) is None
    env = closed_process_environment({BYTECODE_CACHE_VARIABLE: str(blocker / "pycache")})
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_a_pycache_prefix_the_user_chose_is_kept(tmp_path: Path) -> None:
    env = closed_process_environment({"PYTHONPYCACHEPREFIX": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert not (tmp_path / "runlane-conformance").exists()


def test_ambient_pytest_configuration_still_does_not_reach_a_child(tmp_path: Path) -> None:
    env = closed_process_environment(
        {"PYTEST_ADDOPTS": "-x", "PYTEST_PLUGINS": "evil", "XDG_CACHE_HOME": str(tmp_path)}
    )
    assert "PYTEST_ADDOPTS" not in env and "PYTEST_PLUGINS" not in env
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
