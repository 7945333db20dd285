"""Correct drivers that take the contract's freedoms (the twin of ``tests/mutants``)."""
