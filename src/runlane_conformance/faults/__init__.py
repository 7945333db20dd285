"""Fault injection for the ``faults`` suite: a loopback TCP proxy and an in-process twin.

Both count the driver's *writes* (one request flight: the bytes a client sends
before the store answers) from the moment they are armed, and break exactly
the write a ``Fault`` names, so a schedule such as "cut before write 3" is
replayed identically by the reproduce command.
"""

from __future__ import annotations

from .plan import Fault, FaultHook, FaultInjector, FaultKind, FaultSwitch, InjectedFault
from .proxy import FaultProxy, FaultProxyError

__all__ = [
    "Fault",
    "FaultHook",
    "FaultInjector",
    "FaultKind",
    "FaultProxy",
    "FaultProxyError",
    "FaultSwitch",
    "InjectedFault",
]
