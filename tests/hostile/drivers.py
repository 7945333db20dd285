"""Hostile and sloppy drivers: each wraps the reference driver and misbehaves in one way.

Every factory here is a ``module:factory`` target for ``runlane-certify run
--driver tests.hostile.drivers:<factory>``. A misbehaviour fires only inside
the check named by ``TARGET`` (pytest names the running check in
``PYTEST_CURRENT_TEST``), so the tests can show that the run goes on around it.
Some write marker files (pids, "started") into the directory named by the
``RUNLANE_HOSTILE_DIR`` environment variable, so a test can wait on them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
import unittest
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.harness import load_harness

#: The check every misbehaviour aims at (a quick, plain one).
TARGET = "sealing.reads-refused-after-now"
#: One check of ``TARGET``, for misbehaviours that cost a fresh process or a deadline each time.
ONE_CHECK = "test_a_read_after_now_is_refused_even_as_the_first_read"
#: A Hypothesis check (``@given``) of the limits area, for hangs during the search.
HYPOTHESIS_TARGET = "test_any_split_of_the_point_read_budget"


def _in(target: str) -> bool:
    return target in os.environ.get("PYTEST_CURRENT_TEST", "")


def _mark(name: str, text: str = "") -> None:
    """Write a marker file atomically (a reader never sees it empty)."""
    directory = os.environ.get("RUNLANE_HOSTILE_DIR")
    if directory:
        partial = Path(directory, f".{name}.{os.getpid()}")
        partial.write_text(text or str(os.getpid()), encoding="utf-8")
        partial.replace(Path(directory, name))


class Driver:
    """A driver instance that runs ``before`` ahead of every transaction, then delegates."""

    def __init__(self, inner: Any, before: Callable[[], None], profile: Callable[[Any], Any]) -> None:
        self._inner = inner
        self._before = before
        self._profile = profile

    @property
    def profile(self) -> Any:
        return self._profile(self._inner.profile)

    def transaction(self, callback: Callable[[Any], Any]) -> Any:
        self._before()
        return self._inner.transaction(callback)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        self._inner.close()


class Store:
    def __init__(self, inner: Any, harness: Harness) -> None:
        self._inner = inner
        self._harness = harness

    def connect(self, *, clock: Any = None) -> Any:
        driver = Driver(self._inner.connect(clock=clock), self._harness.before, self._harness.profile)
        self._harness.on_connect(driver)
        return driver

    def address(self) -> Any:
        return self._inner.address()

    def close(self) -> None:
        self._inner.close()


class Harness:
    """The reference harness with hooks; subclasses override what they break."""

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self._inner = load_harness("local", dict(options or {}))
        self.checks_seen = False

    def before(self) -> None:
        """Runs before every transaction."""

    def profile(self, advertised: Any) -> Any:
        return advertised

    def on_connect(self, driver: Driver) -> None:
        """Runs when an instance is opened."""

    def open_store(self) -> Store:
        if os.environ.get("PYTEST_CURRENT_TEST"):
            self.checks_seen = True
        return Store(self._inner.open_store(), self)

    def attach(self, address: object) -> Any:
        return self._inner.attach(address)

    def close(self) -> None:
        self._inner.close()


def _when(target: str, action: Callable[[], None]) -> Callable[[Mapping[str, str]], Harness]:
    class Hostile(Harness):
        def before(self) -> None:
            if _in(target):
                action()

    return lambda options: Hostile(options)


def _segfault() -> None:
    _mark("started")
    ctypes.string_at(0)  # reads address 0: SIGSEGV, like a crashing C extension


def _deadlock() -> None:
    _mark("started")
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # never returns


def _hang_ignoring_signals() -> None:
    _mark("started")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGINT, signal.SIGTERM})
    while True:
        time.sleep(0.05)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


os_exit_mid_check = _when(ONE_CHECK, lambda: os._exit(0))
exits_3_mid_check = _when(TARGET, lambda: os._exit(3))
segfaults_mid_check = _when(TARGET, _segfault)
raises_skiptest = _when(TARGET, lambda: (_ for _ in ()).throw(unittest.SkipTest("not today")))
raises_pytest_skip = _when(TARGET, lambda: pytest.skip("profile: append not offered"))
raises_pytest_xfail = _when(TARGET, lambda: pytest.xfail("known issue"))
raises_pytest_exit = _when(TARGET, lambda: pytest.exit("done here", returncode=0))
raises_system_exit = _when(TARGET, lambda: sys.exit(0))
raises_keyboard_interrupt = _when(TARGET, lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
deadlocks_in_hypothesis = _when(HYPOTHESIS_TARGET, _deadlock)
hangs_masking_signals = _when(ONE_CHECK, _hang_ignoring_signals)
raises_unprintable = _when(TARGET, lambda: (_ for _ in ()).throw(_Unprintable()))
raises_huge_message = _when(TARGET, lambda: (_ for _ in ()).throw(ValueError("x" * 10_000_000)))
hangs_until_interrupted = _when(TARGET, lambda: (_mark("started"), time.sleep(3600)))


def exits_in_factory(options: Mapping[str, str]) -> Harness:
    sys.exit(0)


class _ExitsInClose(Harness):
    def on_connect(self, driver: Driver) -> None:
        if _in(TARGET):
            driver.close = lambda: sys.exit(0)  # type: ignore[method-assign]


def exits_in_close(options: Mapping[str, str]) -> Harness:
    return _ExitsInClose(options)


class _ExitsInSessionCleanup(Harness):
    def close(self) -> None:
        super().close()
        if self.checks_seen:  # not during the preflight probe: at the end of the session
            sys.exit(0)


def exits_in_session_cleanup(options: Mapping[str, str]) -> Harness:
    return _ExitsInSessionCleanup(options)


class _LeaksThread(Harness):
    def on_connect(self, driver: Driver) -> None:
        threading.Thread(target=time.sleep, args=(3600,), name="leaked", daemon=False).start()


def leaks_a_thread(options: Mapping[str, str]) -> Harness:
    return _LeaksThread(options)


class _TwoFacedLimits(Harness):
    """Tells the preflight probe one point-read limit and shows the checks (and enforces) another."""

    def profile(self, advertised: Any) -> Any:
        if os.environ.get("PYTEST_CURRENT_TEST"):
            return advertised
        return replace(advertised, limits=replace(advertised.limits, max_point_reads=5_000))


def two_faced_limits(options: Mapping[str, str]) -> Harness:
    return _TwoFacedLimits({**options, "max_point_reads": "50"})


class _TwoFacedAppend(Harness):
    """Says "no append" to the probe (so append would be gated) but offers it to the checks."""

    def profile(self, advertised: Any) -> Any:
        if os.environ.get("PYTEST_CURRENT_TEST"):
            return advertised
        return replace(advertised, append=False)


def two_faced_append(options: Mapping[str, str]) -> Harness:
    return _TwoFacedAppend(options)


class _Typo(Harness):
    """A driver with a typo in its transaction method: every transaction raises ``TypeError``."""

    def on_connect(self, driver: Driver) -> None:
        inner = driver._inner

        def transaction(callback: Callable[[Any], Any]) -> Any:
            return inner.transaction(callback, driver)  # the typo: one argument too many

        driver.transaction = transaction  # type: ignore[method-assign]


def typo(options: Mapping[str, str]) -> Harness:
    return _Typo(options)
