"""Every conformance suite, collected into this test tree.

This is the same as ``from runlane_conformance.suites.test_<area> import *``
for each contract area, done in a loop so that a suite added to the toolkit
later (append, exclusive selection...) is picked up without editing this
file. The driver is chosen by ``runlane_driver`` in pyproject.toml; checks
for capabilities the driver does not advertise skip with a ``profile:`` reason.
"""

from __future__ import annotations

import importlib

from runlane_conformance.requirements import AREAS


def _import_suites() -> None:
    namespace = globals()
    for area in AREAS:
        name = f"runlane_conformance.suites.test_{area}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            continue  # this toolkit version has no suite for that area yet
        public = getattr(module, "__all__", [key for key in vars(module) if not key.startswith("_")])
        for key in public:
            value = getattr(module, key)
            if key.startswith("test") and key in namespace and namespace[key] is not value:
                raise RuntimeError(f"two suites define {key}: one check would hide the other")
            namespace[key] = value


_import_suites()
