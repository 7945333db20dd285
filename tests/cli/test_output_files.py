"""Output files: refused before the run when they cannot be written, written atomically, never destroying."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.report import files as output_files
from runlane_conformance.report.files import (
    OutputFileError,
    check_output_path,
    current_umask,
    write_text_atomically,
)


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def only(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def one_line(error: pytest.ExceptionInfo[OutputFileError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_new_file_gets_the_users_umask_not_0600(tmp_path: Path, umask: None) -> None:
    for mask, mode in ((0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o002, 0o664)):
        os.umask(mask)
        assert current_umask() == mask
        target = tmp_path / f"report-{mask:o}.json"
        write_text_atomically(target, "{}\n")
        assert stat.S_IMODE(target.stat().st_mode) == mode


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_text_atomically(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert only(tmp_path) == ["link.json", "real.json"]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: tmp, "it is a directory"),
        (lambda tmp: _fifo(tmp / "pipe"), "it is a FIFO (named pipe)"),
        (lambda tmp: Path("/dev/full"), "it is a device"),
        (lambda tmp: Path("/dev/null"), "it is a device"),
        (lambda tmp: _link(tmp / "full", Path("/dev/full")), "it is a device (it leads to '/dev/full')"),
        (lambda tmp: _link(tmp / "to-pipe", _fifo(tmp / "pipe")), "it is a FIFO (named pipe) (it leads to"),
        (lambda tmp: _file(tmp / "file") / "report.json", "Not a directory"),
        (lambda tmp: tmp / "missing" / "report.json", "does not exist"),
        (lambda tmp: _link(tmp / "dangling", tmp / "missing" / "r.json"), "does not exist"),
        (lambda tmp: Path(""), "'.': it is a directory"),
    ],
    ids=[
        "directory",
        "fifo",
        "dev-full",
        "dev-null",
        "symlink-to-device",
        "symlink-to-fifo",
        "parent-is-a-file",
        "missing-directory",
        "dangling-symlink",
        "empty",
    ],
)
def test_unwritable_targets_are_refused_with_one_line_and_left_alone(
    tmp_path: Path, make: object, expected: str
) -> None:
    target = make(tmp_path)  # type: ignore[operator]
    before = {p.name: p.lstat().st_mode for p in tmp_path.iterdir()}
    with pytest.raises(OutputFileError) as error:
        check_output_path(target, "report")
    assert expected in one_line(error)
    with pytest.raises(OutputFileError):
        write_text_atomically(target, "text", "report")
    assert {p.name: p.lstat().st_mode for p in tmp_path.iterdir()} == before  # nothing made or replaced
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def _fifo(path: Path) -> Path:
    if not path.exists():
        os.mkfifo(path)
    return path


def _link(path: Path, target: Path) -> Path:
    path.symlink_to(target)
    return path


def _file(path: Path) -> Path:
    path.write_text("a file, not a directory")
    return path


def test_a_read_only_directory_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    (directory / "report.json").write_text("previous")
    directory.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root ignores permission bits; ask the question a read-only mount answers
            real_access = os.access
            monkeypatch.setattr(
                output_files.os,
                "access",
                lambda path, mode, **kw: False if Path(path) == directory else real_access(path, mode, **kw),
            )
        with pytest.raises(OutputFileError) as error:
            write_text_atomically(directory / "report.json", "new", "report")
        assert one_line(error).endswith("is not writable")
        assert (directory / "report.json").read_text() == "previous"
        assert only(directory) == ["report.json"]
    finally:
        directory.chmod(0o755)


def _failing(call: str, code: int, monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """Make ``os.<call>`` fail with ``code`` for files in ``directory`` only (nothing else is disturbed)."""
    real = getattr(os, call)

    def in_directory(fd: int) -> bool:
        try:
            return Path(os.readlink(f"/proc/self/fd/{fd}")).parent == directory
        except OSError:
            return False

    def failing(fd: int, *args: object) -> object:
        if in_directory(fd):
            raise OSError(code, os.strerror(code))
        return real(fd, *args)

    monkeypatch.setattr(output_files.os, call, failing)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell the temp file's fd apart")
@pytest.mark.parametrize(
    ("call", "code", "reason"),
    [("write", errno.ENOSPC, "No space left on device"), ("fsync", errno.EIO, "Input/output error")],
)
def test_a_full_disk_at_write_time_keeps_the_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int, reason: str
) -> None:
    target = tmp_path / "report.json"
    target.write_text("previous")
    _failing(call, code, monkeypatch, tmp_path)
    with pytest.raises(OutputFileError) as error:
        write_text_atomically(target, "x" * 100_000, "report")
    assert one_line(error) == f"cannot write report {str(target)!r}: {reason}"
    assert target.read_text() == "previous"
    assert only(tmp_path) == ["report.json"]


def test_writing_to_dev_full_itself_would_fail_but_is_never_attempted() -> None:
    # /dev/full accepts an open and fails every write with ENOSPC; the check refuses it before that.
    with pytest.raises(OutputFileError, match="it is a device"):
        write_text_atomically(Path("/dev/full"), "text", "JUnit file")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


# --- through the CLI (in-process; tests/hostile/test_outputs.py runs a few of these in a real process) ---


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Every kind of target a file cannot be written to; afterwards, each is checked to be untouched."""
    fifo = _fifo(tmp_path / "pipe")
    link = _link(tmp_path / "full-link", Path("/dev/full"))
    parent_file = _file(tmp_path / "file")
    yield {
        "dev-full": Path("/dev/full"),
        "fifo": fifo,
        "symlink-to-dev-full": link,
        "symlink-to-fifo": _link(tmp_path / "pipe-link", fifo),
        "directory": tmp_path,
        "parent-is-a-file": parent_file / "out",
        "missing-directory": tmp_path / "missing" / "out",
    }
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink()
    assert parent_file.read_text() == "a file, not a directory"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert only(tmp_path) == ["file", "full-link", "pipe", "pipe-link"]  # no temp files


