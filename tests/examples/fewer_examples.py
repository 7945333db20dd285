"""A pytest plugin for the example-driver test: the ``thorough`` settings with far fewer examples.

Loaded into the suite run with ``-p``. After the runlane plugin activated the
chosen Hypothesis profile, it re-registers ``runlane-thorough`` with the same
settings but ``EXAMPLES`` examples, and puts the original back when the run
ends, so nothing else in the process sees the change. The profile keeps its
name, so everything that reads it (the state machine's step count, the model
check's history cap) behaves as under the real thorough profile.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

#: Examples per property: enough to exercise every thorough-only setting, few enough for CI.
EXAMPLES = 3
PROFILE = "runlane-thorough"

_saved: list[Any] = []


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if settings.get_current_profile_name() != PROFILE:
        return
    original = settings.get_profile(PROFILE)
    _saved.append(original)
    settings.register_profile(PROFILE, settings(original, max_examples=EXAMPLES))
    settings.load_profile(PROFILE)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _saved:
        settings.register_profile(PROFILE, _saved.pop())
