from checks import check, verdict
from hypothesis import given
from hypothesis import strategies as st
from tests.cli.fake_driver import DRIVER_FRAME, REPRODUCE, SHRINK_NOTE


@check("conflicts.lost-update")
def test_lost_update_scenario(driver, requirement_id, record_property):
    history = int(driver.options.get("history", "0"))
    if history and requirement_id in driver.broken:
        record_property("runlane_driver_frame", DRIVER_FRAME)
        record_property("runlane_reproduce", REPRODUCE)
        record_property("runlane_shrink_note", SHRINK_NOTE)
        steps = "\n".join(f"  step {i}: T{i % 2 + 1} wrote counter={i}" for i in range(history))
        raise AssertionError(
            f"no serial order of T1 and T2 produces this outcome\n  final state: counter=1\n"
            f"  T1 returned: 1\n  T2 returned: 1\n  history:\n{steps}"
        )
    verdict(driver, requirement_id)


@check("conflicts.lost-update")
@given(st.integers(min_value=0, max_value=10))
def test_lost_update_property(driver, requirement_id, request, n):
    failing = requirement_id in driver.broken and n >= 3
    if failing and driver.options.get("shrink") == "true":
        request.config.hook.pytest_runlane_shrinking(item=request.node)
    assert not failing, f"lost update with at least 3 writers (this example: n={n})"


@check("conflicts.write-skew-advice")
def test_should_level_check(driver, requirement_id):
    verdict(driver, requirement_id)
