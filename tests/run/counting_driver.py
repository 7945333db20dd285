"""The reference driver, counting its loads: each call of ``harness`` adds a line to the file
``RUNLANE_COUNT_FILE`` names (the loading process's id), and each ``close`` a line ``closed``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runlane_conformance.harness import load_harness


def _note(line: str) -> None:
    with Path(os.environ["RUNLANE_COUNT_FILE"]).open("a", encoding="utf-8") as notes:
        notes.write(line + "\n")


class _Counted:
    def __init__(self, options: Mapping[str, str]) -> None:
        self._inner = load_harness("local", dict(options))
        _note(f"loaded {os.getpid()}")

    def open_store(self) -> Any:
        return self._inner.open_store()

    def attach(self, address: object) -> Any:
        return self._inner.attach(address)

    def close(self) -> None:
        _note(f"closed {os.getpid()}")
        self._inner.close()


def harness(options: Mapping[str, str]) -> Any:
    return _Counted(options)
