"""Slices of Runlane core whose storage invariants the toolkit checks and documents."""
