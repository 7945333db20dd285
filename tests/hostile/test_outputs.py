"""Hostile text and hostile output paths through the real ``runlane-certify``, in a subprocess as CI runs it.

Whatever a driver says (escape sequences, control characters, lone surrogates,
invalid UTF-8, ten megabytes, an exception that cannot be printed) and wherever
the user points the output files (a device, a FIFO, a directory, a path through
a file), the CLI answers with the right exit status, a terminal free of the
driver's control sequences and secrets, and files that parse: JSON that loads
and validates, JUnit and SVG that are well-formed XML.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.report.files import read_report
from runlane_conformance.safe_text import MESSAGE_LIMIT

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "tests.hostile.text_driver:harness"
ENTRY = "import sys; from runlane_conformance.cli.app import main; main(sys.argv[1:])"

#: Secrets passed as driver options; not one of them may appear in any output.
SECRET_OPTIONS = (
    "password=hunter2secret",
    "dsn=postgres://alice:pw123word@db/app",
    "mirror=https://bob:tok3n-value@example.com/x",
)
SECRETS = ("hunter2secret", "pw123word", "tok3n-value", "alice:", "bob:")

#: An option whose key and value are hostile: escape sequences, a bell, and bytes that are not UTF-8.
HOSTILE_OPTION = os.fsencode("n\x1b[31mote\udcff=\x1b]0;title\x07\x1b[2Jred\x07bell\x9b\u202e")

# What a terminal or a file may never receive from a driver: ESC and the other C0 controls (but tab
# and newline), DEL, C1 controls, Unicode line separators and bidi controls, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@dataclass(frozen=True)
class Done:
    """A finished ``runlane-certify`` process."""

    returncode: int
    stdout: str
    stderr: str


def certify(*args: str | bytes, cwd: Path = ROOT, timeout: float = 240) -> Done:
    """Run the CLI as a user would; its output must be valid UTF-8 (decoding is strict)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "FORCE_COLOR"))}
    env.update({"COLUMNS": "200", "TERM": "dumb", "PYTHONPATH": str(ROOT)})
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], cwd=cwd, env=env, capture_output=True, timeout=timeout
    )
    return Done(done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))


def assert_safe(text: str, where: str = "output") -> None:
    """No control sequence, unsafe character, secret or traceback in ``text``."""
    found = _UNSAFE.search(text)
    assert found is None, f"{where} carries {found.group()!r} at {found.start()}: {text[:2000]!r}"
    for secret in SECRETS:
        assert secret not in text, f"{where} shows the secret {secret!r}"
    assert "Traceback" not in text, f"{where} shows a traceback: {text[-3000:]}"