TARGETS = [
    "dev-full",
    "fifo",
    "symlink-to-dev-full",
    "symlink-to-fifo",
    "directory",
    "parent-is-a-file",
    "missing-directory",
]


def _one_error_line(result: object) -> str:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert result.stdout == ""  # type: ignore[attr-defined]
    (line,) = result.stderr.splitlines()  # type: ignore[attr-defined]
    assert line.startswith("runlane-certify: error: cannot write ")
    return str(line)


@pytest.mark.parametrize("flag", ["--report", "--junit"])
@pytest.mark.parametrize("name", TARGETS)
def test_run_refuses_every_unwritable_target_before_the_run(
    targets: dict[str, Path], name: str, flag: str
) -> None:
    result = CliRunner().invoke(app, ["run", "--driver", "local", flag, str(targets[name])])
    _one_error_line(result)


@pytest.mark.parametrize("flag", ["--svg", "--endpoint"])
@pytest.mark.parametrize("name", TARGETS)
def test_badge_refuses_every_unwritable_target(targets: dict[str, Path], name: str, flag: str) -> None:
    result = CliRunner().invoke(app, ["badge", "any-report.json", flag, str(targets[name])])
    _one_error_line(result)


def test_report_refuses_an_unwritable_target_before_the_run(targets: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["report", "--driver", "local", "--report", str(targets["fifo"])])
    _one_error_line(result)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell the temp file's fd apart")
def test_a_disk_too_full_for_the_running_marker_is_one_line_exit_2_and_empties_the_old_report(
    fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.json"
    report.write_text("previous")
    _failing("write", errno.ENOSPC, monkeypatch, tmp_path)
    result = CliRunner().invoke(app, ["run", "--driver", fake_suite, "--seed", "1", "--report", str(report)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line == (
        f"runlane-certify: error: cannot write report {str(report)!r}: No space left on device; "
        "any earlier file there was emptied"
    )
    assert "Traceback" not in result.output
    assert report.read_text() == ""  # an earlier run's report must not pass for this one
    assert only(tmp_path) == ["report.json"]
