"""The one line ``runlane-certify --version`` prints, shared by the console script and the app.

It lives apart from both so that neither imports the other: the console script (``entry``)
answers ``--version`` without loading the app, and the app (``app``) prints the same line.
"""

from __future__ import annotations

import sys

from .. import __version__

__all__ = ["version_text"]


def version_text() -> str:
    """The one line ``--version`` prints: toolkit version and the Python running it."""
    python = ".".join(str(part) for part in sys.version_info[:3])
    return f"runlane-certify {__version__} (runlane-conformance, Python {python})"
