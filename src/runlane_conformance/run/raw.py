"""``RawCheck``: one check's result as the child reports it, before the parent judges it.

It lives apart from ``events`` (the pytest plugin that produces it) so that the parent, which
only reads these results, does not import pytest for them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RawCheck"]


@dataclass
class RawCheck:
    """One check's phases folded together, before anyone judged it.

    ``status`` is ``passed``, ``failed`` (in the call), ``error`` (in setup or
    teardown), ``skipped``, ``xfailed`` or ``xpassed``. For a skip,
    ``skip_reason`` is pytest's reason and ``skip_origin`` the file that raised it.
    ``message`` is the first line of the failure; ``full_message`` all of it (the
    state, return values and history a suite put in its message), capped.
    """

    nodeid: str
    requirement_id: str | None
    status: str = "passed"
    duration: float = 0.0
    message: str | None = None
    longrepr: str | None = None
    full_message: str | None = None
    skip_reason: str | None = None
    skip_origin: str | None = None
    properties: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RawCheck:
        fields_ = dict(data)
        fields_["properties"] = [(str(k), str(v)) for k, v in fields_.get("properties", [])]
        return cls(**fields_)
