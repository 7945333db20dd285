"""``python -m runlane_conformance.history FILE [FILE ...]``: re-check saved histories without a driver.

Prints each history's findings with their witnesses; exits 0 when no history
shows an anomaly, 1 when one does, 2 when a file cannot be read as a history.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .check import check_history
from .store import HistoryFormatError, load


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m runlane_conformance.history FILE [FILE ...]", file=sys.stderr)
        return 2
    worst = 0
    for raw in paths:
        path = Path(raw)
        try:
            history = load(path)
        except (OSError, HistoryFormatError) as error:
            print(f"{path}: cannot read a history: {error}", file=sys.stderr)
            worst = 2
            continue
        report = check_history(history)
        print(f"{path}: {report.render(history)}")
        if not report.ok and worst == 0:
            worst = 1
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
