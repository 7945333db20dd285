"""The HTML report: one self-contained page per report, each history anomaly's cycle drawn, in a real browser.

The page is made from the report document alone, so most of this is checked on a kept report
(``data/history-anomaly-report.json``: the run of the histories mutant ``unvalidated_scans``, which
lets a predicate skew (G2) into its history). The browser tests render pages in Debian's headless
Chromium: the page of a live run of the same mutant must show its cycle as SVG with every attempt
and edge, and the kept report's page must look like the screenshot kept in
``docs/images/html-report.png``.

How the screenshot is compared, and why: a pixel-exact comparison would break on every Chromium or
font update (anti-aliasing, hinting), and a hash of the whole image would miss the one thing that
matters, since the drawing is about 2% of the page. So the comparison is in two parts: the DOM
Chromium built must hold the drawing's structure exactly (one ``svg`` per cycle, one node group per
attempt, one edge group per dependency, each edge labelled by kind), and the screenshot must be the
kept one's size, not blank, and differ from it in at most 0.5% of its 16x16 tiles by more than 24
grey levels (a tile's mean): a lost drawing, table or verdict changes several times that many tiles,
a font's anti-aliasing none. ``RUNLANE_UPDATE_SCREENSHOTS=1`` rewrites the kept image after a
deliberate change to the page.

Without Chromium the browser tests skip, saying so, except under ``CI=true`` where they fail: CI
installs it (``.ci/run``), so a missing browser there is a broken set-up, not a reason to skip.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.html_report import cycle_svg, render_html
from runlane_conformance.report.files import read_report
from runlane_conformance.report.junit import junit_xml
from runlane_conformance.report.schema import validate_report
from runlane_conformance.report_witness import recorded_witness

ROOT = Path(__file__).resolve().parents[2]
KEPT_REPORT = Path(__file__).parent / "data" / "history-anomaly-report.json"
KEPT_SCREENSHOT = ROOT / "docs" / "images" / "html-report.png"
MUTANT = "tests.mutants.m_histories:unvalidated_scans"
WINDOW = (1280, 1100)
TILE = 16
TILE_TOLERANCE = 24
TILES_ALLOWED = 0.005

cli = CliRunner()


def kept_report() -> dict[str, Any]:
    return read_report(KEPT_REPORT)


def the_witness(document: dict[str, Any]) -> dict[str, Any]:
    failures = [f for r in document["requirements"] for f in r.get("failures", []) if "witness" in f]
    assert len(failures) == 1, "the kept report has exactly one failure with a history witness"
    witness: dict[str, Any] = failures[0]["witness"]
    return witness


class _Elements(HTMLParser):
    """Every element's tag and classes, and the text inside SVG ``text`` elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.classes: Counter[str] = Counter()
        self.svg_text: list[str] = []
        self._in_text = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        for name, value in attrs:
            if name == "class" and value:
                self.classes.update(value.split())
        self._in_text = tag == "text"

    def handle_endtag(self, tag: str) -> None:
        if tag == "text":
            self._in_text = False

    def handle_data(self, data: str) -> None:
        if self._in_text:
            self.svg_text.append(data)


