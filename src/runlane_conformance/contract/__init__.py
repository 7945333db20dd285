"""The Runlane storage contract in Python: values, errors, encodings and protocols (no I/O)."""
