import pytest
from checks import check, verdict


@check("profile.advertised-profile-coherent")
def test_limits_coherent(driver, requirement_id):
    verdict(driver, requirement_id)


@check("profile.durable-survives-reconnect")
def test_durability(driver, requirement_id):
    if driver.profile.durability.value == "process":
        pytest.skip("profile: durable not offered (durability is process)")
    verdict(driver, requirement_id)


@check("profile.client-clock-follows-injected-clock")
def test_clock(driver, requirement_id):
    verdict(driver, requirement_id)


@check("profile.strong-index-visible-across-instances")
def test_index(driver, requirement_id):
    verdict(driver, requirement_id)
