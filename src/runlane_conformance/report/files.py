"""Atomic writes: the files a run produces (report, JUnit, badge) without ever damaging what is on disk.

``write_report`` and ``read_report`` are the report's own pair: validated on the way out and on the
way back in (``report.schema``).

Two moments matter:

* **Before the run** (``check_output_path``): the cheap checks that would
  otherwise only fail after minutes of checks -- the directory exists, is a
  directory and is writable; the target, if it exists, is a regular file (not a
  directory, device, FIFO or socket; symbolic links are followed). A FIFO is
  never opened, so a run cannot block forever waiting for a reader.
* **At write time** (``write_text_atomically``): the text goes to a temporary
  file next to the target, is flushed and fsynced, and only then renamed over
  it. Any failure (a full disk, a vanished directory, a target that turned
  into a device meanwhile) removes the temporary file and leaves the previous
  target untouched, and is raised as one ``OutputFileError`` line.

Standard output is a target too (``OutputTarget``): ``-`` names it, and so does
any path that is the very file standard output already is (``/dev/stdout``,
``/dev/fd/1``, ``/proc/self/fd/1``, or a path the shell redirected stdout to).
Such a target is written to standard output as it is instead of
being replaced by a rename: a pipe or terminal cannot be renamed over, and a
redirected file must stay the one the shell opened.

Files get the permissions any other program would give them: ``0o666``
masked by the user's umask (a plain ``tempfile.mkstemp`` would leave every
report readable by its owner only). A target that is a symbolic link is
written through: the link stays, and the file it points to is replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..contract.errors import RunlaneError
from ..safe_text import describe_exception, json_text, one_line

if TYPE_CHECKING:
    from .model import Report

__all__ = [
    "STDOUT",
    "OutputFileError",
    "OutputTarget",
    "check_output_directory",
    "check_output_path",
    "current_umask",
    "invalidate",
    "output_target",
    "read_report",
    "same_file",
    "write_output",
    "write_report",
    "write_text_atomically",
]

#: The name that means standard output, as in most command-line tools.
STDOUT = "-"


class OutputFileError(RunlaneError, OSError):
    """An output file cannot be (or could not be) written. The message is one line naming the file."""


def _shown(path: Path | str) -> str:
    return repr(one_line(os.fspath(path), 500))


def _kind(mode: int) -> str | None:
    """What a non-regular file is, for the error line; ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _resolved(path: Path) -> Path:
    """``path`` with symbolic links followed (as far as they lead), so a link is written through."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def check_output_path(path: Path, what: str) -> Path:
    """Refuse, with one ``OutputFileError`` line, a target that cannot be written; return the real target.

    The returned path has symbolic links resolved; it is where the file will be
    written. Nothing is created or opened here.
    """
    given = Path(path)
    target = _resolved(given)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        # ENOTDIR: a component of the path is a file; ELOOP: a symlink cycle; EACCES...
        raise OutputFileError(
            f"cannot write {what} {_shown(given)}: {one_line(error.strerror or error)}"
        ) from None
    if mode is not None:
        kind = _kind(mode)
        if kind is not None:
            pointed = "" if target == given.absolute() else f" (it leads to {_shown(target)})"
            raise OutputFileError(f"cannot write {what} {_shown(given)}: it is {kind}{pointed}")
    parent = target.parent
    try:
        parent_mode = os.stat(parent).st_mode
    except FileNotFoundError:
        raise OutputFileError(
            f"cannot write {what} {_shown(given)}: directory {_shown(parent)} does not exist"
        ) from None
    except OSError as error:
        raise OutputFileError(
            f"cannot write {what} {_shown(given)}: {one_line(error.strerror or error)}"
        ) from None
    if not stat.S_ISDIR(parent_mode):
        raise OutputFileError(f"cannot write {what} {_shown(given)}: {_shown(parent)} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputFileError(
            f"cannot write {what} {_shown(given)}: directory {_shown(parent)} is not writable"
        )
    return target


@dataclass(frozen=True)
class OutputTarget:
    """Where one output goes: a file (``path``, symbolic links resolved) or standard output (``None``).

    ``given`` is what the user typed, for messages; ``what`` names the output ("report").
    """

    given: str
    what: str
    path: Path | None

    @property
    def is_stdout(self) -> bool:
        return self.path is None


def _is_standard_output(path: Path) -> bool:
    """Whether ``path`` is the same open file as this process's descriptor 1 (same device and inode)."""
    try:
        ours = os.fstat(1)
        theirs = os.stat(path)
    except (OSError, ValueError):
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


def output_target(path: Path | str, what: str) -> OutputTarget:
    """The checked target for ``path`` (``-`` or stdout's own file: standard output); refuses with one
    ``OutputFileError`` line what cannot be written, before anything runs. Nothing is created."""
    given = os.fspath(path)
    if given == STDOUT or _is_standard_output(Path(given)):
        return OutputTarget(given, what, None)
    return OutputTarget(given, what, check_output_path(Path(given), what))