def assert_safe_strings(value: Any, where: str) -> None:
    """Every string in a JSON value (keys too) is safe."""
    if isinstance(value, str):
        assert_safe(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            assert_safe(key, where)
            assert_safe_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_safe_strings(item, f"{where}[{index}]")


def assert_safe_xml(path: Path) -> ET.Element:
    """The file parses as XML and no text or attribute in it is unsafe."""
    root = ET.parse(path).getroot()
    for element in root.iter():
        for text in (element.text or "", element.tail or "", *element.attrib.values()):
            assert_safe(text, f"{path.name} <{element.tag}>")
    return root


def failures(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [failure for r in document["requirements"] for failure in r.get("failures", [])]


@dataclass(frozen=True)
class HostileRun:
    """One run of the hostile driver, and what it left behind."""

    done: Done
    document: dict[str, Any]
    junit: Path
    report_size: int

    @property
    def failure(self) -> dict[str, Any]:
        """The run's one failure (the driver is hostile in its first transaction only)."""
        (found,) = failures(self.document)
        return found


def run_hostile(directory: Path, mode: str, *, once: bool = True) -> HostileRun:
    """Run the hostile driver (secrets and invalid UTF-8 in its options) and check every output is safe."""
    report, junit = directory / "report.json", directory / "junit.xml"
    args: list[str | bytes] = ["run", "--driver", DRIVER, "--option", f"text_mode={mode}"]
    for option in SECRET_OPTIONS:
        args += ["--option", option]
    args += ["--option", HOSTILE_OPTION, "--option", f"text_once={str(once).lower()}"]
    args += ["--area", "point_reads", "--seed", "1"]
    done = certify(*args, "--report", str(report), "--junit", str(junit))
    assert_safe(done.stdout, "stdout")
    assert_safe(done.stderr, "stderr")
    raw = report.read_bytes().decode("utf-8")  # strict: the file is UTF-8
    for secret in SECRETS:
        assert secret not in raw
    document = read_report(report)  # loads and validates against the schema
    assert_safe_strings(document, "report")
    assert_safe_xml(junit)
    assert done.returncode == 1, done.stderr
    assert not document["certification"]["certified"]
    return HostileRun(done, document, junit, len(raw))


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> HostileRun:
    """One failure carrying escape sequences, controls, surrogates, echoed secrets, ten million
    characters and a chained error that cannot be printed."""
    return run_hostile(tmp_path_factory.mktemp("everything"), "everything")


# --- driver text ------------------------------------------------------------------------------------


def test_escape_sequences_controls_surrogates_and_secrets_in_driver_text_are_neutralised(
    everything: HostileRun,
) -> None:
    stdout, document = everything.done.stdout, everything.document
    # Shown, not obeyed: the lone bell is visible as text, the escape sequences are gone.
    assert "red\\x07bell\\x9b\\u202e" in stdout
    assert "password=***" in stdout and "dsn=***" in stdout
    assert "mirror=https://***@example.com/x" in stdout
    assert "put your own back in to reproduce" in stdout
    # The option with invalid UTF-8 in its key survives, with U+FFFD where the bad byte was.
    assert "note\ufffd" in document["driver"]["options"]
    assert document["driver"]["options"]["password"] == "***"
    details = everything.failure["details"]
    assert "connecting with password *** to ***" in details
    assert "lone \ufffd and caf\ufffd \ufffd\ufffd" in details
    assert "HostileError" in everything.failure["message"]
    assert "HostileError" in everything.junit.read_text(encoding="utf-8")


def test_a_ten_megabyte_message_is_capped_everywhere(everything: HostileRun) -> None:
    details = everything.failure["details"]
    hidden = re.search(r"\.\.\. \((\d+) more characters\) \.\.\.", details)
    assert hidden is not None and int(hidden.group(1)) > 9_900_000
    assert len(details) <= 20_000 + 80
    message = everything.failure["message"]
    assert re.search(r"x \.\.\. \(\d{7} more characters\)$", message)
    assert len(message) <= MESSAGE_LIMIT + 40
    assert max(len(line) for line in everything.done.stdout.splitlines()) < MESSAGE_LIMIT + 200
    assert everything.junit.stat().st_size < 300_000
    assert everything.report_size < 300_000


def test_an_error_whose_str_raises_fails_its_check_and_is_reported_by_type(tmp_path: Path) -> None:
    run = run_hostile(tmp_path, "unprintable")
    assert "UnprintableError" in run.failure["message"] + run.failure["details"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("factory", "its harness factory raised HostileError: CERTIFIED\\x0dbell\\x07 nul\\x00"),
        ("factory_unprintable", "raised UnprintableError: <unprintable UnprintableError>"),
    ],
    ids=["factory-raises-hostile-text", "factory-raises-unprintable"],
)
def test_a_harness_factory_failure_is_one_clean_redacted_line_with_exit_2(
    tmp_path: Path, mode: str, expected: str
) -> None:
    args: list[str | bytes] = ["run", "--driver", DRIVER, "-o", f"text_mode={mode}", "-o", HOSTILE_OPTION]
    for option in SECRET_OPTIONS:
        args += ["-o", option]
    done = certify(*args, "--report", str(tmp_path / "r.json"))
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert_safe(line, "stderr")
    assert line.startswith("runlane-certify: error: driver 'tests.hostile.text_driver:harness'")
    assert expected in line
    # The report says the run broke (with the same clean, redacted line), never that it passed.
    document = read_report(tmp_path / "r.json")
    assert document["run"]["status"] == "broken"
    assert_safe_strings(document, "report")
    assert expected in document["run"]["problems"][0]


def test_a_driver_name_with_escapes_and_invalid_utf8_is_one_clean_line() -> None:
    done = certify("run", "--driver", os.fsencode("\x1b[2J\x1b]0;x\x07evil\udcff:fac\x9btory"))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert_safe(line, "stderr")
    assert "evil" in line and done.stdout == ""


def test_a_skip_raised_by_the_driver_is_shown_safely_and_never_certifies(tmp_path: Path) -> None:
    # Every check skips with the hostile message as its reason; wherever that reason is shown
    # (a skip reason, or the failure a stray skip is judged to be), it arrives cleaned and redacted.
    run = run_hostile(tmp_path, "skip", once=False)
    assert "connecting with password *** to ***" in json.dumps(run.document, ensure_ascii=False)


# --- badge from a report carrying hostile text --------------------------------------------------------


@pytest.fixture(scope="module")
def certified_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real, complete report of the reference driver (the badge only draws complete reports)."""
    path = tmp_path_factory.mktemp("certified") / "report.json"
    done = certify("run", "--driver", "local", "--seed", "1", "--report", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_badge_of_a_report_with_a_hostile_driver_name_is_valid_svg_and_json(
    certified_report: dict[str, Any], tmp_path: Path
) -> None:
    hostile = json.loads(json.dumps(certified_report))
    # As a hand-edited report could say it: JSON escapes for ESC, BEL, a lone surrogate, C1, bidi.
    hostile["driver"]["spec"] = "\x1b[31mevil\x07 \ud800 \x9b\u202e<tag>&" + "y" * 5000
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile, ensure_ascii=True), encoding="ascii")
    svg, endpoint = tmp_path / "badge.svg", tmp_path / "badge.json"
    done = certify("badge", str(path), "--svg", str(svg), "--endpoint", str(endpoint))
    assert done.returncode == 0, done.stderr
    assert_safe(done.stdout, "stdout")
    root = assert_safe_xml(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert int(root.attrib["width"]) < 1500
    shown = json.loads(endpoint.read_bytes().decode("utf-8"))
    assert_safe_strings(shown, "endpoint")
    assert shown["label"].startswith("runlane evil\\x07 \ufffd \\x9b\\u202e<tag>&yyy")
    assert len(shown["label"]) <= 80 + 40


# --- output paths ------------------------------------------------------------------------------------


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[dict[str, Path]]:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "full-link"
    link.symlink_to("/dev/full")
    parent_file = tmp_path / "file"
    parent_file.write_text("a file")
    yield {
        "dev-full": Path("/dev/full"),
        "fifo": fifo,
        "symlink-to-dev-full": link,
        "directory": tmp_path,
        "parent-is-a-file": parent_file / "out",
    }
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink() and parent_file.read_text() == "a file"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "full-link", "pipe"]  # no temp files


# The whole matrix of targets and flags runs in-process in tests/cli/test_output_files.py; here a few
# representative cases go through a real process, where a blocking FIFO open would hang it.


@pytest.mark.parametrize(
    ("flag", "name"), [("--report", "fifo"), ("--report", "dev-full"), ("--junit", "symlink-to-dev-full")]
)
def test_run_refuses_an_unwritable_output_before_running_with_one_line(
    targets: dict[str, Path], name: str, flag: str
) -> None:
    done = certify("run", "--driver", "local", flag, str(targets[name]), timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""  # refused before the run started
    (line,) = done.stderr.splitlines()
    assert line.startswith("runlane-certify: error: cannot write ")


@pytest.mark.parametrize(("flag", "name"), [("--svg", "fifo"), ("--endpoint", "dev-full")])
def test_badge_refuses_an_unwritable_output_with_one_line(
    targets: dict[str, Path], name: str, flag: str, tmp_path: Path
) -> None:
    done = certify("badge", str(tmp_path / "no-report-needed.json"), flag, str(targets[name]), timeout=60)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("runlane-certify: error: cannot write ")
