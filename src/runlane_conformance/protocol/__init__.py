"""The driver backend protocol: certify a driver that runs in another process, in any language.

``process`` (the harness in ``process.py``) speaks the protocol to a backend
program over stdin/stdout; ``server.py`` is the Python backend that serves any
Python driver; ``schemas/`` holds the JSON Schema of every message. The
protocol itself is described in ``docs/driver-protocol.md``.
"""
