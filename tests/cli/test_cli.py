"""runlane-certify as a user meets it: exit codes, one-line errors, and the files it writes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from runlane_conformance.cli.app import app, main
from runlane_conformance.report.files import read_report
from runlane_conformance.report.schema import REPORT_SCHEMA

cli = CliRunner()


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert not result.stdout.strip(), f"a usage error must be the only output, got: {result.stdout!r}"
    return lines[0]


# --- run --------------------------------------------------------------------------------------------


def test_run_exits_0_and_says_certified_when_every_must_passes(fake_suite: str) -> None:
    result = invoke("run", "--driver", fake_suite, "--seed", "11")
    assert result.exit_code == 0, result.output
    assert "CERTIFIED: " in result.stdout and "at level core" in result.stdout
    for area in ("limits", "profile", "conflicts", "append", "exclusive_selection"):
        assert area in result.stdout
    assert "profile: append not offered" in result.stdout
    assert "seed 11" in result.stdout


def test_run_exits_1_and_names_the_failed_requirement_with_its_reproducer(fake_suite: str) -> None:
    result = invoke(
        "run", "--driver", fake_suite, "--option", "break=limits.point-reads-boundary", "--seed", "5"
    )
    assert result.exit_code == 1, result.output
    assert "NOT CERTIFIED" in result.stdout
    assert "limits.point-reads-boundary (MUST)\n    AssertionError: the fake driver breaks" in result.stdout
    assert (
        f"reproduce:    runlane-certify run --driver {fake_suite} --option "
        "break=limits.point-reads-boundary --requirement limits.point-reads-boundary --profile quick --seed 5"
    ) in result.stdout
    assert "--hypothesis-seed=5" in result.stdout


def test_the_unusable_hypothesis_blob_stays_in_the_report_not_on_the_terminal(
    fake_suite: str, tmp_path: Path
) -> None:
    path = tmp_path / "report.json"
    result = invoke(
        "run",
        "-d",
        fake_suite,
        "-o",
        "break=conflicts.lost-update",
        "-a",
        "conflicts",
        "--seed",
        "2",
        "--report",
        str(path),
    )
    assert result.exit_code == 1
    assert "reproduce_failure" not in result.stdout
    failed = next(r for r in read_report(path)["requirements"] if r["id"] == "conflicts.lost-update")
    assert failed["failures"]  # the report keeps the failure (and any blob, see test_runner)


def test_an_unknown_driver_exits_2_with_one_line(fake_suite: str) -> None:
    result = invoke("run", "--driver", "no-such-driver")
    assert result.exit_code == 2
    assert one_error_line(result).startswith(
        "runlane-certify: error: driver 'no-such-driver' is not installed"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--option", "nonsense"), "driver option 'nonsense' is not of the form key=value"),
        (("--option", "colour=blue"), "its harness factory raised ValueError: unknown option 'colour'"),
        (("--option", "explode=true"), "cannot reach the fake database"),
        (("--area", "nowhere"), "unknown area 'nowhere'"),
        (("--report", "/no/such/dir/report.json"), "directory '/no/such/dir' does not exist"),
        (("--junit", "/no/such/dir/junit.xml"), "directory '/no/such/dir' does not exist"),
    ],
)
def test_usage_and_driver_loading_errors_exit_2_with_one_line(
    fake_suite: str, args: tuple[str, ...], message: str
) -> None:
    result = invoke("run", "--driver", fake_suite, *args)
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result)


def test_a_run_that_breaks_exits_3(fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runlane_conformance.run import certify as runner

    monkeypatch.setattr(runner, "SUITE_ARGS", (str(tmp_path),))
    result = invoke("run", "--driver", fake_suite)
    assert result.exit_code == 3
    assert "runlane-certify: error: the run broke: no checks were collected" in result.stderr


def test_command_line_mistakes_are_one_line_through_the_console_script(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--driver", "local", "--workers", "many"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("runlane-certify: error: Invalid value for '--workers'")


def test_the_report_is_schema_valid_and_records_the_verdict(fake_suite: str, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    result = invoke(
        "run", "-d", fake_suite, "-o", "break=conflicts.lost-update", "--seed", "8", "--report", str(path)
    )
    assert result.exit_code == 1
    document = json.loads(path.read_text())
    Draft202012Validator(REPORT_SCHEMA).validate(document)
    assert read_report(path) == document
    assert document["kind"] == "certification"
    assert document["run"]["seed"] == 8
    assert document["certification"] == {
        "certified": False,
        "level": "none",
        "complete": True,
        "must_failed": ["conflicts.lost-update"],
        "should_failed": [],
        "inconclusive": [],
    }
    failed = next(r for r in document["requirements"] if r["id"] == "conflicts.lost-update")
    assert failed["outcome"] == "failed" and failed["checks"] == 2
    assert all("--seed 8" in failure["reproduce"] for failure in failed["failures"])
    gated = next(r for r in document["requirements"] if r["id"] == "append.contiguous-positions")
    assert (gated["outcome"], gated["reason"]) == ("gated", "profile: append not offered")
    assert {a["area"]: a["requirements"] for a in document["areas"]}["conflicts"] == {
        "passed": 1,
        "failed": 1,
        "gated": 0,
        "not_run": 0,
        "inconclusive": 0,
    }
    assert document["run"]["status"] == "complete"
    assert document["run"]["checks"] == {
        "required": 14,
        "run": 14,
        "passed": 9,
        "failed": 2,
        "gated": 3,
        "not_run": 0,
        "inconclusive": 0,
    }
    assert document["toolkit"]["suite_digest"].startswith("sha256:")
    assert document["environment"]["supervised"] is True
    assert {p["name"] for p in document["environment"]["plugins"]} >= {"runlane_conformance.fixtures.plugin"}


def test_junit_has_a_testcase_per_requirement_with_its_id_as_name_and_property(
    fake_suite: str, tmp_path: Path
) -> None:
    path = tmp_path / "junit.xml"
    result = invoke("run", "-d", fake_suite, "-o", "break=limits.record-bytes-boundary", "--junit", str(path))
    assert result.exit_code == 1
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert len(cases) == 13 and root.get("tests") == "13" and root.get("failures") == "1"
    broken = cases["limits.record-bytes-boundary"]
    assert broken.get("classname") == "runlane.limits"
    properties = {p.get("name"): p.get("value") for p in broken.iter("property")}
    assert properties["requirement"] == "limits.record-bytes-boundary"
    assert properties["level"] == "MUST"
    failure = broken.find("failure")
    assert failure is not None and "on purpose" in (failure.get("message") or "")
    assert "reproduce: runlane-certify run" in (failure.text or "")
    skipped = cases["append.contiguous-positions"].find("skipped")
    assert skipped is not None and skipped.get("message") == "profile: append not offered"
    assert cases["profile.advertised-profile-coherent"].find("failure") is None


# --- report, schema, list ---------------------------------------------------------------------------


def test_report_runs_only_limits_and_profile_and_shows_limits_verified_at_their_boundary(
    fake_suite: str, tmp_path: Path
) -> None:
    path = tmp_path / "capabilities.json"
    result = invoke("report", "--driver", fake_suite, "-o", "point_reads=7", "--report", str(path))
    assert result.exit_code == 0, result.output
    document = read_report(path)
    assert document["kind"] == "capabilities"
    assert {a["area"] for a in document["areas"]} == {"limits", "profile"}
    assert document["certification"]["complete"] is False
    limits = {entry["name"]: entry for entry in document["limits"]}
    assert limits["max_point_reads"] == {
        "name": "max_point_reads",
        "advertised": 7,
        "status": "passed",
        "accepted_at": 7,
        "rejected_at": 8,
        "reason": None,
        "requirements": ["limits.point-reads-boundary"],
    }
    checks = {entry["name"]: entry["status"] for entry in document["checks"]}
    assert checks == {
        "limit_coherence": "passed",
        "durability": "gated",
        "clock": "passed",
        "index_consistency": "passed",
    }
    assert document["capabilities"]["append"] == {"offered": False, "status": "not_run"}
    assert "max_point_reads" in result.stdout and "nothing committed" in result.stdout


def test_report_marks_a_limit_that_fails_its_boundary_and_exits_1(fake_suite: str) -> None:
    result = invoke("report", "--driver", fake_suite, "-o", "break=limits.record-bytes-boundary", "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    limits = {entry["name"]: entry for entry in document["limits"]}
    assert limits["max_record_bytes"]["status"] == "failed"
    assert limits["max_record_bytes"]["accepted_at"] is None


def test_report_from_a_saved_file_refuses_an_invalid_one(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"report_version": 1}))
    result = invoke("report", "--from", str(path))
    assert result.exit_code == 2
    assert "invalid report at $" in one_error_line(result)
    result = invoke("report", "--from", str(tmp_path / "missing.json"))
    assert result.exit_code == 2
    assert "cannot read report" in one_error_line(result)


def test_schema_prints_a_draft_2020_12_schema() -> None:
    result = invoke("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema == REPORT_SCHEMA


def test_list_shows_the_bundled_driver_with_its_distribution() -> None:
    result = invoke("list")
    assert result.exit_code == 0
    row = next(line for line in result.stdout.splitlines() if " local " in line)
    assert "runlane-conformance" in row


def test_help_explains_each_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("run", "list", "report", "schema", "badge"):
        assert command in result.stdout
    assert "3 the run itself broke" in result.stdout


# --- badge ------------------------------------------------------------------------------------------


def _report(fake_suite: str, tmp_path: Path, *options: str, partial: bool = False) -> Path:
    path = tmp_path / "report.json"
    args = ["run", "-d", fake_suite, "--report", str(path)]
    if partial:
        args += ["-a", "limits", "-a", "profile"]
    for option in options:
        args += ["-o", option]
    invoke(*args)
    return path


def test_badge_of_a_failing_report_is_red_and_says_not_certified(fake_suite: str, tmp_path: Path) -> None:
    report = _report(fake_suite, tmp_path, "break=profile.advertised-profile-coherent")
    svg, endpoint = tmp_path / "badge.svg", tmp_path / "badge.json"
    result = invoke("badge", str(report), "--svg", str(svg), "--endpoint", str(endpoint))
    assert result.exit_code == 0, result.output
    assert json.loads(endpoint.read_text()) == {
        "schemaVersion": 1,
        "label": f"runlane {fake_suite}",
        "message": "not certified",
        "color": "red",
        "isError": True,
    }
    texts = [t.text for t in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}text")]
    assert "not certified" in texts


def test_badge_of_a_passing_complete_report_names_its_level(fake_suite: str, tmp_path: Path) -> None:
    report = _report(fake_suite, tmp_path)
    endpoint = tmp_path / "badge.json"
    assert invoke("badge", str(report), "--endpoint", str(endpoint)).exit_code == 0
    badge = json.loads(endpoint.read_text())
    assert (badge["message"], badge["color"], badge["isError"]) == ("core", "brightgreen", False)


def test_badge_refuses_a_partial_report(fake_suite: str, tmp_path: Path) -> None:
    report = _report(fake_suite, tmp_path, partial=True)
    endpoint = tmp_path / "badge.json"
    result = invoke("badge", str(report), "--endpoint", str(endpoint))
    assert result.exit_code == 2
    assert "partial run, which is never a certification" in one_error_line(result)
    assert not endpoint.exists()


def test_badge_escapes_every_string_it_draws(fake_suite: str, tmp_path: Path) -> None:
    report = _report(fake_suite, tmp_path)
    document = json.loads(report.read_text())
    document["driver"]["spec"] = 'evil<script>alert("x")</script>&co'
    report.write_text(json.dumps(document))
    svg = tmp_path / "badge.svg"
    assert invoke("badge", str(report), "--svg", str(svg)).exit_code == 0
    text = svg.read_text()
    assert "<script>" not in text
    root = ET.fromstring(text)  # well-formed despite the hostile name
    drawn = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert 'runlane evil<script>alert("x")</script>&co' in drawn


def test_badge_refuses_an_invalid_report_with_the_schema_error(fake_suite: str, tmp_path: Path) -> None:
    report = _report(fake_suite, tmp_path)
    document = json.loads(report.read_text())
    document["certification"]["level"] = "gold"
    report.write_text(json.dumps(document))
    svg = tmp_path / "badge.svg"
    result = invoke("badge", str(report), "--svg", str(svg))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "invalid report at $.certification.level" in line and "'gold'" in line
    assert not svg.exists()


def test_badge_needs_somewhere_to_write(fake_suite: str, tmp_path: Path) -> None:
    result = invoke("badge", str(_report(fake_suite, tmp_path)))
    assert result.exit_code == 2
    assert "--svg PATH and/or --endpoint PATH" in one_error_line(result)


def test_the_reference_driver_passes_its_point_reads_area_through_the_cli_as_a_partial_run(
    tmp_path: Path,
) -> None:
    report = tmp_path / "local.json"
    result = invoke("run", "--driver", "local", "--area", "point_reads", "--report", str(report))
    assert result.exit_code == 0, result.output
    assert "PARTIAL RUN" in result.stdout and "not a certification" in result.stdout
    document = read_report(report)
    assert document["driver"]["distribution"] == "runlane-conformance"
    assert document["driver"]["target"] == "runlane_conformance.local.harness:local_harness"
    assert document["run"]["status"] == "partial" and not document["certification"]["certified"]
