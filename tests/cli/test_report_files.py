"""Reports on disk: written atomically, validated when written and when read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runlane_conformance.report import files as output_files
from runlane_conformance.report.builder import build_report
from runlane_conformance.report.files import read_report, write_report
from runlane_conformance.report.schema import ReportError
from runlane_conformance.runner import run_suites


@pytest.fixture
def document(fake_suite: str) -> dict:
    return build_report(run_suites(fake_suite, {}, seed=3, areas=["limits", "profile"]), kind="capabilities")


def test_a_failure_between_write_and_rename_leaves_the_previous_report_and_no_debris(
    document: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.json"
    write_report(path, document)
    previous = path.read_text()

    def refuse(*_: object) -> None:
        raise OSError("disk vanished")

    monkeypatch.setattr(output_files.os, "replace", refuse)
    changed = {**document, "run": {**document["run"], "seed": 99}}
    with pytest.raises(OSError, match="disk vanished"):
        write_report(path, changed)
    assert path.read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_writer_killed_mid_write_leaves_no_partial_report(document: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_report(path, document)
    previous = path.read_text()
    # The child writes a new report but is frozen just before the rename; then it is SIGKILLed.
    script = textwrap.dedent(
        f"""
        import json, os, sys, threading
        from runlane_conformance.report import files as output_files
        document = json.loads({json.dumps(json.dumps(document))})
        document["run"]["seed"] = 12345
        def freeze(*args):
            print("written", flush=True)
            threading.Event().wait()
        output_files.os.replace = freeze
        output_files.write_report({str(path)!r}, document)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert path.read_text() == previous
    assert read_report(path)["run"]["seed"] == 3
    leftovers = [p for p in tmp_path.iterdir() if p.name != "report.json"]
    assert leftovers and all(p.name.startswith(".report.json.") for p in leftovers)
    assert json.loads(leftovers[0].read_text())["run"]["seed"] == 12345  # the full new text, never renamed


def test_an_invalid_document_is_never_written(document: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    with pytest.raises(ReportError, match=r"invalid report at \$.kind"):
        write_report(path, {**document, "kind": "vibes"})
    assert not path.exists()


def test_certified_and_level_must_agree(document: dict, tmp_path: Path) -> None:
    bad = {**document, "certification": {**document["certification"], "certified": True}}
    with pytest.raises(ReportError, match="certified and level disagree"):
        write_report(tmp_path / "r.json", bad)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read report"),
        ("{not json", "is not JSON"),
        ('{"report_version": 3}', "invalid report at $"),
    ],
)
def test_reading_refuses_anything_but_a_valid_report_with_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ReportError) as error:
        read_report(path)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_secret_looking_driver_options_are_redacted_in_the_report(fake_suite: str) -> None:
    result = run_suites(fake_suite, {"break": "limits.point-reads-boundary"}, seed=1, areas=["limits"])
    result = type(result)(**{**result.__dict__, "options": {"dsn": "postgres://u:pw@h/db", "schema": "x"}})
    document = build_report(result)
    assert document["driver"]["options"] == {"dsn": "***", "schema": "x"}
    assert "pw@h" not in json.dumps(document)


def test_the_report_file_is_replaced_not_rewritten_in_place(document: dict, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_report(path, document)
    first_inode = os.stat(path).st_ino
    write_report(path, document)
    assert os.stat(path).st_ino != first_inode


def test_report_evidence_tables_name_only_catalogued_requirements() -> None:
    from runlane_conformance.catalogue import all_requirements
    from runlane_conformance.report.builder import ALL_LIMITS_EVIDENCE, CHECK_EVIDENCE, LIMIT_EVIDENCE

    catalog = all_requirements()
    named = {*ALL_LIMITS_EVIDENCE}
    for ids in (*LIMIT_EVIDENCE.values(), *CHECK_EVIDENCE.values()):
        named.update(ids)
    unknown = sorted(named - set(catalog))
    assert not unknown, f"report evidence names unknown requirements: {unknown}"
