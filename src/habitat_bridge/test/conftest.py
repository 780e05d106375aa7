"""Shared fixtures of the habitat_bridge tests: small scenes and one MuJoCo backend per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from habitat_bridge import apartment
from habitat_bridge.scene_spec import SceneSpec

# One scene.json as the EMMOE release stores it (a Habitat RearrangeDataset episode), from the EMMOE release,
# Apache-2.0 (hab-mobile-manipulation/mobile_manipulation/test_scene.json).
OFFICIAL_SCENE = Path(__file__).resolve().parent / "data" / "official_scene_example.json"


@pytest.fixture(scope="session")
def compact_spec() -> SceneSpec:
    """The small kitchen: counter with two drawers, fridge, brown table, apple (in a drawer), bowl and soup can
    (fridge shelf), cracker box (counter top)."""
    return apartment.compact_room(0)


@pytest.fixture(scope="session")
def apartment_spec() -> SceneSpec:
    """The full apartment of seed 0."""
    return apartment.generate_apartment(0)


@pytest.fixture(scope="module")
def backend(compact_spec: SceneSpec) -> Iterator[object]:
    """A MuJoCo backend shared by a test module (tests reset it to the compact room when they need a clean state)."""
    from habitat_bridge.backends.mujoco_backend import MujocoBackend

    simulator = MujocoBackend()
    simulator.reset(compact_spec)
    yield simulator
    simulator.close()


@pytest.fixture
def official_scene_path() -> Path:
    """The official EMMOE scene.json example."""
    return OFFICIAL_SCENE
