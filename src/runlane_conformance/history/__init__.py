"""A concurrent-history checker in the manner of Jepsen's Elle, for histories our workload records.

``model`` holds the recorded history (frozen dataclasses), ``store`` saves and
loads it as schema-versioned JSON, ``check`` builds the dependency graph and
names every anomaly with its shortest witness, ``findings`` holds the anomaly
classes, the isolation levels and the report. Nothing here imports a driver: a
saved history can be re-checked anywhere with
``python -m runlane_conformance.history FILE``.
"""

from __future__ import annotations

from .check import Edge, EdgeKind, check_history
from .findings import (
    LEVELS,
    MEANING,
    PROSCRIBED_BY,
    Anomaly,
    Finding,
    Level,
    RealtimeCycle,
    Report,
    Step,
    describe_attempt,
)
from .model import (
    Append,
    Attempt,
    Bound,
    History,
    IndexEntry,
    Operation,
    Outcome,
    Read,
    Scan,
    ScanItem,
    Seen,
    Span,
    Write,
    WriteKind,
)
from .store import FORMAT, SCHEMA_VERSION, HistoryFormatError, from_json, load, save, to_json

__all__ = [
    "FORMAT",
    "LEVELS",
    "MEANING",
    "PROSCRIBED_BY",
    "SCHEMA_VERSION",
    "Anomaly",
    "Append",
    "Attempt",
    "Bound",
    "Edge",
    "EdgeKind",
    "Finding",
    "History",
    "HistoryFormatError",
    "IndexEntry",
    "Level",
    "Operation",
    "Outcome",
    "Read",
    "RealtimeCycle",
    "Report",
    "Scan",
    "ScanItem",
    "Seen",
    "Span",
    "Step",
    "Write",
    "WriteKind",
    "check_history",
    "describe_attempt",
    "from_json",
    "load",
    "save",
    "to_json",
]
