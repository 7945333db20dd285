"""Probe a driver once: load it, open a store, connect, and read what the plan needs.

The plan gates checks on what a driver advertises (its profile) and on what its
store offers (an address for other processes, a settle hook, fault injection).
``probe_facts`` finds that out before any check runs, in the parent for an
in-process run and in the first supervised child otherwise; both sides call
this one function so they can never disagree about a driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from ..contract.values import StorageProfile
from ..fixtures.gating import ProfileFacts, profile_facts
from ..harness import DriverHarness, DriverLoadError, HarnessError, load_harness
from ..safe_text import describe_exception, safe_repr

__all__ = ["probe_driver", "probe_facts", "probe_keeping_harness"]


def probe_facts(driver: str, options: Mapping[str, str]) -> ProfileFacts:
    """Load ``driver``, open a store, connect once and return what gating needs to know.

    Every problem comes back as a ``HarnessError`` with one line naming the driver.
    """
    facts, harness = probe_keeping_harness(driver, options)
    with contextlib.suppress(Exception):
        harness.close()
    return facts


def probe_keeping_harness(driver: str, options: Mapping[str, str]) -> tuple[ProfileFacts, DriverHarness]:
    """``probe_facts``, and the loaded harness, left open for the caller to use and close.

    The supervised child that probes then runs checks with this same harness: loading a
    driver again can cost as much as a check (a backend process to start, a server to
    reach). On any problem the harness is closed here and a ``HarnessError`` raised.
    """
    harness = load_harness(driver, options)
    try:
        store = harness.open_store()
        try:
            instance = store.connect()
            try:
                facts = profile_facts(instance, store)
            finally:
                instance.close()
        finally:
            store.close()
        if not isinstance(facts.profile, StorageProfile):
            raise DriverLoadError(
                f"driver {driver!r}: its profile is {safe_repr(facts.profile)}, not a StorageProfile"
            )
    except BaseException as error:
        with contextlib.suppress(Exception):
            harness.close()
        if isinstance(error, HarnessError) or not isinstance(error, Exception):
            raise
        raise DriverLoadError(
            f"driver {driver!r}: opening a store and connecting failed: {describe_exception(error)}"
        ) from error
    return facts, harness


def probe_driver(driver: str, options: Mapping[str, str]) -> StorageProfile:
    """The profile ``driver`` advertises (see ``probe_facts``)."""
    return probe_facts(driver, options).profile
