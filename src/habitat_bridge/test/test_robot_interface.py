"""Every backend implements the robot/skill interface of emmoe_core.robot (Robot and PrivilegedScene) method by
method, with the interface's parameter names."""

from __future__ import annotations

import inspect

import pytest
from emmoe_core.robot.interface import PrivilegedScene, Robot

from habitat_bridge.backends.habitat_backend import HabitatBackend
from habitat_bridge.backends.mujoco_backend import MujocoBackend


def interface_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(protocol).items()
            if callable(member) and not name.startswith("_")}


@pytest.mark.parametrize("backend", [MujocoBackend, HabitatBackend])
@pytest.mark.parametrize("protocol", [Robot, PrivilegedScene])
def test_backends_implement_the_robot_interface(backend: type, protocol: type) -> None:
    methods = interface_methods(protocol)
    assert methods
    for name, signature in methods.items():
        implemented = getattr(backend, name, None)
        assert callable(implemented), f"{backend.__name__} lacks {protocol.__name__}.{name}"
        assert list(inspect.signature(implemented).parameters) == list(signature.parameters), name
