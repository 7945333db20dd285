"""The suites' conftest: no fixtures (the plugin defines them all), only a hint when the plugin is missing.

A driver repository once needed ``from runlane_conformance.suites.conftest import *``
in its own conftest.py. That line is no longer needed: it still works, but it
imports nothing and warns once, naming the fix.
"""

from __future__ import annotations

import warnings

import pytest

from runlane_conformance.fixtures.plugin import PLUGIN_MISSING_HINT, plugin_active

# A star import asks for this name, which is not defined, so ``__getattr__`` below runs exactly
# for ``from runlane_conformance.suites.conftest import *`` and for nothing pytest does itself.
__all__ = ["runlane_suites_conftest_import"]  # noqa: F822


class SuitesConftestImportWarning(DeprecationWarning):
    """The old ``from runlane_conformance.suites.conftest import *`` line is still in a conftest."""


def __getattr__(name: str) -> None:
    if name != "runlane_suites_conftest_import":
        raise AttributeError(name)
    warnings.warn(
        SuitesConftestImportWarning(
            "`from runlane_conformance.suites.conftest import *` is no longer needed "
            "(the runlane_conformance plugin provides every fixture); delete that line"
        ),
        stacklevel=2,
    )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if items and not plugin_active(config):
        raise pytest.UsageError(PLUGIN_MISSING_HINT)
