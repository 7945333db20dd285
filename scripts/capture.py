"""Terminal captures for the docs: what a run, a report, a failure and a badge look like.

Runs the real ``runlane-certify`` (the one installed next to this Python) in a child process,
exactly as a user would, with colour forced and the live display reduced to its final frame, and
turns what it printed into an SVG "screenshot" with rich. Because the pictures are made from the
CLI's own output, regenerating them after the CLI changes keeps ``docs/walkthrough.md`` current:

    python scripts/capture.py                 # every capture, into docs/images/
    python scripts/capture.py failure badge   # only some of them

The failure capture certifies one of the toolkit's own broken drivers (``tests/mutants``), so run
this from the repository root. Nothing is written unless every capture it was asked for succeeded
with the exit code that capture expects.
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"

#: The broken driver the failure capture certifies: replace/delete never check the version they read.
BROKEN_DRIVER = "tests.mutants.m_conflicts:last_writer_wins"


@dataclass(frozen=True)
class Capture:
    """One picture: the CLI arguments, the terminal width and the exit code the command must give."""

    name: str
    argv: tuple[str, ...]
    expect_exit: int
    width: int = 100
    keep: tuple[str, ...] = ()  # files the command writes that go into the docs beside the picture


#: In order: the badge is drawn from the report the first run writes. Every command runs in one
#: scratch directory, so the paths it prints are the short ones a user would type.
CAPTURES: tuple[Capture, ...] = (
    Capture("run", ("run", "--driver", "local", "--seed", "1", "--report", "runlane-report.json"), 0),
    Capture("report", ("report", "--driver", "local", "--seed", "1"), 0, width=80),
    Capture(
        "failure", ("run", "--driver", BROKEN_DRIVER, "--area", "conflicts", "--seed", "7"), 1, width=110
    ),
    Capture(
        "badge",
        ("badge", "runlane-report.json", "--svg", "badge.svg", "--endpoint", "badge.json"),
        0,
        keep=("badge.svg",),
    ),
)


def cli_program() -> str:
    """The ``runlane-certify`` script of the environment this Python belongs to."""
    script = Path(sys.executable).parent / "runlane-certify"
    if script.exists():
        return str(script)
    found = shutil.which("runlane-certify")
    if found is None:
        raise SystemExit(f"capture: runlane-certify is not installed (looked next to {sys.executable})")
    return found


def run_cli(argv: Sequence[str], width: int, cwd: Path) -> tuple[int, str]:
    """Run the CLI as a user would, in ``cwd``, and return its exit code and everything it printed."""
    environment = dict(os.environ)
    environment.update(
        FORCE_COLOR="1",  # colour, as on a terminal...
        TTY_INTERACTIVE="0",  # ...but the live display prints only its final frame
        COLUMNS=str(width),
        LINES="50",
        # the broken driver of the failure capture lives in this repository's tests/
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    environment.pop("NO_COLOR", None)
    done = subprocess.run(
        [cli_program(), *argv],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    return done.returncode, done.stdout


def render_svg(command_line: str, output: str, width: int, title: str) -> str:
    """An SVG of a terminal that shows ``$ command_line`` followed by ``output`` (ANSI colours kept)."""
    console = Console(
        record=True, width=width, force_terminal=True, color_system="truecolor", file=io.StringIO()
    )
    console.print(Text.assemble(("$ ", "bold green"), (command_line, "bold")), soft_wrap=True)
    console.print(Text.from_ansi(output.rstrip("\n")), soft_wrap=False, overflow="fold")
    return console.export_svg(title=title)


def make(
    capture: Capture,
    scratch: Path,
    *,
    run: Callable[[Sequence[str], int, Path], tuple[int, str]] = run_cli,
) -> str:
    """Run one capture in ``scratch`` and return its SVG; ``RuntimeError`` on an unexpected exit code."""
    code, output = run(capture.argv, capture.width, scratch)
    if code != capture.expect_exit:
        raise RuntimeError(f"{capture.name}: exit {code}, expected {capture.expect_exit}:\n{output[-2000:]}")
    command_line = shlex.join(["runlane-certify", *capture.argv])
    return render_svg(command_line, output, capture.width, f"runlane-certify {capture.name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "names", nargs="*", help=f"captures to make (default all: {', '.join(c.name for c in CAPTURES)})"
    )
    parser.add_argument(
        "--out", type=Path, default=IMAGES, help="directory for the SVG files (default docs/images)"
    )
    args = parser.parse_args(argv)
    wanted = args.names or [capture.name for capture in CAPTURES]
    unknown = sorted(set(wanted) - {capture.name for capture in CAPTURES})
    if unknown:
        parser.error(f"unknown capture {unknown[0]!r}")
    if "badge" in wanted and "run" not in wanted:
        wanted.insert(0, "run")  # the badge is drawn from the run's report
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="runlane-capture-") as directory:
        scratch = Path(directory)
        for capture in CAPTURES:
            if capture.name in wanted:
                print(f"capture: {capture.name} ...", file=sys.stderr)
                written[f"terminal-{capture.name}.svg"] = make(capture, scratch)
                for name in capture.keep:
                    written[name] = (scratch / name).read_text(encoding="utf-8")
        # Every capture succeeded: only now replace the files in the docs.
        for name, text in written.items():
            (out / name).write_text(text, encoding="utf-8")
    print(f"capture: wrote {', '.join(sorted(written))} to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
