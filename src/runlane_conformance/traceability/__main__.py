"""``python -m runlane_conformance.traceability``: render docs/traceability.md."""

from . import main

raise SystemExit(main())
