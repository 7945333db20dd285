"""A fake driver harness for the runner tests: no storage, just a profile and planted failures.

Options:

* ``break=<id>,<id>`` -- the fake suite's checks of those requirement ids fail;
* ``append=true`` / ``exclusive=true`` -- advertise the optional capabilities;
* ``explode=true`` -- the factory raises, like a driver whose database is unreachable;
* ``point_reads=N`` -- advertise that point-read limit;
* ``history=N`` -- a broken lost-update scenario fails with a message of N history lines, and
  records the driver frame and reproduce command the way the plugin does for a real failure;
* ``typo=true`` -- every plain check raises the same ``TypeError``, like a driver with a typo;
* ``shrink=true`` -- a failing lost-update property announces that it is shrinking
  (the ``pytest_runlane_shrinking`` hook), as the suites' Hypothesis checks do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runlane_conformance import StorageLimits, StorageProfile

#: What a plugin-annotated failure of the fake suite records (option ``history``).
DRIVER_FRAME = "fake_driver.py:42 in transaction"
SHRINK_NOTE = "shrinking stopped after its 5 s budget: the example shown may not be the smallest"
REPRODUCE = "pytest --pyargs fake_suite.test_conflicts --runlane-driver fake -k lost_update_scenario"

KNOWN_OPTIONS = {
    "break",
    "append",
    "exclusive",
    "explode",
    "point_reads",
    "history",
    "shrink",
    "typo",
    "wait",
}


@dataclass
class FakeDriver:
    profile: StorageProfile
    broken: frozenset[str]
    options: Mapping[str, str] = field(default_factory=dict)
    closed: bool = False

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeStore:
    profile: StorageProfile
    broken: frozenset[str]
    options: Mapping[str, str] = field(default_factory=dict)
    instances: list[FakeDriver] = field(default_factory=list)

    def connect(self, *, clock: object = None) -> FakeDriver:
        driver = FakeDriver(self.profile, self.broken, self.options)
        self.instances.append(driver)
        return driver

    def address(self) -> None:
        return None

    def close(self) -> None:
        pass


@dataclass
class FakeHarness:
    profile: StorageProfile
    broken: frozenset[str]
    options: Mapping[str, str] = field(default_factory=dict)

    def open_store(self) -> FakeStore:
        return FakeStore(self.profile, self.broken, self.options)

    def attach(self, address: object) -> FakeStore:
        raise NotImplementedError("the fake store is process-local")

    def close(self) -> None:
        pass


def harness(options: Mapping[str, str]) -> FakeHarness:
    unknown = sorted(set(options) - KNOWN_OPTIONS)
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r}")
    if options.get("explode") == "true":
        raise ConnectionError("cannot reach the fake database")
    limits = StorageLimits(max_point_reads=int(options.get("point_reads", "100")))
    profile = StorageProfile(
        limits=limits,
        append=options.get("append") == "true",
        exclusive_candidates=options.get("exclusive") == "true",
    )
    broken = frozenset(filter(None, options.get("break", "").split(",")))
    return FakeHarness(profile, broken, dict(options))
