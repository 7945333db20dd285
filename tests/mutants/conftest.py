"""Prints the kill table (mutant -> requirement -> killed) at the end of the run."""

from __future__ import annotations

from typing import Any

KILL_TABLE: list[tuple[str, str, str]] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not KILL_TABLE:
        return
    terminalreporter.section("mutant kill table")
    width = max(len(name) for name, _, _ in KILL_TABLE)
    req_width = max(len(req) for _, req, _ in KILL_TABLE)
    terminalreporter.write_line(f"{'mutant'.ljust(width)}  {'requirement'.ljust(req_width)}  killed")
    for name, requirement, verdict in sorted(KILL_TABLE, key=lambda row: (row[1], row[0])):
        terminalreporter.write_line(f"{name.ljust(width)}  {requirement.ljust(req_width)}  {verdict}")
    killed = sum(1 for _, _, verdict in KILL_TABLE if verdict == "yes")
    terminalreporter.write_line(f"{killed}/{len(KILL_TABLE)} mutants killed by their intended requirement")
