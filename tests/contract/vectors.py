"""Loading the golden vectors shipped inside the package (the same files other-language drivers read)."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any


def load_vectors(name: str) -> Any:
    """The parsed JSON of ``runlane_conformance/fixtures/vectors/<name>.json``."""
    resource = files("runlane_conformance.fixtures.vectors").joinpath(f"{name}.json")
    return json.loads(resource.read_text(encoding="utf-8"))
