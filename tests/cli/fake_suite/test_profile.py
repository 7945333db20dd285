import pytest
from checks import check, verdict


@check("profile.limits-coherent")
def test_limits_coherent(driver, requirement_id):
    verdict(driver, requirement_id)


@check("profile.durability-truthful")
def test_durability(driver, requirement_id):
    if driver.profile.durability.value == "process":
        pytest.skip("profile: durability is process, nothing to reopen")
    verdict(driver, requirement_id)


@check("profile.client-clock-honoured")
def test_clock(driver, requirement_id):
    verdict(driver, requirement_id)


@check("profile.strong-index-consistency")
def test_index(driver, requirement_id):
    verdict(driver, requirement_id)
