"""``python -m runlane_conformance.backend --driver NAME``: serve a Python driver over the backend protocol.

See ``runlane_conformance.protocol.server`` and ``docs/driver-protocol.md``.
"""

from __future__ import annotations

import sys

from .protocol.server import main

if __name__ == "__main__":
    sys.exit(main())
