"""The typed report model (``report.model``) and the shipped schema file describe one document.

The schema is data (``report/schema.json``), so nothing generates it from the types: these tests are
what keeps the two from drifting. Every object the schema describes has a ``TypedDict`` with exactly
its properties, required where the schema requires them, and the schema's enums and constants are
the toolkit's own values.
"""

from __future__ import annotations

import json
import typing
from importlib.resources import files
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from runlane_conformance.report import model
from runlane_conformance.report.schema import (
    LEVELS,
    REPORT_SCHEMA,
    REPORT_VERSION,
    RESULT_STATUSES,
    UNFINISHED_STATUSES,
)
from runlane_conformance.run.outcomes import ExpectationResult, RequirementOutcome

SHAPES = {"results": model.ResultsReport, "unfinished": model.UnfinishedReport}


def _typed_dict_of(hint: Any) -> Any:
    """The TypedDict a field's type names, directly or as a list's items (``None`` otherwise)."""
    if get_origin(hint) is typing.NotRequired:
        hint = get_args(hint)[0]
    if is_typeddict(hint):
        return hint
    if get_origin(hint) is list and is_typeddict(get_args(hint)[0]):
        return get_args(hint)[0]
    return None


def _pairs(schema: dict[str, Any], typed: Any, path: str) -> list[tuple[str, dict[str, Any], Any]]:
    """Every (path, schema object, TypedDict) pair reachable from a shape, depth first."""
    found = [(path, schema, typed)]
    hints = get_type_hints(typed, include_extras=True)
    for name, sub in schema.get("properties", {}).items():
        inner = _typed_dict_of(hints.get(name))
        target = sub.get("items", sub) if sub.get("type") == "array" else sub
        if inner is not None and "properties" in target:
            found += _pairs(target, inner, f"{path}.{name}")
    return found


def _objects(shape: str) -> list[tuple[str, dict[str, Any], Any]]:
    return _pairs(REPORT_SCHEMA["$defs"][shape], SHAPES[shape], f"$.{shape}")


def test_the_schema_served_is_the_shipped_data_file() -> None:
    text = files("runlane_conformance.report").joinpath("schema.json").read_text("utf-8")
    assert json.loads(text) == REPORT_SCHEMA


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_schema_object_has_a_typed_dict_with_the_same_fields(shape: str) -> None:
    pairs = _objects(shape)
    assert len(pairs) > 5  # the walk reached the nested objects, not just the top
    for path, schema, typed in pairs:
        assert set(schema["properties"]) == set(typed.__annotations__), path
        assert set(schema.get("required", [])) == set(typed.__required_keys__), path


def test_every_nested_object_of_a_results_report_is_typed() -> None:
    typed_paths = {path for path, _, _ in _objects("results")}
    expected = {
        "$.results.toolkit",
        "$.results.environment",
        "$.results.environment.plugins",
        "$.results.run.checks",
        "$.results.run.expected_failures",
        "$.results.profile.limits",
        "$.results.limits",
        "$.results.checks",
        "$.results.capabilities.append",
        "$.results.areas.gate_reasons",
        "$.results.requirements.failures",
        "$.results.requirements.evidence",
        "$.results.requirements.expected_failure",
        "$.results.certification",
    }
    assert expected <= typed_paths


def test_the_schema_constants_are_the_toolkits_own_values() -> None:
    results, unfinished = REPORT_SCHEMA["$defs"]["results"], REPORT_SCHEMA["$defs"]["unfinished"]
    assert results["properties"]["report_version"] == {"const": REPORT_VERSION}
    assert unfinished["properties"]["report_version"] == {"const": REPORT_VERSION}
    assert str(REPORT_VERSION) in REPORT_SCHEMA["$id"]
    assert results["properties"]["run"]["properties"]["status"]["enum"] == [s.value for s in RESULT_STATUSES]
    assert unfinished["properties"]["run"]["properties"]["status"]["enum"] == [
        s.value for s in UNFINISHED_STATUSES
    ]
    assert results["properties"]["certification"]["properties"]["level"]["enum"] == list(LEVELS)
    requirement = results["properties"]["requirements"]["items"]["properties"]
    assert requirement["outcome"]["enum"] == [o.value for o in RequirementOutcome]
    assert requirement["expected_failure"]["properties"]["result"]["enum"] == [
        e.value for e in ExpectationResult
    ]
    assert set(get_args(model.Status)) == {o.value for o in RequirementOutcome}
