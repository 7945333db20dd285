"""Histories as JSON files: saved beside a failing check, re-checked later without the driver.

The file says what it is (``"format": "runlane-history"``) and which layout it
uses (``"version"``); a file of another version is refused with that reason
rather than half-read, so an old history is never judged by a misreading.
Key order and number formatting are fixed, so one history always gives the
same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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

__all__ = ["FORMAT", "SCHEMA_VERSION", "HistoryFormatError", "from_json", "load", "save", "to_json"]

FORMAT = "runlane-history"
#: Version 2 added each attempt's ``span`` (its logical start and end, or null); a version 1 file
#: is still read, as attempts without one.
SCHEMA_VERSION = 2
_READS = (1, 2)


class HistoryFormatError(ValueError):
    """The file is not a history this version of the checker reads (wrong format, version or shape)."""


def _seen(seen: Seen | None) -> dict[str, str] | None:
    return None if seen is None else {"version": seen.version, "value": seen.value}


def _bound(bound: Bound | None) -> dict[str, Any] | None:
    return None if bound is None else {"value": bound.value, "inclusive": bound.inclusive}


def _op(op: Operation) -> dict[str, Any]:
    if isinstance(op, Read):
        return {"op": "read", "key": op.key, "seen": _seen(op.seen)}
    if isinstance(op, Scan):
        return {
            "op": "scan",
            "index": op.index,
            "partition": op.partition,
            "lower": _bound(op.lower),
            "upper": _bound(op.upper),
            "descending": op.descending,
            "limit": op.limit,
            "exclusive": op.exclusive,
            "exact": op.exact,
            "items": [{"sort": i.sort, "key": i.key, "value": i.value} for i in op.items],
            "more": op.more,
        }
    if isinstance(op, Write):
        entry = op.entry
        return {
            "op": "write",
            "key": op.key,
            "kind": op.kind.value,
            "supersedes": _seen(op.supersedes),
            "value": op.value,
            "entry": None
            if entry is None
            else {"index": entry.index, "partition": entry.partition, "sort": entry.sort},
            "version": op.version,
        }
    return {"op": "append", "stream": op.stream, "partition": op.partition, "values": list(op.values)}


def to_json(history: History) -> str:
    """The history as canonical JSON text (fixed key order, one attempt per line)."""
    attempts = [
        json.dumps(
            {
                "id": a.id,
                "transaction": a.transaction,
                "process": a.process,
                "client": a.client,
                "instance": a.instance,
                "outcome": a.outcome.value,
                "ops": [_op(op) for op in a.ops],
                "span": None
                if a.span is None
                else {"clock": a.span.clock, "start": a.span.start, "end": a.span.end},
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        for a in history.attempts
    ]
    head = json.dumps(
        {"format": FORMAT, "version": SCHEMA_VERSION, "meta": dict(history.meta)},
        sort_keys=True,
        separators=(",", ":"),
    )
    return head[:-1] + ',"attempts":[\n' + ",\n".join(attempts) + "\n]}\n"


def _load_seen(raw: Any) -> Seen | None:
    return None if raw is None else Seen(str(raw["version"]), str(raw["value"]))


def _load_bound(raw: Any) -> Bound | None:
    return None if raw is None else Bound(str(raw["value"]), bool(raw["inclusive"]))


def _load_span(raw: Any) -> Span | None:
    if raw is None:
        return None
    return Span(str(raw["clock"]), int(raw["start"]), int(raw["end"]))


def _load_op(raw: dict[str, Any]) -> Operation:
    kind = raw["op"]
    if kind == "read":
        return Read(str(raw["key"]), _load_seen(raw["seen"]))
    if kind == "scan":
        return Scan(
            index=str(raw["index"]),
            partition=str(raw["partition"]),
            lower=_load_bound(raw["lower"]),
            upper=_load_bound(raw["upper"]),
            descending=bool(raw["descending"]),
            limit=int(raw["limit"]),
            exclusive=bool(raw["exclusive"]),
            exact=bool(raw["exact"]),
            items=tuple(
                ScanItem(str(i["sort"]), str(i["key"]), None if i["value"] is None else str(i["value"]))
                for i in raw["items"]
            ),
            more=bool(raw["more"]),
        )
    if kind == "write":
        entry = raw["entry"]
        return Write(
            key=str(raw["key"]),
            kind=WriteKind(raw["kind"]),
            supersedes=_load_seen(raw["supersedes"]),
            value=None if raw["value"] is None else str(raw["value"]),
            entry=None
            if entry is None
            else IndexEntry(str(entry["index"]), str(entry["partition"]), str(entry["sort"])),
            version=None if raw["version"] is None else str(raw["version"]),
        )
    if kind == "append":
        return Append(str(raw["stream"]), str(raw["partition"]), tuple(str(v) for v in raw["values"]))
    raise HistoryFormatError(f"unknown operation {kind!r}")


def from_json(text: str) -> History:
    """Parse a history written by ``to_json``; refuses another format or schema version."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise HistoryFormatError(f"not JSON: {error}") from error
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise HistoryFormatError(f"not a {FORMAT} file")
    if raw.get("version") not in _READS:
        raise HistoryFormatError(
            f"history schema version {raw.get('version')!r}; this checker reads versions "
            f"{', '.join(map(str, _READS))} only"
        )
    try:
        attempts = tuple(
            Attempt(
                id=str(a["id"]),
                transaction=str(a["transaction"]),
                process=int(a["process"]),
                client=int(a["client"]),
                instance=int(a["instance"]),
                ops=tuple(_load_op(op) for op in a["ops"]),
                outcome=Outcome(a["outcome"]),
                span=_load_span(a.get("span")),
            )
            for a in raw["attempts"]
        )
        meta = tuple(sorted((str(k), str(v)) for k, v in dict(raw.get("meta", {})).items()))
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, HistoryFormatError):
            raise
        raise HistoryFormatError(f"malformed history: {type(error).__name__}: {error}") from error
    return History(attempts, meta)


def save(history: History, path: Path) -> Path:
    """Write ``history`` to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_json(history), encoding="utf-8")
    return path


def load(path: Path) -> History:
    return from_json(path.read_text(encoding="utf-8"))
