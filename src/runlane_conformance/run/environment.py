"""The closed test environment: the exact pytest command line and process environment of a run.

A certification must not depend on who runs it. So a run ignores ambient pytest
configuration: ``PYTEST_ADDOPTS`` and ``PYTEST_PLUGINS`` are dropped, plugin
autoloading is disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) and exactly the
plugins a run needs are named with ``-p`` (ours and Hypothesis's), no ini file is
read (``-c /dev/null``), and no conftest.py is picked up except the suites' own,
which is loaded by module name. What was loaded is recorded for the report.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "AMBIENT_VARIABLES",
    "BYTECODE_CACHE_VARIABLE",
    "REQUIRED_PLUGINS",
    "SuiteSource",
    "bytecode_cache",
    "closed_environment",
    "closed_process_environment",
    "loaded_plugins",
    "pytest_arguments",
    "suite_digest",
]

#: Environment variables through which ambient configuration would reach pytest.
AMBIENT_VARIABLES: tuple[str, ...] = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
#: Names the directory children keep compiled bytecode in, or ``off`` (see ``bytecode_cache``).
BYTECODE_CACHE_VARIABLE = "RUNLANE_BYTECODE_CACHE"

#: The plugins a run loads by name (nothing else is loaded: autoload is off).
REQUIRED_PLUGINS: tuple[str, ...] = ("_hypothesis_pytestplugin", "runlane_conformance.fixtures.plugin")


@dataclass(frozen=True)
class SuiteSource:
    """Where the checks come from: pytest arguments, the rootdir node ids are relative to,
    the conftest modules to load by name, and the directories whose skips are profile gating."""

    args: tuple[str, ...]
    rootdir: str
    conftest_modules: tuple[str, ...]
    trusted: tuple[str, ...]
    files: tuple[str, ...]


def pytest_arguments(
    source: SuiteSource,
    *,
    driver: str,
    options: Mapping[str, str],
    hypothesis_profile: str,
    seed: int,
    areas: Sequence[str],
    requirements: Sequence[str],
    examples: Path | None = None,
    isolated: bool = False,
) -> list[str]:
    """The complete pytest command line of a run (no ini, no conftest pickup, named plugins only).

    ``examples`` is the Hypothesis example database the checks save failures to and replay first;
    without one nothing is kept (``-p no:cacheprovider`` switches the plugin's default off).
    ``isolated`` serves the driver from a backend process (``--runlane-isolation process``), so
    the session names the driver as asked for, never by the command that serves it.
    """
    args = ["-c", os.devnull, "--rootdir", source.rootdir, "--noconftest"]
    # pytest's own faulthandler plugin would redirect the fatal-signal dump away from the stack file.
    args += ["-p", "no:cacheprovider", "-p", "no:faulthandler"]
    for plugin in (*REQUIRED_PLUGINS, *source.conftest_modules):
        args += ["-p", plugin]
    args += ["-q", "--no-header", "--capture=sys", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    args += list(source.args)
    args += ["--runlane-driver", driver]
    for key, value in options.items():
        args += ["--runlane-option", f"{key}={value}"]
    if isolated:
        args += ["--runlane-isolation", "process"]
    args += ["--runlane-hypothesis-profile", hypothesis_profile, f"--hypothesis-seed={seed}"]
    for area in areas:
        args += ["--runlane-area", area]
    for requirement_id in requirements:
        args += ["--runlane-requirement", requirement_id]
    if examples is not None:
        args += ["--runlane-examples", str(examples)]
    return args


def bytecode_cache(base: Mapping[str, str] | None = None) -> Path | None:
    """The toolkit's private bytecode cache directory, created if needed; ``None`` when unusable.

    ``RUNLANE_BYTECODE_CACHE`` names it (``off`` disables it); otherwise it is
    ``runlane-conformance/pycache`` under ``XDG_CACHE_HOME`` (default ``~/.cache``).
    """
    env = os.environ if base is None else base
    chosen = env.get(BYTECODE_CACHE_VARIABLE, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        directory = Path(chosen).expanduser()
    else:
        cache_home = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
        directory = Path(cache_home) / "runlane-conformance" / "pycache"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK | os.X_OK) else None


def closed_process_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: ``os.environ``) without ambient pytest configuration, autoload disabled.

    A child keeps its compiled bytecode (and pytest's assertion-rewritten suite modules) in the
    toolkit's private cache (``bytecode_cache``) through ``PYTHONPYCACHEPREFIX``, so nothing is
    ever written beside the user's sources or into site-packages, and the next child starts from
    the cache instead of compiling pytest, Hypothesis, the toolkit and the suites again (about
    two thirds of a child's start-up CPU). Without a usable cache directory no bytecode is written
    at all, as before. A ``PYTHONPYCACHEPREFIX`` the user set is kept.
    """
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in AMBIENT_VARIABLES}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if env.get("PYTHONPYCACHEPREFIX"):
        return env
    cache = bytecode_cache(base)
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = env.get("PYTHONDONTWRITEBYTECODE", "1")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


@contextlib.contextmanager
def closed_environment() -> Iterator[None]:
    """For an in-process run: the same closed environment, restored afterwards."""
    saved = {name: os.environ.get(name) for name in (*AMBIENT_VARIABLES, "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    for name in AMBIENT_VARIABLES:
        os.environ.pop(name, None)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def loaded_plugins(config: Any) -> list[tuple[str, str]]:
    """(module, version) of every non-builtin plugin registered in a pytest session."""
    names = set()
    for plugin in config.pluginmanager.get_plugins():
        name = getattr(plugin, "__name__", None)
        if not isinstance(name, str):
            continue
        # pytest registers some built-ins as classes (``LegacyTmpdirPlugin``); judge those by their module.
        module = name if isinstance(plugin, types.ModuleType) else str(getattr(plugin, "__module__", ""))
        if not module.startswith(("_pytest", "conftest")):
            names.add(name)
    # Mapping every installed module to its distribution reads every distribution's metadata (a
    # tenth of a second in a full environment); a closed run loads only plugins whose versions are
    # known without it, so it is read only for a plugin that is not one of those.
    distributions: Mapping[str, list[str]] | None = None
    found = []
    for name in sorted(names):
        top = name.partition(".")[0]
        version = "?"
        if distributions is None and top not in ("runlane_conformance", "_hypothesis_pytestplugin"):
            distributions = importlib.metadata.packages_distributions()
        for dist in (distributions or {}).get(top, []):
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                version = importlib.metadata.version(dist)
                break
        if top == "runlane_conformance":
            from .. import __version__

            version = __version__
        if top == "_hypothesis_pytestplugin":
            version = importlib.metadata.version("hypothesis")
        found.append((name, version))
    return found


def suite_digest(files: Sequence[str]) -> str:
    """sha256 over the suite files (path relative to their package, then content), in sorted order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        path = Path(name)
        try:
            content = path.read_bytes()
        except OSError:
            content = b"<unreadable>"
        digest.update(path.name.encode() + b"\0" + content + b"\0")
    return f"sha256:{digest.hexdigest()}"
