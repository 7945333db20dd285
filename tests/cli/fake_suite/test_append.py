import pytest
from checks import check, verdict


@check("append.contiguous-positions")
def test_contiguous_positions(driver, requirement_id):
    if not driver.profile.append:
        pytest.skip("profile: append not offered")
    verdict(driver, requirement_id)
