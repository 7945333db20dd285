"""The structured witness a failed history check carries into the report: its schema and its reading.

A history check records its witness (``history.witness.witness``) as a JSON user property
(``fixtures.evidence.WITNESS_PROPERTY``); the report copies it into the failure it belongs to, under
``witness``, after checking it against ``WITNESS_SCHEMA``. A property that does not parse or does not
fit the schema (capped on its way from a child process, or written by another toolkit) is left out:
the failure's text still carries the same witness in words, so nothing is lost but the drawing.

This module imports nothing beyond jsonschema, so the report builder and the HTML page can both use
it wherever each of them lives.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

__all__ = ["WITNESS_SCHEMA", "recorded_witness"]

_STRINGS = {"type": "array", "items": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 0}

_EDGE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source", "target", "kind", "key", "detail"],
    "properties": {
        "source": {"type": "string"},
        "target": {"type": "string"},
        "kind": {"enum": ["ww", "wr", "pwr", "rw", "prw", "rt"]},
        "key": {"type": "string"},
        "detail": {"type": "string"},
    },
}

#: One finding's witness: the attempts (nodes, each with its operations in words), the dependency
#: edges of its cycle in order (none for a finding that is not a cycle) and what the class rules out.
_FINDING: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["anomaly", "meaning", "explanation", "violates", "allowed_by", "cycle", "nodes", "edges"],
    "properties": {
        "anomaly": {"type": "string"},
        "meaning": {"type": "string"},
        "explanation": {"type": "string"},
        "violates": {**_STRINGS, "description": "the weakest isolation levels that forbid this class"},
        "allowed_by": {**_STRINGS, "description": "the strongest isolation levels that still permit it"},
        "cycle": {"type": "boolean"},
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "transaction", "outcome", "where", "ops"],
                "properties": {
                    "id": {"type": "string"},
                    "transaction": {"type": "string"},
                    "outcome": {"enum": ["committed", "aborted", "unknown"]},
                    "where": {"type": "string"},
                    "ops": _STRINGS,
                },
            },
        },
        "edges": {"type": "array", "items": _EDGE},
        "realtime": {
            "type": "array",
            "items": _EDGE,
            "description": "real-time order between this finding's attempts (context: one ended before the "
            "other began); absent in reports made before histories recorded it",
        },
    },
}

WITNESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "the history checker's findings as data (a failed histories check only): each "
    "anomaly's attempts, operations and dependency edges, and the isolation levels the history is "
    "consistent with and violates",
    "required": [
        "attempts",
        "committed",
        "edges",
        "levels",
        "consistent_with",
        "violated",
        "undecided",
        "realtime",
        "findings",
        "omitted",
    ],
    "properties": {
        "attempts": _COUNT,
        "committed": _COUNT,
        "edges": _COUNT,
        "levels": {"type": "string"},
        "consistent_with": _STRINGS,
        "violated": _STRINGS,
        "undecided": _STRINGS,
        "realtime": {
            "type": "string",
            "description": "what the recorded real-time order adds (context, never a verdict): how many rt "
            "edges the attempts' logical spans give and whether a cycle runs through them, or that none "
            "were recorded",
        },
        "realtime_cycle": {
            **_FINDING,
            "description": "the shortest cycle through real-time order (not strict serializable), when "
            "there is one; context only",
        },
        "findings": {"type": "array", "items": _FINDING},
        "omitted": {"type": "object", "additionalProperties": _COUNT},
    },
}

_VALIDATOR = Draft202012Validator(WITNESS_SCHEMA)


def recorded_witness(text: str | None) -> dict[str, Any] | None:
    """The witness recorded as ``text``, or ``None`` when there is none or it is not a valid one."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not _VALIDATOR.is_valid(data):
        return None
    assert isinstance(data, dict)
    return data
