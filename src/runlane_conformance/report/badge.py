"""Badges made from a validated report: an offline SVG and a shields.io endpoint document.

Both show the same thing: the driver and the certification level the report
grants. Every string placed into the SVG is cleaned of what XML cannot carry
and then escaped, because the driver name comes from the user (``module:factory``
can contain anything) and a report on disk may have been edited by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ..protocol.isolation import Isolation
from ..safe_text import one_line, xml_safe
from .model import ResultsReport

__all__ = ["Badge", "badge_for", "endpoint_json", "is_sandboxed", "isolation_note", "render_svg"]

_COLORS = {"brightgreen": "#4c1", "yellow": "#dfb317", "red": "#e05d44"}

#: Longest label or message a badge shows; a badge is a glance, not a document.
BADGE_TEXT_LIMIT = 80


def _badge_text(text: str) -> str:
    return xml_safe(text, limit=BADGE_TEXT_LIMIT, multiline=False)


@dataclass(frozen=True)
class Badge:
    """What a badge says: ``label`` on the left, ``message`` on the right, in ``color``.

    ``is_error`` is true when the driver is not certified, so a shields.io
    user cannot recolour a failing badge green.
    """

    label: str
    message: str
    color: str
    is_error: bool


def badge_for(report: ResultsReport) -> Badge:
    """The badge for a validated report."""
    certification = report["certification"]
    label = f"runlane {report['driver']['spec']}"
    if not certification["certified"]:
        return Badge(label, "not certified", "red", True)
    if not certification["complete"]:
        return Badge(label, f"{certification['level']} (partial run)", "yellow", False)
    isolated = is_sandboxed(report)
    return Badge(label, certification["level"] + (" (isolated)" if isolated else ""), "brightgreen", False)


def is_sandboxed(report: ResultsReport) -> bool:
    """Whether the report's driver ran isolated *and* sandboxed: only then is a run marked isolated."""
    environment = report["environment"]
    sandbox = environment.get("sandbox")
    return (
        environment["isolation"] == Isolation.PROCESS.value
        and isinstance(sandbox, str)
        and sandbox.startswith("bubblewrap")
    )


def isolation_note(report: ResultsReport) -> str:
    """One line saying where the report's driver ran, and what that means for the verdict."""
    if is_sandboxed(report):
        return (
            "isolation: process, sandboxed (the driver ran in a process of its own, in namespaces "
            f"of its own: {str(report['environment'].get('sandbox')).removeprefix('bubblewrap: ')})"
        )
    if report["environment"]["isolation"] == Isolation.PROCESS.value:
        why = str(report["environment"].get("sandbox") or "unavailable").removeprefix("unavailable: ")
        return (
            "isolation: process, NOT sandboxed (the driver ran in a process of its own, but as any "
            f"program of this user could: {why}); not marked isolated"
        )
    return "isolation: none (the driver ran next to the checks; see --isolation)"


def endpoint_json(badge: Badge) -> dict[str, Any]:
    """The shields.io endpoint document (``https://img.shields.io/endpoint?url=...``)."""
    return {
        "schemaVersion": 1,
        "label": one_line(badge.label, BADGE_TEXT_LIMIT),
        "message": one_line(badge.message, BADGE_TEXT_LIMIT),
        "color": badge.color,
        "isError": badge.is_error,
    }


def _text_width(text: str) -> int:
    # Verdana 11px averages about 6.5px per character; wide glyphs get a little more room.
    return int(sum(7.5 if ord(ch) > 0x2E80 or ch in "mwMW@" else 6.5 for ch in text)) + 10


def render_svg(badge: Badge) -> str:
    """A self-contained flat badge SVG (no fonts or images fetched); always well-formed XML.

    Label and message are cleaned (``safe_text.xml_safe``), capped at
    ``BADGE_TEXT_LIMIT`` characters, then escaped.
    """
    shown_label, shown_message = _badge_text(badge.label), _badge_text(badge.message)
    left, right = _text_width(shown_label), _text_width(shown_message)
    total = left + right
    color = _COLORS[badge.color]
    label, message = escape(shown_label), escape(shown_message)
    title = escape(f"{shown_label}: {shown_message}")
    aria = quoteattr(f"{shown_label}: {shown_message}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="20" role="img" aria-label={aria}>'
        f"<title>{title}</title>"
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/>'
        '<stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{total}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{left}" height="20" fill="#555"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{color}"/>'
        f'<rect width="{total}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
        'font-size="11">'
        f'<text x="{left / 2:.1f}" y="15" fill="#010101" fill-opacity=".3">{label}</text>'
        f'<text x="{left / 2:.1f}" y="14">{label}</text>'
        f'<text x="{left + right / 2:.1f}" y="15" fill="#010101" fill-opacity=".3">{message}</text>'
        f'<text x="{left + right / 2:.1f}" y="14">{message}</text>'
        "</g></svg>\n"
    )
