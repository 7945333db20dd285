"""``runlane-certify schema``: print the report's JSON Schema (the data file ``report/schema.json``)."""

from __future__ import annotations

import json

import typer

__all__ = ["schema"]


def schema() -> None:
    """Print the JSON Schema (draft 2020-12) every report is validated against."""
    from ..report.schema import REPORT_SCHEMA

    typer.echo(json.dumps(REPORT_SCHEMA, indent=2))
