"""Print pip constraints that pin every runtime dependency to the oldest release pyproject.toml allows.

CI installs the toolkit with these constraints and runs its tests once more, so a lower bound in
``[project] dependencies`` is a tested promise, not a guess: when a floor stops working, the floor is
raised. A bound ``name>=X`` becomes ``name==V``, where V is the oldest release on the index that is
at least X (asked of ``pip index versions``); a dependency without a lower bound is left out.

    python scripts/oldest_constraints.py > oldest.txt && pip install -c oldest.txt -e '.[dev]'
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def available(name: str) -> list[Version]:
    """Every release of ``name`` the configured index offers (pre-releases excluded)."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"Available versions: (.*)", listing)
    if match is None:
        raise SystemExit(f"no versions of {name} on the index:\n{listing}")
    versions = [Version(text.strip()) for text in match.group(1).split(",")]
    return sorted(version for version in versions if not version.is_prerelease)


def oldest_pins(requirements: list[str]) -> list[str]:
    pins = []
    for text in requirements:
        requirement = Requirement(text)
        if not any(spec.operator in (">=", "==", "~=") for spec in requirement.specifier):
            continue
        allowed = [version for version in available(requirement.name) if version in requirement.specifier]
        if not allowed:
            raise SystemExit(f"no release of {requirement.name} satisfies {requirement.specifier}")
        pins.append(f"{requirement.name}=={allowed[0]}")
    return pins


def main() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    wanted = [*project["dependencies"], *extras.get("xdist", [])]
    print("\n".join(oldest_pins(wanted)))


if __name__ == "__main__":
    main()
