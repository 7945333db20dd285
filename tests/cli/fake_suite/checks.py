"""How the fake suite tags a check: the same marker and id shape as the real suites."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])


def check(requirement_id: str) -> Callable[[F], F]:
    def tag(test: F) -> F:
        marked = pytest.mark.runlane_requirement(requirement_id)(test)
        return pytest.mark.parametrize("requirement_id", [requirement_id], ids=[requirement_id])(marked)  # type: ignore[no-any-return]

    return tag


def verdict(driver: Any, requirement_id: str) -> None:
    options = getattr(driver, "options", {})
    if "wait" in options:  # a driver that waits on its database for this long in every check
        time.sleep(float(options["wait"]))
    if options.get("typo") == "true":
        raise TypeError("transaction() takes 2 positional arguments but 3 were given")
    assert requirement_id not in driver.broken, f"the fake driver breaks {requirement_id} on purpose"
