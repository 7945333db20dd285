"""Help-screen touch-ups typer does not offer as settings.

Recent typer releases print a value type beside every option, so plain flags such as ``--json`` or
``--help`` read ``<bool>`` as if they took a value. ``hide_flag_types`` makes a flag's type column
empty, which is what older typer releases (and click) print; options that take a value keep
theirs. It is applied once, when the CLI module is imported, and does nothing on a typer release
whose options have no such type column.
"""

from __future__ import annotations

from typing import Any

__all__ = ["hide_flag_types"]


def hide_flag_types() -> None:
    """Show no ``<bool>`` type for options that are flags (idempotent; harmless on older typer)."""
    try:
        from typer.core import TyperOption
    except ImportError:  # pragma: no cover - every supported typer has it
        return
    original = getattr(TyperOption, "display_type_rich", None)
    if original is None or getattr(original, "_runlane_flags_hidden", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        result: str | None = original(self, ctx)
        return result

    display_type_rich._runlane_flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
