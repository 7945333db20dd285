"""``runlane-certify init``: a new driver package that installs and certifies as generated.

``plan_scaffold`` checks the driver name and picks the package and distribution
names; ``render_scaffold`` fills the templates shipped in ``templates/``;
``write_scaffold`` puts the files on disk all at once or not at all (they are
written into a temporary directory beside the target, which is then renamed
into place), so a refused or failed ``init`` leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import keyword
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path, PurePosixPath

from .. import __version__

__all__ = [
    "DriverStyle",
    "InvalidDriverNameError",
    "ScaffoldError",
    "ScaffoldPlan",
    "TargetNotEmptyError",
    "plan_scaffold",
    "render_scaffold",
    "write_scaffold",
]

#: Names the toolkit itself registers; a scaffold under one of them would be ambiguous.
RESERVED_NAMES = frozenset({"local", "process"})

_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*\Z")
_MAX_NAME = 40

#: The lines of the shared workflow that ``init`` sets for the generated driver.
WORKFLOW_DRIVER_LINE = "  RUNLANE_DRIVER: mydriver\n"
WORKFLOW_DSN_LINE = '  RUNLANE_NEEDS_DSN: "true"\n'


class ScaffoldError(Exception):
    """``init`` cannot write the package; the message is one line meant for the user."""


class InvalidDriverNameError(ScaffoldError):
    """The driver name cannot name an entry point, a Python package and a distribution at once."""


class TargetNotEmptyError(ScaffoldError):
    """The target exists and is not an empty directory; ``init`` never overwrites anything."""


class DriverStyle(StrEnum):
    """How the generated in-memory driver keeps transactions serializable."""

    #: One lock held for the whole callback: attempts never overlap, so nothing is validated.
    LOCK = "lock"
    #: No lock while the callback runs: reads and scanned ranges are validated at commit, losers replay.
    OPTIMISTIC = "optimistic"

    @property
    def summary(self) -> str:
        """A few words for the package description."""
        if self is DriverStyle.LOCK:
            return "one lock per transaction"
        return "optimistic transactions, validated at commit"


@dataclass(frozen=True)
class ScaffoldPlan:
    """The names of one scaffold: the driver (entry point), its Python package and distribution."""

    driver: str
    style: DriverStyle

    @property
    def package(self) -> str:
        """The importable package: ``runlane_<driver>_driver``."""
        return f"runlane_{self.driver}_driver"

    @property
    def distribution(self) -> str:
        """The distribution name pip installs: ``runlane-<driver>-driver``."""
        return f"runlane-{self.driver.replace('_', '-')}-driver"


def plan_scaffold(name: str, style: DriverStyle) -> ScaffoldPlan:
    """Check ``name`` and return the plan; raises ``InvalidDriverNameError`` with the rule it broke.

    The name must be lower-case letters, digits and single underscores, start
    with a letter, and be at most 40 characters: that keeps it valid as an entry
    point name, inside a Python identifier and inside a distribution name.
    """
    if not _NAME.match(name) or len(name) > _MAX_NAME:
        raise InvalidDriverNameError(
            f"invalid driver name {name!r}: use lower-case letters, digits and single underscores, "
            f"starting with a letter, at most {_MAX_NAME} characters (for example: json_file)"
        )
    if name in RESERVED_NAMES or keyword.iskeyword(name):
        raise InvalidDriverNameError(f"invalid driver name {name!r}: it is reserved; choose another")
    return ScaffoldPlan(driver=name, style=style)


def _template(*parts: str) -> str:
    return resources.files(__package__).joinpath("templates", *parts).read_text(encoding="utf-8")


def scaffold_workflow(plan: ScaffoldPlan) -> str:
    """The CI workflow of docs/ci/certify.yml with the driver's name, and no database."""
    text = _template("common", "certify.yml")
    if WORKFLOW_DRIVER_LINE not in text or WORKFLOW_DSN_LINE not in text:
        raise AssertionError("the workflow template lost the lines init fills in")
    return text.replace(WORKFLOW_DRIVER_LINE, f"  RUNLANE_DRIVER: {plan.driver}\n").replace(
        WORKFLOW_DSN_LINE, '  RUNLANE_NEEDS_DSN: "false"\n'
    )


def render_scaffold(plan: ScaffoldPlan) -> dict[PurePosixPath, str]:
    """Every file of the package, by path relative to its root."""
    guide = {
        DriverStyle.LOCK: "It holds one lock for each whole transaction.",
        DriverStyle.OPTIMISTIC: (
            "Its transactions record read sets and scanned ranges, validate them at commit and "
            "replay the callback when they lost a race."
        ),
    }[plan.style]
    values = {
        "__DRIVER__": plan.driver,
        "__PACKAGE__": plan.package,
        "__DISTRIBUTION__": plan.distribution,
        "__TOOLKIT_VERSION__": __version__,
        "__STYLE_SUMMARY__": plan.style.summary,
        "__STYLE_GUIDE__": guide,
    }

    def fill(text: str) -> str:
        for token, value in values.items():
            text = text.replace(token, value)
        return text

    return {
        PurePosixPath("pyproject.toml"): fill(_template("common", "pyproject.toml.tmpl")),
        PurePosixPath("README.md"): fill(_template("common", "README.md.tmpl")),
        PurePosixPath(".gitignore"): ".runlane/\n__pycache__/\n*.egg-info/\ndist/\n.venv/\n",
        PurePosixPath("src", plan.package, "__init__.py"): fill(
            _template(plan.style.value, "driver.py.tmpl")
        ),
        PurePosixPath("src", plan.package, "py.typed"): "",
        PurePosixPath("tests", "test_conformance.py"): fill(_template("common", "test_conformance.py.tmpl")),
        PurePosixPath(".github", "workflows", "certify.yml"): scaffold_workflow(plan),
    }


def check_target(target: Path) -> None:
    """Refuse a target that exists and is not an empty directory."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise TargetNotEmptyError(f"{target} exists and is not a directory; give a new or empty directory")
    if target.is_dir() and any(target.iterdir()):
        raise TargetNotEmptyError(f"{target} is not empty; give a new or empty directory")


def write_scaffold(target: Path, plan: ScaffoldPlan) -> list[PurePosixPath]:
    """Write the package into ``target`` (new or empty) all at once; returns the paths written.

    The files are written into a hidden staging directory first and moved into
    place only when all of them are there, so an error leaves ``target`` as it
    was. A new target is the staging directory renamed (missing parents are
    created); an existing empty one is kept, itself, and the staged entries are
    moved into it, so a shell whose working directory it is stays in it.
    """
    check_target(target)
    files = render_scaffold(plan)
    target = target.absolute()
    existing = target.is_dir()
    try:
        if not existing:
            target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".runlane-init-", dir=target if existing else target.parent))
    except OSError as error:
        raise ScaffoldError(f"cannot write {target}: {error.strerror or error}") from error
    moved: list[Path] = []
    try:
        for relative, text in files.items():
            path = staging.joinpath(*relative.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if existing:
            for entry in sorted(staging.iterdir()):
                os.rename(entry, target / entry.name)
                moved.append(target / entry.name)
            staging.rmdir()
        else:
            os.chmod(staging, 0o777 & ~_umask())
            os.rename(staging, target)
    except BaseException as error:
        for entry in moved:
            with contextlib.suppress(OSError):
                os.rename(entry, staging / entry.name)
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            raise ScaffoldError(f"cannot write {target}: {error.strerror or error}") from error
        raise
    return sorted(files)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
