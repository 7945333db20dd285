"""Print the README's set-up commands, one per line, exactly as a new user would copy them.

The README opens with one fenced ``bash`` block holding exactly two commands: the first installs the
toolkit and certifies the bundled reference driver, the second installs the development tools and
runs the toolkit's tests. CI runs what this prints, in a fresh virtual environment, so the commands a
user reads are the commands that are tested (tests/test_readme.py checks the block's shape).

    python scripts/readme_commands.py          # both commands
    python scripts/readme_commands.py 2        # the second only
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def setup_commands(text: str) -> list[str]:
    """The commands of the README's first fenced bash block (blank lines and comments left out)."""
    match = re.search(r"^```bash\n(.*?)^```", text, re.S | re.M)
    if match is None:
        raise ValueError("README.md has no fenced bash block")
    return [line.strip() for line in match.group(1).splitlines() if line.strip() and not line.startswith("#")]


def main(argv: list[str]) -> int:
    commands = setup_commands(README.read_text(encoding="utf-8"))
    if argv:
        print(commands[int(argv[0]) - 1])
    else:
        print("\n".join(commands))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
