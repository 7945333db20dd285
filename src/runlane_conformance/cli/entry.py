"""The ``runlane-certify`` console script: answers ``--version`` at once, hands everything else to ``app``.

The full command-line application imports typer, rich, pytest, Hypothesis and the contract
before it can parse anything. A user (or a CI step) asking only for the version should not pay
for that, so this module recognises exactly ``runlane-certify --version`` and prints the same
line ``app`` would; any other command line, including a mistaken one, goes to ``app.main``,
which owns every error message and exit code.

Before it imports the app, the console script keeps its compiled bytecode in the toolkit's
private cache, as the supervised children do (``run.environment.bytecode_cache``): where
``PYTHONDONTWRITEBYTECODE`` is set (many CI images set it) the program would otherwise compile
the toolkit from source on every start. A ``PYTHONPYCACHEPREFIX`` the user set is kept, and
nothing is written beside the sources or into site-packages.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .termination import hold_termination
from .version import version_text

__all__ = ["main", "version_text"]


def use_private_bytecode_cache() -> None:
    """Compile into (and load from) the toolkit's private bytecode cache, unless the user chose one."""
    if sys.pycache_prefix:
        return
    from ..run.environment import bytecode_cache

    cache = bytecode_cache()
    if cache is not None:
        sys.pycache_prefix = str(cache)
        sys.dont_write_bytecode = False


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (see the module docstring)."""
    # First of all: a SIGTERM from here on waits until ``run`` has marked its outputs (``termination``).
    hold_termination()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ["--version"]:
        sys.stdout.write(version_text() + "\n")
        sys.stdout.flush()
        sys.exit(0)
    if argv is None:  # the program itself, not a caller embedding it
        use_private_bytecode_cache()
    from .app import main as app_main

    app_main(argv)