def elements(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


def assert_cycle_drawn(html: str, witness: dict[str, Any]) -> None:
    """The page (or the DOM a browser built from it) draws every finding's cycle: nodes, edges, labels,
    and the real-time order beside it (dashed ``rt`` edges, and the real-time cycle when there is one)."""
    drawn = [f for f in witness["findings"] if f["edges"]]
    assert drawn, "the witness has a cycle to draw"
    if witness.get("realtime_cycle"):
        drawn.append(witness["realtime_cycle"])
    seen = elements(html)
    assert seen.tags["svg"] == len(drawn)
    assert seen.classes["node"] == sum(len(f["nodes"]) for f in drawn)
    assert seen.classes["edge"] == sum(len(f["edges"]) + len(f.get("realtime", ())) for f in drawn)
    labels = " ".join(seen.svg_text)
    names = {"prw": "predicate rw", "pwr": "predicate wr", "rt": "real time"}
    for finding in drawn:
        for node in finding["nodes"]:
            assert node["id"] in labels
        for edge in finding["edges"]:
            assert f"{names.get(edge['kind'], edge['kind'])}({edge['key']})" in labels
        assert labels.split().count("rt") >= len(finding.get("realtime", ()))


# --- the page, without a browser ----------------------------------------------------------------------


def test_the_kept_report_carries_a_structured_witness_with_its_consequence() -> None:
    witness = the_witness(kept_report())
    finding = witness["findings"][0]
    assert finding["anomaly"] == "G2"
    assert finding["violates"] == ["serializable"]
    assert finding["allowed_by"] == ["repeatable read", "snapshot isolation"]
    assert {e["kind"] for e in finding["edges"]} == {"prw"}
    assert witness["consistent_with"] == ["repeatable read", "snapshot isolation"]
    assert witness["realtime"].startswith("real-time order: ")
    assert "rt edges among" in witness["realtime"]
    # Its two transactions ran in one round (they overlapped): no real-time order between them.
    assert witness["findings"][0]["realtime"] == [] and "realtime_cycle" not in witness


def test_the_page_draws_the_cycle_and_shows_verdict_failure_and_reproduce_lines() -> None:
    document = kept_report()
    page = render_html(document)
    assert_cycle_drawn(page, the_witness(document))
    failure = next(f for r in document["requirements"] for f in r.get("failures", []))
    for text in ("histories.no-predicate-skew", "not certified", failure["reproduce"], "G2: predicate skew"):
        assert text.replace("'", "&#39;") in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")


def test_real_time_order_is_drawn_dashed_beside_the_cycle_and_the_real_time_cycle_on_its_own() -> None:
    """A witness with real-time context (two transactions of a write skew in successive rounds of one
    process): the rt edge between them is drawn dashed beside their cycle, and the cycle through real
    time (t1 -rt-> t2 -rw-> t1: not strict serializable) gets a drawing of its own."""
    import dataclasses

    from runlane_conformance.history import History, Span, check_history
    from runlane_conformance.history.witness import witness as witness_of
    from tests.history.histories import create, read, replace, txn

    def at(attempt: Any, number: int) -> Any:
        return dataclasses.replace(attempt, span=Span("p0", 2 * number, 2 * number + 1))

    history = History(
        (
            txn("s", create("x", "x0"), create("y", "y0")),
            at(txn("t1", read("x", "1", "x0"), read("y", "1", "y0"), replace("x", "1", "x0", "x1")), 0),
            at(txn("t2", read("x", "1", "x0"), read("y", "1", "y0"), replace("y", "1", "y0", "y2")), 1),
        )
    )
    data = witness_of(check_history(history), history)
    assert data["realtime_cycle"]["anomaly"] == "G-single-realtime"
    document = kept_report()
    failure = next(f for r in document["requirements"] for f in r.get("failures", []) if "witness" in f)
    failure["witness"] = data
    validate_report(document)
    page = render_html(document)
    assert_cycle_drawn(page, data)
    assert page.count('stroke-dasharray="5,2"') >= 2  # graphviz's dashed strokes: the context and the cycle
    assert "Real-time order (context)" in page and "t1 ended before t2 began" in page
    assert 'This class is forbidden from <span class="bad">strict serializable</span>' in page


def test_report_text_never_becomes_markup() -> None:
    document = kept_report()
    failure = next(f for r in document["requirements"] for f in r.get("failures", []))
    failure["message"] = "<script>alert(1)</script>"
    failure["witness"]["findings"][0]["nodes"][0]["ops"][0] = "read <b>k</b>"
    page = render_html(document)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>k</b>" not in page


def test_without_dot_the_page_lists_the_steps_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    document = kept_report()
    assert cycle_svg(the_witness(document)["findings"][0]) is None
    page = render_html(document)
    assert "<svg" not in page
    assert "Graphviz's dot is not installed" in page
    for edge in the_witness(document)["findings"][0]["edges"]:
        assert edge["detail"].replace("'", "&#39;") in page


def test_a_witness_that_does_not_fit_its_schema_is_left_out() -> None:
    witness = the_witness(kept_report())
    assert recorded_witness(json.dumps(witness)) == witness
    broken = copy.deepcopy(witness)
    del broken["findings"][0]["edges"][0]["kind"]
    assert recorded_witness(json.dumps(broken)) is None
    assert recorded_witness(json.dumps(witness)[:-10]) is None  # capped on its way: not JSON any more


def test_the_report_schema_holds_the_witness_schema_itself() -> None:
    from runlane_conformance.report.schema import REPORT_SCHEMA
    from runlane_conformance.report_witness import WITNESS_SCHEMA

    failures = REPORT_SCHEMA["$defs"]["results"]["properties"]["requirements"]["items"]["properties"][
        "failures"
    ]
    assert failures["items"]["properties"]["witness"] == WITNESS_SCHEMA


def test_the_report_schema_refuses_a_malformed_witness() -> None:
    document = kept_report()
    failure = next(f for r in document["requirements"] for f in r.get("failures", []))
    failure["witness"]["findings"][0]["edges"][0]["kind"] = "rx"
    with pytest.raises(ValueError, match="witness"):
        validate_report(document)


def test_junit_links_the_page_from_the_suite_and_every_failing_case() -> None:
    root = ET.fromstring(junit_xml(kept_report(), html="out/report.html"))
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["html_report"] == "out/report.html"
    failing = [case for case in root.iter("testcase") if case.find("failure") is not None]
    assert failing
    for case in failing:
        assert case.findtext("system-out") == "[[ATTACHMENT|out/report.html]]"


def test_the_html_command_writes_the_page_of_a_saved_report(tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = cli.invoke(app, ["html", str(KEPT_REPORT), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert_cycle_drawn(out.read_text(encoding="utf-8"), the_witness(kept_report()))


def test_the_html_command_refuses_what_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"report_version": 1}')
    result = cli.invoke(app, ["html", str(bad), "-o", str(tmp_path / "page.html")])
    assert result.exit_code == 2 and "refusing report" in result.output
    assert not (tmp_path / "page.html").exists()


def test_run_refuses_html_to_standard_output_before_running() -> None:
    result = cli.invoke(app, ["run", "--driver", "local", "--html", "-"])
    assert result.exit_code == 2 and "--html writes a file" in result.output


def test_a_run_without_a_verdict_leaves_a_page_that_says_so(tmp_path: Path) -> None:
    page, junit = tmp_path / "page.html", tmp_path / "junit.xml"
    page.write_text("an earlier run's page")
    result = cli.invoke(app, ["run", "--driver", "nosuchdriver", "--html", str(page), "--junit", str(junit)])
    assert result.exit_code == 2
    assert 'id="verdict">no verdict: the run is broken' in page.read_text(encoding="utf-8")
    assert f"[[ATTACHMENT|{page}]]" in junit.read_text(encoding="utf-8")


# --- in a real browser ----------------------------------------------------------------------------------


def chromium() -> str:
    """Debian's Chromium, or a skip that says why (a failure under CI=true, where .ci/run installs it)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    reason = "Chromium is not installed (apt-get install chromium): the page is not checked in a browser"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; under CI=true it must be (.ci/run installs it)")
    pytest.skip(reason)


def browse(page: Path, tmp_path: Path, *, screenshot: Path | None = None) -> str:
    """The DOM headless Chromium built from ``page``; with ``screenshot``, also a PNG of the window."""
    base = [
        chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root, where Chromium's own sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--font-render-hinting=none",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ]
    dom = subprocess.run(
        [*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    if screenshot is not None:
        subprocess.run(
            [*base, f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=120, check=True
        )
        assert screenshot.is_file(), "Chromium wrote no screenshot"
    return dom


def tile_means(path: Path) -> tuple[tuple[int, int], list[float]]:
    from PIL import Image

    with Image.open(path) as image:
        grey = image.convert("L")
        size = grey.size
        small = grey.resize((size[0] // TILE, size[1] // TILE), Image.Resampling.BOX)
        return size, [float(v) for v in small.tobytes()]


def assert_not_blank(path: Path) -> None:
    _, means = tile_means(path)
    assert max(means) - min(means) > 64, "the screenshot is blank (one colour)"
    assert sum(m < 200 for m in means) > len(means) // 50, "the screenshot shows almost nothing"


def test_a_failing_driver_s_page_shows_its_history_cycle_in_chromium(tmp_path: Path) -> None:
    """A live run of the histories mutant with --html, --report and --junit: the browser's DOM of the
    page has the drawn cycle of the report's witness, and the JUnit file links the page."""
    browser = chromium()
    assert browser
    report, junit, page = tmp_path / "report.json", tmp_path / "junit.xml", tmp_path / "report.html"
    command = [
        str(Path(sys.executable).parent / "runlane-certify"),
        "run",
        "--driver",
        MUTANT,
        "--area",
        "histories",
        "--seed",
        "1",
        "--examples",
        "none",
        f"--report={report}",
        f"--junit={junit}",
        f"--html={page}",
    ]
    # Run from the temporary folder (the saved history lands there), with the checkout on the path so
    # the mutant's module imports.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    ran = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert f"html:   {page}" in ran.stdout
    document = read_report(report)
    witness = the_witness(document)
    assert any(f["anomaly"] == "G2" for f in witness["findings"])
    shot = tmp_path / "live.png"
    assert_cycle_drawn(browse(page, tmp_path, screenshot=shot), witness)
    assert_not_blank(shot)
    assert f"[[ATTACHMENT|{page}]]" in junit.read_text(encoding="utf-8")


def test_the_page_looks_like_the_kept_screenshot(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(kept_report()), encoding="utf-8")
    shot = tmp_path / "page.png"
    dom = browse(page, tmp_path, screenshot=shot)
    assert_cycle_drawn(dom, the_witness(kept_report()))
    assert_not_blank(shot)
    if os.environ.get("RUNLANE_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(shot, KEPT_SCREENSHOT)
    size, means = tile_means(shot)
    kept_size, kept_means = tile_means(KEPT_SCREENSHOT)
    assert size == kept_size
    differing = sum(abs(a - b) > TILE_TOLERANCE for a, b in zip(means, kept_means, strict=True))
    assert differing <= TILES_ALLOWED * len(means), (
        f"{differing} of {len(means)} tiles differ from {KEPT_SCREENSHOT.name} by more than "
        f"{TILE_TOLERANCE} grey levels (allowed {TILES_ALLOWED:.1%}); after a deliberate change to the "
        "page, rerun with RUNLANE_UPDATE_SCREENSHOTS=1"
    )
