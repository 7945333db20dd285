"""``RunRequest``: what one run was asked to do, built once from the command line and configuration.

The CLI combines its flags with ``[tool.runlane]``, parses the driver options and the
``--expect-fail`` declarations exactly once, and hands the resulting frozen value to
``run.certify.certify``; nothing below it parses or reshapes the user's words again. The request
is not yet validated against the catalogue (an unknown area or requirement is the run's
``RunUsageError``), but every field already has its final type.

This module is light (no pytest, Hypothesis or contract import) so the CLI can build a request
before it pays for the run machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from ..expected_failures import ExpectedFailure
from ..protocol.isolation import DEFAULT_ISOLATION, Isolation
from .sandbox import SandboxNetwork

__all__ = ["RunRequest"]


def _frozen(options: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(options))


@dataclass(frozen=True)
class RunRequest:
    """One run's parameters, fixed for its whole life (see the module docstring).

    ``seed`` ``None`` lets the run choose one (it is recorded in the result either way);
    ``check_timeout`` ``None`` takes the profile's budget; ``examples`` ``None`` keeps no example
    database. ``options`` is read-only: the driver's harness factory gets exactly these pairs.
    """

    driver: str
    options: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    areas: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    hypothesis_profile: str = "quick"
    seed: int | None = None
    workers: int | Literal["auto"] = 1
    check_timeout: float | None = None
    max_failures: int | None = None
    expected_failures: tuple[ExpectedFailure, ...] = ()
    examples: Path | None = None
    isolation: Isolation = DEFAULT_ISOLATION
    sandbox_network: SandboxNetwork = SandboxNetwork.NONE
    backend_python: str | None = None

    def __post_init__(self) -> None:
        # A caller's dict must not be able to change the request after the fact.
        object.__setattr__(self, "options", _frozen(self.options))
        object.__setattr__(self, "areas", tuple(self.areas))
        object.__setattr__(self, "requirements", tuple(self.requirements))
        object.__setattr__(self, "expected_failures", tuple(self.expected_failures))

    @property
    def restricted(self) -> bool:
        """Whether the run is limited to some areas or requirements (partial: never a certification)."""
        return bool(self.areas or self.requirements)
