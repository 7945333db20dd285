"""A broken driver: every transaction raises, so every check that runs one fails when run plainly."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.hostile.drivers import Harness


class Broken(RuntimeError):
    """What every transaction of the broken driver raises."""


def _refuse() -> None:
    raise Broken("this driver is broken: no transaction ever runs")


class BrokenHarness(Harness):
    """The reference harness, except that ``before`` (run ahead of every transaction) raises."""

    def __init__(
        self, options: Mapping[str, str] | None = None, before: Callable[[], None] = _refuse
    ) -> None:
        super().__init__(options)
        self._action = before

    def before(self) -> None:
        self._action()


def broken(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options)
