"""One self-contained HTML page from a certification report: the verdict by area, each failure, each
history anomaly drawn.

The page is made from the report *document* (the JSON ``run --report`` writes, already validated),
never from a run in memory, so ``run --html`` and ``runlane-certify html REPORT.json`` make the same
page from the same report, wherever the report builder lives. Everything is inline (styles, SVG): the
file can be attached to a CI run, mailed, or opened from disk with no network.

Two libraries do the work, both optional (``pip install 'runlane-conformance[html]'``), because the
certification itself needs neither:

* Jinja2 renders the page from ``page.html.j2`` with autoescaping on, so no text from a report (a
  driver's exception message, a key) can become markup;
* Graphviz draws each anomaly's cycle: the ``graphviz`` package writes the DOT text (with its quoting
  rules) and runs Debian's ``dot`` to lay the cycle out as SVG, edges labelled by kind and key, each
  attempt's operations in the node's tooltip and in a table beside it. Elle draws its cycles with
  Graphviz too. Where ``dot`` is not installed the page says so and gives the cycle as a list of
  steps, which carries the same facts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

__all__ = ["EDGE_LABELS", "HtmlUnavailable", "cycle_svg", "render_html", "require"]

#: How each dependency kind is named on the drawing.
EDGE_LABELS: dict[str, str] = {
    "ww": "ww",
    "wr": "wr",
    "pwr": "predicate wr",
    "rw": "rw",
    "prw": "predicate rw",
    "rt": "real time",
}
_EDGE_COLOURS: dict[str, str] = {
    "ww": "#1f5fa8",
    "wr": "#2e7d32",
    "pwr": "#00796b",
    "rw": "#c62828",
    "prw": "#8e24aa",
    "rt": "#616161",
}
_SVG_START = re.compile(r"<svg\b")


class HtmlUnavailable(RuntimeError):
    """The page cannot be made here: Jinja2 is not installed (the ``html`` extra)."""


def cycle_svg(finding: Mapping[str, Any]) -> str | None:
    """The finding's cycle as inline SVG (no XML prologue), or ``None`` when ``dot`` cannot run.

    Nodes are the attempts, in cycle order; each edge is labelled ``kind(key)``; hovering a node
    shows its operations, hovering an edge what the checker saw. Real-time order between the attempts
    (``finding["realtime"]``, context) is drawn dashed and grey, labelled ``rt``, and does not pull
    the layout (``constraint=false``); an ``rt`` step of a real-time cycle is drawn dashed too.
    """
    try:
        import graphviz
    except ImportError:
        return None
    graph = graphviz.Digraph("cycle", format="svg")
    # Two attempts sit side by side (dot, left to right); a longer cycle is laid out as a circle (circo).
    graph.attr(
        layout="dot" if len(finding["nodes"]) <= 2 else "circo",
        rankdir="LR",
        bgcolor="transparent",
        pad="0.2",
        nodesep="0.6",
        ranksep="1.1",
    )
    graph.attr("node", shape="box", style="rounded,filled", fillcolor="#fff8e1", fontname="Helvetica")
    graph.attr("edge", fontname="Helvetica", fontsize="11")
    for node in finding["nodes"]:
        tooltip = f"{node['id']} ({node['outcome']}; {node['where']})\n" + "\n".join(node["ops"])
        graph.node(node["id"], label=f"{node['id']}\n{node['outcome']}", tooltip=tooltip)
    for edge in finding["edges"]:
        kind = str(edge["kind"])
        graph.edge(
            edge["source"],
            edge["target"],
            label=f"{EDGE_LABELS.get(kind, kind)}({edge['key']})",
            tooltip=edge["detail"],
            color=_EDGE_COLOURS.get(kind, "black"),
            fontcolor=_EDGE_COLOURS.get(kind, "black"),
            penwidth="1.6",
            style="dashed" if kind == "rt" else "solid",
        )
    for edge in finding.get("realtime", ()):
        graph.edge(
            edge["source"],
            edge["target"],
            label="rt",
            tooltip=edge["detail"],
            color=_EDGE_COLOURS["rt"],
            fontcolor=_EDGE_COLOURS["rt"],
            style="dashed",
            constraint="false",
        )
    try:
        svg = graph.pipe(encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError):
        return None
    start = _SVG_START.search(svg)
    return None if start is None else svg[start.start() :]


_MISSING = (
    "the HTML report needs Jinja2: pip install 'runlane-conformance[html]' (and Graphviz's dot, e.g. "
    "apt-get install graphviz, to draw the history cycles)"
)


def require() -> None:
    """Raise ``HtmlUnavailable`` unless the page can be made here (Jinja2 importable): ``run --html``
    asks before the run, so a missing extra never costs a whole run."""
    try:
        import jinja2  # noqa: F401
    except ImportError as error:
        raise HtmlUnavailable(_MISSING) from error


def _failing(requirements: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in requirements if r["outcome"] in ("failed", "inconclusive") or r.get("failures")]


def render_html(document: Mapping[str, Any], *, report_name: str | None = None) -> str:
    """The HTML page for a (validated) report document, as one string with nothing to fetch.

    Raises ``HtmlUnavailable`` when Jinja2 is missing. A history witness is drawn when Graphviz's
    ``dot`` runs here; otherwise its steps are listed and the page says why there is no drawing.
    """
    try:
        import jinja2
        import markupsafe
    except ImportError as error:
        raise HtmlUnavailable(_MISSING) from error
    environment = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    template = environment.from_string(
        resources.files(__package__).joinpath("page.html.j2").read_text(encoding="utf-8")
    )
    requirements: list[Mapping[str, Any]] = list(document.get("requirements", []))
    failing = _failing(requirements)
    drawings: dict[tuple[int, int, int], str | None] = {}
    for r_index, requirement in enumerate(failing):
        for f_index, failure in enumerate(requirement.get("failures", [])):
            witness = failure.get("witness") or {}
            for w_index, finding in enumerate(witness.get("findings", [])):
                if finding["edges"]:
                    drawings[(r_index, f_index, w_index)] = cycle_svg(finding)
            if witness.get("realtime_cycle"):
                drawings[(r_index, f_index, -1)] = cycle_svg(witness["realtime_cycle"])
    return template.render(
        report=document,
        report_name=report_name,
        failing=failing,
        drawings={key: markupsafe.Markup(svg) if svg else None for key, svg in drawings.items()},
        edge_labels=EDGE_LABELS,
        edge_colours=_EDGE_COLOURS,
        unfinished="requirements" not in document,
    )
