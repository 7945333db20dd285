"""MkDocs hooks: the API page lists every public name of the facade, or the build fails.

``docs/api.md`` groups the names of ``runlane_conformance.__all__`` by topic. Two hooks keep it
complete without anyone having to remember:

* before rendering, any name of ``__all__`` that no group mentions is appended under "Other
  names", so a name exported by a later change still appears on the page (and is easy to spot
  and move into its group);
* after rendering, the HTML must contain a heading anchor for every name of ``__all__``; a name
  mkdocstrings could not render fails the build, so CI cannot publish an API page with gaps.

``tests/test_docs.py`` imports ``missing_names`` and ``names_placed`` to check the same logic
without building the site.
"""

from __future__ import annotations

import re
from typing import Any

API_PAGE = "api.md"
_DIRECTIVE = re.compile(r"^::: runlane_conformance\.(\w+)\s*$", re.MULTILINE)


def public_names() -> list[str]:
    import runlane_conformance

    return list(runlane_conformance.__all__)


def names_placed(markdown: str) -> list[str]:
    """The facade names that ``markdown`` documents with a ``::: runlane_conformance.NAME`` block."""
    return _DIRECTIVE.findall(markdown)


def missing_names(markdown: str, names: list[str]) -> list[str]:
    """The names of ``names`` that ``markdown`` does not document, in ``names`` order."""
    placed = set(names_placed(markdown))
    return [name for name in names if name not in placed]


def with_every_name(markdown: str, names: list[str]) -> str:
    """``markdown`` with a block appended for each name it does not document yet."""
    missing = missing_names(markdown, names)
    if not missing:
        return markdown
    blocks = "\n\n".join(f"::: runlane_conformance.{name}" for name in missing)
    return (
        f"{markdown.rstrip()}\n\n## Other names\n\n"
        "Exported from the facade but not yet placed in a group above.\n\n"
        f"{blocks}\n"
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != API_PAGE:
        return markdown
    return with_every_name(markdown, public_names())


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != API_PAGE:
        return html
    from mkdocs.exceptions import PluginError

    absent = [name for name in public_names() if f'id="runlane_conformance.{name}"' not in html]
    if absent:
        raise PluginError(f"the API page has no entry for {', '.join(absent)} (runlane_conformance.__all__)")
    return html
