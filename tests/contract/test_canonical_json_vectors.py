"""The canonical JSON vectors other runtimes test against are exactly what ``canonical_json`` prints.

``runlane_conformance/fixtures/vectors/canonical_json.json`` is read by the JavaScript backend
package's tests (``js/conformance-backend``), which have no Python to ask. This test keeps the file
and the toolkit in step: if it fails after a change to the encoder or to the cases below, rewrite
the file with ``python -m tests.contract.test_canonical_json_vectors``.
"""

from __future__ import annotations

import json
from pathlib import Path

from runlane_conformance.contract.json_boundary import canonical_json

VECTORS = Path(__file__).parents[2] / "src/runlane_conformance/fixtures/vectors/canonical_json.json"

DESCRIPTION = (
    "Canonical JSON: object keys sorted by Unicode code point (not UTF-16 code unit), no whitespace, "
    "non-ASCII text kept as UTF-8, control characters escaped as JSON requires. Numbers are limited to "
    "integers a double holds exactly and decimals every runtime prints alike: other numbers may print "
    "differently in another runtime, which is why a driver stores a document's text as received."
)

# Each case sits on an edge a hand-written encoder gets wrong: key order across the BMP boundary,
# escapes, the separators U+2028/U+2029 (valid raw in JSON), empty containers, and nesting.
CASES: list[tuple[str, object]] = [
    ("scalars", [None, True, False, 0, -1, 9007199254740991, -9007199254740991, 0.5, -2.25, ""]),
    ("keys sorted by code point", {"b": 1, "a": 2, "B": 3, "": 4, "aa": 5, "a\u0000": 6}),
    ("astral key sorts after the last BMP key", {"\U0001f600": 1, "\uffff": 2, "\u00e9": 3, "z": 4}),
    ("non-ASCII kept", {"text": "\u00e9\u4e2d\U0001f600\u2028\u2029\u007f"}),
    ("escapes", {"s": '"\\/\b\f\n\r\t\u0000\u001f'}),
    ("empty containers", {"a": [], "o": {}, "n": [[], [{}]]}),
    ("nested objects sorted at every level", {"z": {"y": {"b": [3, {"d": 1, "c": 2}], "a": None}}, "a": 0}),
    (
        "a document envelope",
        {
            "schemaVersion": 1,
            "value": {"name": "scheduler", "holder": None, "expiresAt": "2030-01-01T00:00:30.000000Z"},
        },
    ),
]


def vectors() -> dict[str, object]:
    """The file's content, computed by the toolkit's own encoder."""
    return {
        "description": DESCRIPTION,
        "cases": [
            {"name": name, "value": value, "canonical": canonical_json(value)} for name, value in CASES
        ],
    }


def render() -> str:
    return json.dumps(vectors(), indent=2, ensure_ascii=True) + "\n"


def test_the_canonical_json_vectors_file_is_what_the_toolkit_prints() -> None:
    assert VECTORS.read_text(encoding="utf-8") == render(), (
        "canonical_json.json is stale: run python -m tests.contract.test_canonical_json_vectors"
    )


def test_every_canonical_vector_parses_back_to_its_value() -> None:
    for case in json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]:
        assert json.loads(case["canonical"]) == case["value"], case["name"]


if __name__ == "__main__":
    VECTORS.write_text(render(), encoding="utf-8")
