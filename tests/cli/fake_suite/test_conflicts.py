from checks import check, verdict
from hypothesis import given
from hypothesis import strategies as st


@check("conflicts.lost-update")
def test_lost_update_scenario(driver, requirement_id):
    verdict(driver, requirement_id)


@check("conflicts.lost-update")
@given(st.integers(min_value=0, max_value=10))
def test_lost_update_property(driver, requirement_id, n):
    assert not (requirement_id in driver.broken and n >= 3), "lost update with at least 3 writers"


@check("conflicts.write-skew-advice")
def test_should_level_check(driver, requirement_id):
    verdict(driver, requirement_id)
