import pytest
from checks import check, verdict


@check("exclusive_selection.disjoint-selections")
def test_disjoint(driver, requirement_id):
    if not driver.profile.exclusive_candidates:
        pytest.skip("profile: exclusive_candidates not offered")
    verdict(driver, requirement_id)
