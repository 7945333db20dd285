"""Isolated runs: the driver under test served from a process of its own, never loaded by the judge.

With ``Isolation.PROCESS`` the supervised children (the probe and every suite
worker) are handed the toolkit's own ``process`` driver instead of the driver
asked for; each of them starts ``python -m runlane_conformance.backend
--driver NAME`` (in a new session, so in a process group of its own; in the
sandbox of ``run.sandbox`` where one can be made) and speaks the backend
protocol to it. The driver's options reach the backend on an inherited pipe,
never on a command line. The driver's modules are imported only in
those backend processes. Whatever the driver does to the interpreter it runs
in (patching pytest, the check-event emitter, raising our own skip reasons
from code compiled under a suite file's name) therefore happens where no
check and no verdict lives: the judge sees only the protocol's answers.

With ``Isolation.NONE`` the driver is loaded in the children, as before, which
is what a debugger needs; reports say which mode a verdict was reached in.

It lives in the protocol layer (below the testing support and the plugin, which serve a driver the
same way a run does) and imports nothing of the toolkit: ``BACKEND_MODULE`` is a module name, not an
import, so the backend above it is never loaded here.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum

__all__ = ["BACKEND_MODULE", "DEFAULT_ISOLATION", "Isolation", "backend_command", "served_driver"]

#: The module that serves a Python driver over the protocol.
BACKEND_MODULE = "runlane_conformance.backend"


class Isolation(StrEnum):
    """Where the driver's code runs during a supervised run."""

    #: In a backend process of its own, spoken to over the driver protocol.
    PROCESS = "process"
    #: In the supervised children, next to the checks (for debugging with a debugger).
    NONE = "none"


#: The mode a run uses unless told otherwise. It stays ``NONE`` while the boundary costs more than
#: 1.5x the in-process run of the quick profile on the reference driver (docs/ci.md gives the numbers).
DEFAULT_ISOLATION = Isolation.NONE


def backend_command(driver: str, sandbox: Sequence[str] = (), python: str | None = None) -> str:
    """The shell-quoted command line that serves ``driver`` from its own process (in ``sandbox``).

    The interpreter is this one, so the backend sees the same installed packages; ``-m`` puts the
    working directory first on ``sys.path``, so a ``module:factory`` from the current directory
    loads there as it would in process. The driver's options are not on it: a command line is
    visible to every local user (``ps``), so they travel on a private pipe (``served_driver``).
    ``sandbox`` is the bubblewrap prefix (``run.sandbox``), or empty. ``python`` is the
    interpreter of the driver's own environment (``--backend-python``) when the judge and the
    driver are installed apart, so nothing installed with the driver (a ``.pth`` file, a
    ``sitecustomize``) ever runs in the judge; by default it is this interpreter.
    """
    return shlex.join([*sandbox, python or sys.executable, "-m", BACKEND_MODULE, "--driver", driver])


def served_driver(
    driver: str,
    options: Mapping[str, str],
    isolation: Isolation,
    sandbox: Sequence[str] = (),
    python: str | None = None,
) -> tuple[str, dict[str, str]]:
    """The driver spec and options the supervised children are given for a run in ``isolation``.

    ``NONE`` hands on the driver as asked for; ``PROCESS`` hands on the ``process`` driver with
    a command serving it, and the driver's options as ``backend_options`` (a JSON object the
    process driver hands the backend on an inherited pipe, never on its command line). A driver
    that already is ``process`` is left alone: it is isolated.
    """
    if isolation is Isolation.NONE or driver == "process":
        return driver, dict(options)
    served = {"command": backend_command(driver, sandbox, python)}
    if options:
        served["backend_options"] = json.dumps(dict(options))
    return "process", served
