"""Where the isolation modes used to live: they are ``protocol.isolation`` now (the plugin, below
``run/``, serves a driver the same way a run does). Kept as a re-export for code that still imports
them from here; new code imports ``runlane_conformance.protocol.isolation``."""

from __future__ import annotations

from ..protocol.isolation import (
    BACKEND_MODULE,
    DEFAULT_ISOLATION,
    Isolation,
    backend_command,
    served_driver,
)

__all__ = ["BACKEND_MODULE", "DEFAULT_ISOLATION", "Isolation", "backend_command", "served_driver"]
