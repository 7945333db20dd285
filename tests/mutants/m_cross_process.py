"""Broken drivers that keep the rules inside one process and break them across processes.

The drivers themselves are in ``xproc_sqlite`` (built on the SQLite example,
whose store has an address); this module only declares them, and its
factories import them when a run loads one, so collecting the mutant catalog
does not need the SQLite example installed (a run of these mutants does).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from runlane_conformance.catalogue import append, completion_waits, conflicts, exclusive_selection, profile
from tests.mutants.catalog import Mutant


def _lazy(name: str) -> Callable[[Mapping[str, str]], Any]:
    def factory(options: Mapping[str, str]) -> Any:
        return getattr(importlib.import_module("tests.mutants.xproc_sqlite"), name)(options)

    return factory


MUTANTS = [
    Mutant(
        "xproc-exclusive-by-in-process-lock",
        "tests.mutants.m_cross_process:exclusive_by_in_process_lock",
        exclusive_selection.DISJOINT_PROCESSES,
        "exclusive selection is exclusive only under the in-process gate (SQLite's lock taken only to write)",
    ),
    Mutant(
        "xproc-holds-released-lazily",
        "tests.mutants.m_cross_process:holds_released_lazily",
        exclusive_selection.RELEASED_PROCESSES,
        "holds other processes see are released only at the holder process's next transaction",
    ),
    Mutant(
        "xproc-conflicts-by-in-process-lock",
        "tests.mutants.m_cross_process:conflicts_by_in_process_lock",
        conflicts.ACROSS_PROCESSES,
        "writes drop their version conditions, trusting the in-process gate to keep reads true",
    ),
    Mutant(
        "xproc-append-head-cached",
        "tests.mutants.m_cross_process:append_head_cached",
        append.ACROSS_PROCESSES,
        "native append takes its next position from a per-process cache of the head",
    ),
    Mutant(
        "xproc-group-commit",
        "tests.mutants.m_cross_process:group_commit",
        profile.DURABLE_KILLED,
        "commits are acknowledged at a savepoint and made durable when the process's last instance closes",
    ),
    Mutant(
        "xproc-marker-in-process-set",
        "tests.mutants.m_cross_process:marker_in_process_set",
        completion_waits.ACROSS_PROCESSES,
        "completion-wait markers are kept in a per-process set instead of the store",
    ),
]

#: For each mutant, the single-process requirement of the same rule that it still passes.
IN_PROCESS_TWINS = {
    "xproc-exclusive-by-in-process-lock": "exclusive_selection.disjoint-across-instances",
    "xproc-holds-released-lazily": "exclusive_selection.released-at-commit",
    "xproc-conflicts-by-in-process-lock": "conflicts.lost-update",
    "xproc-append-head-cached": "append.mixed-writers",
    "xproc-group-commit": "profile.durable-survives-reconnect",
    "xproc-marker-in-process-set": "completion_waits.marker-stored-for-every-instance",
}

exclusive_by_in_process_lock = _lazy("exclusive_by_in_process_lock")
conflicts_by_in_process_lock = _lazy("conflicts_by_in_process_lock")
append_head_cached = _lazy("append_head_cached")
group_commit = _lazy("group_commit")
holds_released_lazily = _lazy("holds_released_lazily")
marker_in_process_set = _lazy("marker_in_process_set")
