"""Drivers for the isolated-run tests: each module is one driver, since some act when imported."""
