"""``runlane-certify check-history FILE``: a saved history is judged again without any driver."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.history import History, save
from tests.history.histories import create, read, replace, txn

cli = CliRunner()


def _write_skew() -> History:
    return History(
        (
            txn("t0", create("x", "x0"), create("y", "y0")),
            txn("t1", read("x", "1", "x0"), read("y", "2", "y0"), replace("x", "1", "x0", "x1")),
            txn("t2", read("x", "1", "x0"), read("y", "2", "y0"), replace("y", "2", "y0", "y2")),
        )
    )


def test_a_history_with_an_anomaly_exits_1_and_prints_the_witness(tmp_path: Path) -> None:
    path = save(_write_skew(), tmp_path / "skew.json")
    result = cli.invoke(app, ["check-history", str(path)])
    assert result.exit_code == 1, result.output
    assert "G2-item" in result.output
    assert "t1 -rw(y)-> t2" in result.output and "t2 -rw(x)-> t1" in result.output


def test_a_clean_history_exits_0(tmp_path: Path) -> None:
    path = save(History((txn("t0", create("x", "x0")),)), tmp_path / "clean.json")
    result = cli.invoke(app, ["check-history", str(path)])
    assert result.exit_code == 0, result.output
    assert "no anomaly found" in result.output


def test_a_file_that_is_not_a_history_exits_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"format": "runlane-history", "version": 99}')
    result = cli.invoke(app, ["check-history", str(junk)])
    assert result.exit_code == 2
    assert "version 99" in result.output
