"""Limits as a property: the reference driver certifies under any coherent limits and profile drawn.

Every check sizes its work from the limits the driver advertises (or is gated
by the plan, naming the limit). A check that ignores a limit refuses a correct
driver the day some driver advertises less; this property finds it the day the
check is written. Hypothesis draws coherent limit sets, down to core's floor of
three point reads, three records and pages of one (record and transaction byte
limits included, keeping the contract's rule that a transaction's byte limit is
at least one record's and is reachable within its record limit), together with
profile choices the reference driver can honestly take: eventual indexes
(``index_lag``), a store-owned clock, exclusive candidates on or off. Each draw
certifies the driver at the quick profile through ``runlane-certify run``, the
path a driver author takes, and must reach the level its capabilities give.

The search is derandomized and small (a few draws a run, each a full quick
certification), so CI is reproducible and bounded; every draw prints the one
command that reproduces it (run it from the repository root).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from runlane_conformance.contract.values import StorageLimits

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "tests.profiles.drawn:harness"

#: Each draw is one quick certification (a few seconds of CPU); the hang guard is generous.
pytestmark = pytest.mark.timeout(1800)
#: How many configurations one run certifies (the same ones every run: the search is derandomized).
#: ``RUNLANE_LIMIT_DRAWS=50 pytest tests/profiles/test_random_limits.py`` searches further by hand.
DRAWS = int(os.environ.get("RUNLANE_LIMIT_DRAWS", "3"))


@st.composite
def coherent_limits(draw: st.DrawFn) -> dict[str, str]:
    """A coherent limit set: each count from core's floor to the contract's default, small values likely.

    Byte limits keep the contract's coherence rule: max_record_bytes <= max_transaction_bytes <=
    max_transaction_records * max_record_bytes.
    """
    default = StorageLimits()
    reads = draw(st.integers(3, 8) | st.just(default.max_point_reads))
    page = draw(st.integers(1, 6) | st.just(default.max_query_results))
    records = draw(st.integers(3, 8) | st.just(default.max_transaction_records))
    record_bytes = draw(st.sampled_from([default.max_record_bytes, 16_384, 2_000]))
    most = min(records * record_bytes, default.max_transaction_bytes)
    transaction_bytes = draw(st.sampled_from(sorted({record_bytes, (record_bytes + most) // 2, most})))
    return {
        "max_point_reads": str(reads),
        "max_query_results": str(page),
        "max_transaction_records": str(records),
        "max_record_bytes": str(record_bytes),
        "max_transaction_bytes": str(transaction_bytes),
    }


@st.composite
def drawn_profiles(draw: st.DrawFn) -> dict[str, str]:
    """Coherent limits plus the profile choices the reference driver can honestly take."""
    options = draw(coherent_limits())
    options["index_lag"] = str(draw(st.sampled_from([0, 2])))
    options["clock"] = draw(st.sampled_from(["client", "server_sampled", "transaction_authoritative"]))
    options["exclusive"] = draw(st.sampled_from(["on", "off"]))
    return options


def reproduce_command(options: dict[str, str]) -> list[str]:
    """The ``runlane-certify run`` command that certifies the drawn configuration (from the repo root)."""
    command = ["runlane-certify", "run", "--driver", DRIVER]
    for name, value in options.items():
        command += ["--option", f"{name}={value}"]
    return [*command, "--profile", "quick", "--seed", "0"]


def expected_level(options: dict[str, str]) -> str:
    """The level the drawn driver's honest capabilities give: the reference driver's, without
    ``exclusive`` when it is switched off."""
    return "core+append" + ("+exclusive" if options["exclusive"] == "on" else "") + "+faults"


def test_the_drawn_configurations_command_is_what_a_user_types() -> None:
    options = {"max_point_reads": "3", "clock": "client", "exclusive": "off"}
    assert shlex.join(reproduce_command(options)) == (
        "runlane-certify run --driver tests.profiles.drawn:harness --option max_point_reads=3 "
        "--option clock=client --option exclusive=off --profile quick --seed 0"
    )
    assert expected_level(options) == "core+append+faults"


def test_every_drawn_profile_is_coherent() -> None:
    """The strategy draws only what a driver may advertise (StorageLimits refuses anything else)."""

    @settings(max_examples=200, database=None, derandomize=True)
    @given(coherent_limits())
    def coherent(options: dict[str, str]) -> None:
        StorageLimits(**{name: int(value) for name, value in options.items()})

    coherent()


@settings(
    max_examples=DRAWS,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(options=drawn_profiles())
def test_the_reference_driver_certifies_under_drawn_coherent_limits_and_profiles(
    options: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    command = reproduce_command(options)
    shown = shlex.join(command)
    note(f"reproduce (from the repository root): {shown}")
    print(f"drawn configuration: {shown}", file=sys.stderr)
    report = tmp_path_factory.mktemp("drawn") / "report.json"
    completed = subprocess.run(
        [*command, "--report", str(report), "--examples", "none", "--tb", "short"],
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert report.exists(), f"{shown} wrote no report (exit {completed.returncode}):\n{completed.stderr}"
    data = json.loads(report.read_text())
    refused = {
        req["id"]: req["reason"]
        for req in data["requirements"]
        if req["outcome"] not in ("passed", "gated")
    }
    assert not refused, f"a correct driver was refused; reproduce with: {shown}\n{refused}"
    for req in data["requirements"]:
        if req["outcome"] == "gated":
            assert (req["reason"] or "").startswith("profile:"), (req["id"], req["reason"], shown)
    certification = data["certification"]
    assert completed.returncode == 0 and certification["certified"], (
        f"{shown} did not certify (exit {completed.returncode}): {certification}\n{completed.stdout[-3000:]}"
    )
    assert certification["level"] == expected_level(options), (
        f"{shown} certified at {certification['level']}, not at the level its capabilities give "
        f"({expected_level(options)})"
    )
