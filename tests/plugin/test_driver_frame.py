"""driver_frame: the innermost frame of the driver's own code, by module name, through causes."""

from __future__ import annotations

import types

import pytest

from runlane_conformance.fixtures.driver_frame import (
    DriverFrame,
    driver_module_roots,
    innermost_driver_frame,
    is_driver_module,
)


@pytest.mark.parametrize(
    ("factory_module", "roots"),
    [
        ("runlane_tiny_driver.harness", ("runlane_tiny_driver",)),
        ("typo_driver", ("typo_driver",)),
        ("tests.mutants.m_conflicts", ("tests",)),
        ("runlane_conformance.local.harness", ("runlane_conformance.local",)),
        ("runlane_conformance.protocol.process", ()),
        ("", ()),
    ],
)
def test_a_driver_is_its_whole_top_level_package_and_no_other_toolkit_module(
    factory_module: str, roots: tuple[str, ...]
) -> None:
    assert driver_module_roots(factory_module) == roots


def test_membership_is_by_whole_module_name_components() -> None:
    assert is_driver_module("mydriver", ["mydriver"])
    assert is_driver_module("mydriver.tx.codec", ["mydriver"])
    assert not is_driver_module("mydriver_extras", ["mydriver"])
    assert not is_driver_module("runlane_conformance.suites.test_cursors", ["mydriver"])


def _run_in_module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"/src/{name.replace('.', '/')}.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


DRIVER_SOURCE = """
def outer(keys):
    return inner(keys)

def inner(keys):
    return len(keys) + "0"
"""


def test_the_innermost_driver_frame_is_named_even_below_other_code() -> None:
    driver = _run_in_module("mydriver.tx", DRIVER_SOURCE)
    library = _run_in_module("otherlib", "def call(f, x):\n    return f(x)\n")
    with pytest.raises(TypeError) as raised:
        library.call(driver.outer, [1])
    frame = innermost_driver_frame(raised.value, ["mydriver"])
    assert frame == DriverFrame(path="/src/mydriver/tx.py", line=6, function="inner", module="mydriver.tx")
    assert frame.describe("/src") == "mydriver/tx.py:6 in inner"
    assert frame.describe("/elsewhere") == "/src/mydriver/tx.py:6 in inner"


def test_an_error_without_driver_frames_names_none() -> None:
    with pytest.raises(AssertionError) as raised:
        raise AssertionError("the suite saw a wrong answer")
    assert innermost_driver_frame(raised.value, ["mydriver"]) is None
    assert innermost_driver_frame(raised.value, []) is None


def test_a_driver_error_the_suite_wrapped_is_found_through_its_cause() -> None:
    driver = _run_in_module("mydriver", DRIVER_SOURCE)
    with pytest.raises(AssertionError) as raised:
        try:
            driver.outer([1])
        except TypeError as error:
            raise AssertionError("get() raised") from error
    frame = innermost_driver_frame(raised.value, ["mydriver"])
    assert frame is not None and (frame.function, frame.line) == ("inner", 6)
