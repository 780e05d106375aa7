"""The fake Fetch's simulator side without ROS: a cancelled trajectory holds the joints where they are, and the head
camera renders a copy of the state, so the simulation can step on while a frame is drawn."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from emmoe_core.robot import fetch

from habitat_bridge.fetch.fake_fetch import FakeFetchConfig, FakeFetchCore
from habitat_bridge.scene_spec import SceneSpec

# The arm swung out from its tucked pose: about 1.3 rad on the shoulder pan.
SWUNG_OUT = (0.0, 0.2, -0.2, 1.2, 0.0, 1.2, 0.0)


@pytest.fixture(scope="module")
def core(compact_spec: SceneSpec) -> Iterator[FakeFetchCore]:
    """A fake Fetch's core on a backend of its own (it stiffens the simulated arm's servos)."""
    from habitat_bridge.backends.mujoco_backend import MujocoBackend

    backend = MujocoBackend()
    backend.reset(compact_spec)
    yield FakeFetchCore(backend, FakeFetchConfig())
    backend.close()


def run(core: FakeFetchCore, seconds: float) -> None:
    for _ in range(round(seconds / core.config.tick)):
        core.tick()


def arm(core: FakeFetchCore) -> tuple[np.ndarray, np.ndarray]:
    state = core.state()
    index = [state.joint_names.index(joint) for joint in fetch.ARM_JOINTS]
    return (np.array([state.joint_positions[i] for i in index]), np.array([state.joint_velocities[i] for i in index]))


def test_a_cancelled_motion_holds_the_joints_where_they_are(core: FakeFetchCore) -> None:
    start, _ = arm(core)
    core.follow(fetch.ARM_JOINTS, [3.0], [SWUNG_OUT])
    run(core, 1.0)
    moving_at, speeds = arm(core)
    assert np.abs(speeds).max() > 0.2 and not core.motion_done("arm")
    core.hold("arm")
    assert core.motion_done("arm")
    run(core, 0.06)
    held_at, speeds = arm(core)
    # Braked within 60 ms, a hair past where the cancel found the joints (not pulled back to an older target).
    assert np.abs(speeds).max() < 0.05, speeds
    assert np.abs(held_at - moving_at).max() < 0.02, held_at - moving_at
    run(core, 0.5)
    assert np.abs(arm(core)[0] - held_at).max() < 0.005
    assert np.abs(held_at - start).max() > 0.2


def test_the_camera_draws_a_copy_of_the_state_while_the_simulation_steps_on(core: FakeFetchCore) -> None:
    live = core.backend.observe(("front",), depth=True, segmentation=True)
    copy = core.copy_state()
    from_copy = core.head_camera(copy)
    assert np.array_equal(from_copy[0], live.rgb["front"]) and np.array_equal(from_copy[1], live.depth["front"])
    core.command_base(0.0, 1.0)
    run(core, 1.0)
    again = core.head_camera(copy)
    assert np.array_equal(again[0], from_copy[0]), "the copy moved with the simulation"
    assert not np.array_equal(core.head_camera(core.copy_state())[0], from_copy[0]), "a new copy shows the turn"


def test_with_a_detector_the_head_camera_masks_are_its_regions_and_no_segmentation_is_rendered(core, tmp_path,
                                                                                           monkeypatch):
    pytest.importorskip("torch")
    from emmoe_core.perception.learned import LearnedDetector, ViewLabels
    from emmoe_core.perception.network import NetworkConfig, SegmentationNet, save_network

    classes = ("background", "013_apple", "kitchen_counter")
    save_network(SegmentationNet(NetworkConfig(classes, ("013_apple",), widths=(4, 4, 4, 4), decoder_width=4)),
                 tmp_path)
    detector = LearnedDetector(tmp_path)
    labels = np.zeros((256, 256), np.uint8)
    labels[100:120, 100:120], labels[200:, :] = 1, 2
    monkeypatch.setattr(detector, "label_views", lambda observation: {"front": ViewLabels(labels, np.ones(labels.shape))})
    asked = []
    real_observe_state = core.backend.observe_state
    monkeypatch.setattr(core.backend, "observe_state",
                        lambda *args, **kwargs: asked.append(kwargs) or real_observe_state(*args, **kwargs))
    monkeypatch.setattr(core, "detector", detector)
    rgb, depth, camera, ids, names, categories = core.head_camera(core.copy_state())
    assert asked == [{"depth": True, "segmentation": False}]
    assert categories == ("013_apple", "kitchen_counter") and names == ("013_apple_0", "kitchen_counter_1")
    apple = ids[100:120, 100:120]  # what of it lies far from its median depth is dropped (small objects only)
    assert set(np.unique(apple).tolist()) <= {-1, 0} and (apple == 0).any()
    assert (ids[200:, :] == 1).all() and (ids[:100] == -1).all()
