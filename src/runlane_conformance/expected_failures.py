"""Known failures: requirements a driver author declares as expected to fail, each with a reason.

A driver migrating to the contract can name the requirements it does not keep
yet (``ID = reason``, in pytest's ``runlane_expect_fail`` ini option or with
``--runlane-expect-fail`` / the CLI's ``--expect-fail``). A declared failure is
reported as known instead of drowning the rest of the run, but it is never a
pass: a requirement that is expected to fail still counts as failed for every
certification level that needs it, and one that passes is reported as such so
the stale declaration gets removed.

Parsing is strict on purpose. An ID that is not in the catalog (a typo, an
area name, a renamed requirement) would otherwise silently declare nothing
and leave the real failure red, or worse, hide a later requirement of that
name; so it is a usage error that names the closest IDs. A declaration without
a reason is refused too: the reason is what the report shows next to the
failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from .contract.errors import RunlaneError
from .suggest import REQUIREMENTS_HINT, close_matches

__all__ = [
    "ExpectedFailure",
    "ExpectedFailureError",
    "parse_expected_failure",
    "parse_expected_failures",
]


class ExpectedFailureError(RunlaneError, ValueError):
    """A known-failure declaration could not be used: bad form, no reason, unknown or repeated ID.

    The message is one line that names the fix (and, for an unknown ID, the
    closest known IDs); command-line tools show it as a usage error.
    """


@dataclass(frozen=True)
class ExpectedFailure:
    """One requirement the driver is declared not to keep yet, and why.

    ``requirement`` is a catalog ID (``area.rule-name``); ``reason`` is the
    author's non-empty explanation, shown wherever the failure is reported.
    """

    requirement: str
    reason: str

    def __str__(self) -> str:
        return f"{self.requirement} = {self.reason}"


def _catalog_ids() -> Set[str]:
    # Imported here: a caller that passes its own ``known`` never needs the catalogue.
    from .catalogue import all_requirements

    return all_requirements().keys()


def _unknown_id_message(requirement: str, known: Set[str]) -> str:
    close = close_matches(requirement, known)
    area_ids = sorted(known_id for known_id in known if known_id.startswith(f"{requirement}."))
    if area_ids:
        hint = f"; {requirement!r} is an area, name one of its requirements, e.g. {area_ids[0]}"
    elif close:
        hint = f"; did you mean {' or '.join(close)}?"
    else:
        hint = f"; {REQUIREMENTS_HINT}"
    return f"expected failure names unknown requirement {requirement!r}{hint}"


def parse_expected_failure(text: str, known: Iterable[str] | None = None) -> ExpectedFailure:
    """Parse one ``ID = reason`` declaration, checking the ID against the catalog.

    Whitespace around the ID and the reason is ignored; the reason may itself
    contain ``=``. ``known`` is the set of valid requirement IDs (the whole
    catalog when omitted). Raises ``ExpectedFailureError`` with a one-line
    message for a missing ``=``, an empty ID or reason, or an ID not in
    ``known`` (naming the closest IDs).
    """
    requirement, separator, reason = text.partition("=")
    requirement = requirement.strip()
    reason = " ".join(reason.split())
    if not separator or not requirement:
        raise ExpectedFailureError(
            f"expected failure {text.strip()!r} is not of the form ID=REASON"
            " (e.g. conflicts.lost-update=not fixed yet)"
        )
    if not reason:
        raise ExpectedFailureError(
            f"expected failure {requirement!r} has no reason; write {requirement}=REASON saying why it fails"
        )
    known_ids = _catalog_ids() if known is None else frozenset(known)
    if requirement not in known_ids:
        raise ExpectedFailureError(_unknown_id_message(requirement, known_ids))
    return ExpectedFailure(requirement, reason)


def parse_expected_failures(
    lines: Iterable[str], known: Iterable[str] | None = None
) -> tuple[ExpectedFailure, ...]:
    """Parse many declarations (ini lines or repeated options), skipping blank and ``#`` comment lines.

    Each line is parsed by ``parse_expected_failure``. The same requirement
    declared twice is an ``ExpectedFailureError`` (two reasons for one
    failure leave the report ambiguous). The result keeps the input order.
    """
    known_ids = None if known is None else frozenset(known)
    parsed: dict[str, ExpectedFailure] = {}
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if known_ids is None:
            known_ids = frozenset(_catalog_ids())
        declared = parse_expected_failure(stripped, known_ids)
        if declared.requirement in parsed:
            raise ExpectedFailureError(
                f"requirement {declared.requirement!r} is declared as an expected failure twice"
            )
        parsed[declared.requirement] = declared
    return tuple(parsed.values())
