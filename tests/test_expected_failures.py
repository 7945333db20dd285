"""Known-failure declarations: ``ID = reason`` parses strictly, unknown IDs name close matches."""

from __future__ import annotations

import dataclasses

import pytest

from runlane_conformance import ExpectedFailure, ExpectedFailureError, RunlaneError, parse_expected_failure
from runlane_conformance.expected_failures import parse_expected_failures

KNOWN = {
    "conflicts.lost-update",
    "conflicts.write-skew",
    "cursors.partitions-isolated",
    "limits.query-results-boundary",
}


def test_id_and_reason_are_split_at_the_first_equals_sign_and_trimmed() -> None:
    declared = parse_expected_failure("  conflicts.lost-update =  SERIALIZABLE not yet = on ", KNOWN)
    assert declared == ExpectedFailure("conflicts.lost-update", "SERIALIZABLE not yet = on")


def test_the_option_form_without_spaces_parses_the_same() -> None:
    assert parse_expected_failure("conflicts.lost-update=not yet", KNOWN) == ExpectedFailure(
        "conflicts.lost-update", "not yet"
    )


def test_an_expected_failure_is_a_frozen_value_that_prints_as_its_declaration() -> None:
    declared = ExpectedFailure("conflicts.lost-update", "not yet")
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.reason = "other"  # type: ignore[misc]
    assert str(declared) == "conflicts.lost-update = not yet"


@pytest.mark.parametrize("text", ["conflicts.lost-update", " = reason", ""])
def test_a_declaration_without_id_or_equals_sign_is_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(ExpectedFailureError, match=r"not of the form ID=REASON"):
        parse_expected_failure(text, KNOWN)


@pytest.mark.parametrize("text", ["conflicts.lost-update=", "conflicts.lost-update =   "])
def test_a_declaration_without_a_reason_is_refused(text: str) -> None:
    with pytest.raises(ExpectedFailureError, match=r"has no reason; write conflicts.lost-update=REASON"):
        parse_expected_failure(text, KNOWN)


def test_a_misspelt_id_is_a_usage_error_naming_the_close_match() -> None:
    with pytest.raises(ExpectedFailureError) as raised:
        parse_expected_failure("conflicts.lost-updates=x", KNOWN)
    message = str(raised.value)
    assert "unknown requirement 'conflicts.lost-updates'" in message
    assert "did you mean conflicts.lost-update" in message
    assert "\n" not in message


def test_an_area_name_is_refused_with_one_of_its_requirements_as_example() -> None:
    with pytest.raises(
        ExpectedFailureError,
        match=r"'cursors' is an area, name one of its requirements, e\.g\. cursors\.partitions-isolated",
    ):
        parse_expected_failure("cursors=x", KNOWN)


def test_an_id_like_nothing_known_points_at_the_requirements_command() -> None:
    with pytest.raises(
        ExpectedFailureError, match=r"`runlane-certify requirements` lists every requirement ID"
    ):
        parse_expected_failure("zzz.qqq=x", KNOWN)


def test_ids_are_checked_against_the_real_catalog_by_default() -> None:
    assert parse_expected_failure("conflicts.lost-update=x").requirement == "conflicts.lost-update"
    with pytest.raises(ExpectedFailureError, match=r"did you mean conflicts\.lost-update"):
        parse_expected_failure("conflict.lost-update=x")


def test_the_error_belongs_to_the_toolkit_family_and_is_a_value_error() -> None:
    assert issubclass(ExpectedFailureError, RunlaneError)
    assert issubclass(ExpectedFailureError, ValueError)


def test_many_lines_skip_blanks_and_comments_and_keep_their_order() -> None:
    parsed = parse_expected_failures(
        ["", "# migrating", "conflicts.write-skew = b", "  ", "conflicts.lost-update = a"], KNOWN
    )
    assert parsed == (
        ExpectedFailure("conflicts.write-skew", "b"),
        ExpectedFailure("conflicts.lost-update", "a"),
    )


def test_one_requirement_declared_twice_is_refused() -> None:
    with pytest.raises(ExpectedFailureError, match="declared as an expected failure twice"):
        parse_expected_failures(["conflicts.lost-update = a", "conflicts.lost-update = b"], KNOWN)


def test_no_lines_declare_nothing() -> None:
    assert parse_expected_failures([], KNOWN) == ()
    assert parse_expected_failures(["", "# only a comment"]) == ()
