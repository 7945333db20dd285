"""Every conformance suite, collected into this test tree.

The driver is chosen by ``runlane_driver`` in pyproject.toml; checks for
capabilities the driver does not advertise skip with a ``profile:`` reason.
Suites added to the toolkit later are picked up without editing this file.
"""

from runlane_conformance import import_suites

import_suites(globals())
