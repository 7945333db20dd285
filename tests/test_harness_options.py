"""The shared parsing of limit options that every bundled harness accepts."""

from __future__ import annotations

import pytest

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    StorageLimits,
    positive_int_option,
    storage_limits_from_options,
)
from runlane_conformance.harness import DriverOptionError


class CustomOptionError(ValueError):
    pass


def test_there_is_one_limit_option_per_limits_field() -> None:
    assert set(STORAGE_LIMIT_OPTIONS) == set(StorageLimits.__dataclass_fields__)


def test_no_limit_option_means_the_driver_keeps_its_defaults() -> None:
    assert storage_limits_from_options("demo", {"unrelated": "x"}) is None


def test_a_limit_option_replaces_only_its_own_default() -> None:
    limits = storage_limits_from_options("demo", {"max_point_reads": " 7 "})
    assert limits == StorageLimits(max_point_reads=7)


@pytest.mark.parametrize("text", ["0", "-3", "ten", "", "1.5"])
def test_a_limit_that_is_not_a_positive_integer_is_refused_naming_driver_and_option(text: str) -> None:
    with pytest.raises(DriverOptionError, match=r"^demo driver option max_query_results=.* not a positive"):
        storage_limits_from_options("demo", {"max_query_results": text})


def test_incoherent_limits_are_refused_naming_the_driver() -> None:
    options = {"max_record_bytes": "2048", "max_transaction_bytes": "1024"}
    with pytest.raises(DriverOptionError, match=r"^demo driver limits are incoherent"):
        storage_limits_from_options("demo", options)


def test_a_harness_can_raise_its_own_error_type() -> None:
    with pytest.raises(CustomOptionError):
        storage_limits_from_options("demo", {"max_point_reads": "no"}, error=CustomOptionError)
    with pytest.raises(CustomOptionError):
        positive_int_option("demo", "attempts", "0", error=CustomOptionError)
    assert positive_int_option("demo", "attempts", "12") == 12