def write_output(target: OutputTarget, text: str) -> None:
    """Write ``text`` to ``target``: atomically for a file, in one go for standard output.

    Raises ``OutputFileError`` (one line) when it cannot be written, e.g. a closed pipe.
    """
    if target.path is not None:
        write_text_atomically(target.path, text, target.what)
        return
    stream = sys.stdout
    try:
        stream.flush()  # anything already buffered goes first, not into the middle
        binary = getattr(stream, "buffer", None)
        if binary is not None:
            binary.write(text.encode("utf-8"))
            binary.flush()
        else:
            stream.write(text)
            stream.flush()
    except (OSError, ValueError) as error:
        reason = one_line(error.strerror if isinstance(error, OSError) and error.strerror else error)
        raise OutputFileError(f"cannot write {target.what} to standard output: {reason}") from None


def check_output_directory(path: Path, what: str) -> Path:
    """Refuse, with one ``OutputFileError`` line, a directory a run could not fill; return it absolute.

    The directory itself need not exist (it is created only when something is first saved into it),
    but whatever part of it does must be directories, and the deepest existing one writable: a
    file, device or unwritable directory in the way would otherwise only show after the run, as
    nothing saved. Nothing is created here.
    """
    given = Path(path)
    target = Path(os.path.abspath(given))
    existing = target
    while True:
        try:
            mode = os.stat(existing).st_mode
            break
        except (FileNotFoundError, NotADirectoryError):  # not there, or below a file: look further up
            if existing.parent == existing:
                raise OutputFileError(f"cannot use {what} {_shown(given)}: no part of it exists") from None
            existing = existing.parent
        except OSError as error:
            raise OutputFileError(
                f"cannot use {what} {_shown(given)}: {one_line(error.strerror or error)}"
            ) from None
    if not stat.S_ISDIR(mode):
        where = "it" if existing == target else _shown(existing)
        raise OutputFileError(f"cannot use {what} {_shown(given)}: {where} is {_kind(mode) or 'a file'}")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "it" if existing == target else f"directory {_shown(existing)}"
        raise OutputFileError(f"cannot use {what} {_shown(given)}: {where} is not writable")
    return target


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows (Linux: /proc)."""
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii", errors="replace") as status,
    ):
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    # Elsewhere the only way to read it is to set it; put it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomically(path: Path, text: str, what: str = "file") -> None:
    """Replace ``path`` with ``text`` (UTF-8) so readers see the old file or the new one, never a part.

    The target is checked again as in ``check_output_path`` (it may have
    changed during the run). The temporary file lives in the target's
    directory (a rename is atomic only within one file system) and is fsynced
    before the rename; the directory is fsynced after it where the platform
    allows. ``text`` must be encodable as UTF-8 (see ``safe_text``). Raises
    ``OutputFileError`` with one line; on any failure nothing but the
    temporary file was touched, and it is removed.
    """
    target = check_output_path(Path(path), what)
    data = text.encode("utf-8")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:
        raise OutputFileError(
            f"cannot write {what} {_shown(path)}: {one_line(error.strerror or describe_exception(error))}"
        ) from None
    try:
        try:
            os.fchmod(handle, 0o666 & ~current_umask())
            view = memoryview(data)
            while view:
                written = os.write(handle, view)
                view = view[written:]
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(temporary, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            reason = one_line(error.strerror or describe_exception(error))
            raise OutputFileError(f"cannot write {what} {_shown(path)}: {reason}") from error
        raise
    with contextlib.suppress(OSError, AttributeError):
        directory_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)


def invalidate(path: Path) -> bool:
    """Make sure whatever regular file ``path`` leads to can no longer be read as a report; true if so.

    Used when the ``running`` marker could not be written (a full disk, a read-only
    directory): the file an earlier run left there must not outlive this run's failure as
    its verdict. Emptying it in place needs no free space and no write access to its
    directory; where even that is refused it is removed. A path that is not there (or not a
    regular file) holds nothing to refuse.
    """
    target = _resolved(Path(path))
    try:
        if not stat.S_ISREG(os.stat(target).st_mode):
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.truncate(target, 0)
        return True
    with contextlib.suppress(OSError):
        os.unlink(target)
        return True
    return False


def same_file(first: Path | str, second: Path | str) -> bool:
    """Whether two paths name one file: the same path once links are followed, or the same inode."""
    a, b = _resolved(Path(first)), _resolved(Path(second))
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def write_report(path: Path, document: Mapping[str, Any]) -> None:
    """Validate ``document`` and write it atomically as indented JSON."""
    from .schema import validate_report

    validate_report(document)
    write_text_atomically(Path(path), json_text(document, indent=2) + "\n", "report")


def read_report(path: Path) -> Report:
    """Load and validate a report; every problem is a one-line ``ReportError``."""
    import json

    from .schema import ReportError, validate_report

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ReportError(f"cannot read report {str(path)!r}: {reason}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(f"report {str(path)!r} is not JSON: {error}") from None
    except RecursionError:
        raise ReportError(f"report {str(path)!r} is not a report: its JSON nests too deeply") from None
    try:
        validate_report(document)
    except ReportError as error:
        raise ReportError(f"report {str(path)!r}: {error}") from None
    return cast("Report", document)
