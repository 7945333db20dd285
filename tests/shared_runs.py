"""One run per driver and arguments, shared by every test of a session that asks for the same run.

Several tests judge the same certification: one asserts the level, another that a requirement of
that run passed, a third compares its outcomes with the other isolation mode's. Each used to run it
again, with the same driver, options, seed and mode, so with the same outcomes. ``certified`` and
``suites_run`` run it once per session and hand every later caller the same ``RunResult``.

The result is keyed by everything the run depends on: the entry point, the driver, its options, every
keyword argument and the working directory (an isolated backend imports a ``module:factory`` from
it). Under pytest-xdist the first worker to ask runs it, holding a lock on the key; a worker asking
for the same key meanwhile waits for that lock (no clock involved), then reads the pickled result.
A run that raises caches nothing: the next caller runs it again and gets the exception itself.

The directory is made by ``tests/conftest.py`` in the controlling process and handed to xdist's
workers through ``RUNLANE_TESTS_SHARED_RUNS``; it is removed when the session ends. Outside pytest
(or where ``fcntl`` is missing) a run is shared within the process only.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import pickle
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runlane_conformance.run.certify import certify_driver
from runlane_conformance.run.model import RunResult
from runlane_conformance.runner import run_suites

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux, where CI runs
    fcntl = None  # type: ignore[assignment]

#: The environment variable naming the session's directory of shared runs.
SHARED_RUNS_ENV = "RUNLANE_TESTS_SHARED_RUNS"

_memory: dict[str, RunResult] = {}


def _key(
    function: Callable[..., RunResult],
    driver: str,
    options: Mapping[str, str] | None,
    kwargs: Mapping[str, Any],
) -> str:
    """The run's identity: its arguments with every default filled in, so spelling a default out or
    leaving it off names the same run."""
    bound = inspect.signature(function).bind(driver, dict(sorted(dict(options or {}).items())), **kwargs)
    bound.apply_defaults()
    described = {
        "entry": function.__name__,
        "arguments": sorted(
            (name, repr(tuple(value) if isinstance(value, list) else value))
            for name, value in bound.arguments.items()
        ),
        "cwd": os.getcwd(),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _shared(key: str, run: Callable[[], RunResult]) -> RunResult:
    if key in _memory:
        return _memory[key]
    directory = os.environ.get(SHARED_RUNS_ENV)
    if not directory or fcntl is None or not Path(directory).is_dir():
        result = _memory[key] = run()
        return result
    stored = Path(directory) / f"{key}.pickle"
    with _locked(Path(directory) / f"{key}.lock"):
        if stored.exists():
            loaded: RunResult = pickle.loads(stored.read_bytes())
            result = _memory[key] = loaded
            return result
        result = run()
        partial = stored.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(result))
        partial.replace(stored)
    _memory[key] = result
    return result


def certified(driver: str, options: Mapping[str, str] | None = None, **kwargs: Any) -> RunResult:
    """``certify_driver(driver, options, **kwargs)``, run once per session for these arguments."""
    return _shared(
        _key(certify_driver, driver, options, kwargs),
        lambda: certify_driver(driver, dict(options or {}), **kwargs),
    )


def suites_run(driver: str, options: Mapping[str, str] | None = None, **kwargs: Any) -> RunResult:
    """``run_suites(driver, options, **kwargs)``, run once per session for these arguments."""
    return _shared(
        _key(run_suites, driver, options, kwargs),
        lambda: run_suites(driver, dict(options or {}), **kwargs),
    )
