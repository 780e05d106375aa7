"""The bridge's tick timing, service handlers and message conversions, without a ROS graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from emmoe_core.convert import image_to_array
from emmoe_core.robot.state import BackendError
from emmoe_interfaces.srv import GetObservation, QueryScene, ResetEpisode

from habitat_bridge import bridge_core
from habitat_bridge.backends.mujoco_backend import MujocoBackend
from habitat_bridge.scene_spec import SceneSpec, save_scene_spec


def reset(simulator: MujocoBackend, **fields: object) -> ResetEpisode.Response:
    return bridge_core.handle_reset(simulator, ResetEpisode.Request(**fields), ResetEpisode.Response())


def test_reset_accepts_spec_text_spec_files_official_files_and_seeds(backend: MujocoBackend, compact_spec: SceneSpec,
                                                                    tmp_path: Path,
                                                                    official_scene_path: Path) -> None:
    response = reset(backend, scene_json=json.dumps(compact_spec.to_dict()))
    assert (response.success, response.error_code, response.episode_id) == (True, 0, "compact_0")
    path = save_scene_spec(compact_spec, tmp_path / "scene.yaml")
    assert reset(backend, scene_path=str(path)).success
    official = reset(backend, scene_path=str(official_scene_path))
    assert (official.success, official.episode_id) == (True, "official_6386")
    assert len(backend.spec.objects) == 30
    generated = bridge_core.handle_reset(backend, ResetEpisode.Request(seed=3), ResetEpisode.Response(), None)
    assert (generated.success, generated.episode_id) == (True, "apartment_3")
    assert reset(backend, scene_json=json.dumps(compact_spec.to_dict())).success


@pytest.mark.parametrize(("fields", "code", "message"), [
    ({"scene_json": "{\"schema\": \"homiebot-scene\"}"}, ResetEpisode.Response.INVALID_SPEC,
     "scene_json: version: missing"),
    ({"scene_json": "{broken"}, ResetEpisode.Response.INVALID_SPEC, "scene_json: invalid JSON"),
    ({"scene_path": "/no/such/scene.json"}, ResetEpisode.Response.NOT_FOUND, "/no/such/scene.json"),
])
def test_bad_resets_get_error_codes_and_keep_the_episode(backend: MujocoBackend, compact_spec: SceneSpec,
                                                         fields: dict, code: int, message: str) -> None:
    reset(backend, scene_json=json.dumps(compact_spec.to_dict()))
    response = reset(backend, **fields)
    assert (response.success, response.error_code) == (False, code)
    assert message in response.error_msg
    assert backend.episode_id == "compact_0"


def test_observation_has_four_views_depth_visible_names_and_inventory(backend: MujocoBackend,
                                                                      compact_spec: SceneSpec) -> None:
    reset(backend, scene_json=json.dumps(compact_spec.to_dict()))
    response = bridge_core.handle_get_observation(backend, GetObservation.Request(include_depth=True),
                                                  GetObservation.Response())
    assert response.success and response.error_code == 0
    for view in ("front", "left", "back", "right"):
        image = getattr(response, view)
        assert (image.width, image.height, image.encoding, image.step) == (256, 256, "rgb8", 768)
        assert image.header.frame_id == f"head_camera_{view}"
    assert [image.encoding for image in response.depth] == ["32FC1"] * 4
    assert [item.view for item in response.visible] == ["front", "left", "back", "right"]
    names = {name for item in response.visible for name in item.names}
    assert {"fridge", "kitchen_counter", "frl_apartment_table_01"} <= names
    # Where each visible small object rests, parallel to the names, as the simulator's relations say.
    canonical = {state.name: state.canonical for state in backend.object_states()}
    rests = {canonical[state.name]: f"{'in' if state.inside else 'on'} {canonical[state.receptacle]}"
             for state in backend.object_states() if state.kind == "object" and state.receptacle}
    for item in response.visible:
        assert len(item.locations) == len(item.names)
        assert [location for location in item.locations] == [rests.get(name, "") for name in item.names]
    assert any(location.startswith("on ") for item in response.visible for location in item.locations)
    assert response.inventory == []
    direct = backend.observe(["front"], depth=True)
    assert np.array_equal(image_to_array(response.front), direct.rgb["front"])
    assert np.allclose(image_to_array(response.depth[0]), direct.depth["front"])
    without_depth = bridge_core.handle_get_observation(backend, GetObservation.Request(), GetObservation.Response())
    assert without_depth.depth == []


def test_query_reports_objects_containers_robot_and_unknown_names(backend: MujocoBackend,
                                                                 compact_spec: SceneSpec) -> None:
    reset(backend, scene_json=json.dumps(compact_spec.to_dict()))
    response = bridge_core.handle_query_scene(backend, QueryScene.Request(names=["apple", "drawer"]),
                                              QueryScene.Response())
    assert response.success
    objects = {item.name: item for item in response.objects}
    assert objects["apple_0"].canonical == "013_apple" and objects["apple_0"].on == "kitchen_drawer_0"
    assert objects["apple_0"].inside and objects["apple_0"].kind == "object"
    assert objects["apple_0"].size.x == pytest.approx(0.075)
    assert {item.name for item in response.containers} == {"kitchen_drawer_0", "kitchen_drawer_1"}
    drawer = response.containers[0]
    assert (drawer.joint_type, drawer.open_threshold, drawer.is_open) == ("slide", 0.25, False)
    assert drawer.furniture == "kitchen_counter_0"
    assert response.robot_pose.position.x == pytest.approx(2.5, abs=1e-3)
    everything = bridge_core.handle_query_scene(backend, QueryScene.Request(), QueryScene.Response())
    assert len(everything.objects) == len(backend.object_states()) and len(everything.containers) == 3
    assert {item.name: item.furniture for item in everything.containers}["fridge_0_door"] == "fridge_0"
    unknown = bridge_core.handle_query_scene(backend, QueryScene.Request(names=["unicorn"]), QueryScene.Response())
    assert (unknown.success, unknown.error_code) == (False, QueryScene.Response.UNKNOWN_NAME)
    assert "unicorn" in unknown.error_msg


def test_inventory_names_the_held_object(backend: MujocoBackend, compact_spec: SceneSpec) -> None:
    import mujoco

    reset(backend, scene_json=json.dumps(compact_spec.to_dict()))
    model, data = backend.model, backend.data
    address = backend.joint_qpos_index("obj/apple_0")
    data.qpos[address: address + 3] = data.site_xpos[model.site("fetch/grip").id]
    mujoco.mj_forward(model, data)
    assert backend.close_gripper() == "apple_0"
    response = bridge_core.handle_get_observation(backend, GetObservation.Request(), GetObservation.Response())
    assert response.inventory == ["013_apple"]
    query = bridge_core.handle_query_scene(backend, QueryScene.Request(names=["apple"]), QueryScene.Response())
    assert query.held_object == "apple_0"


class BrokenBackend:
    """A backend whose every call fails, as a crashed simulator would."""

    def __getattr__(self, name: str) -> object:
        def fail(*args: object, **kwargs: object) -> None:
            raise BackendError("simulator crashed")
        return fail


def test_simulator_failures_become_error_results() -> None:
    broken = BrokenBackend()
    observation = bridge_core.handle_get_observation(broken, GetObservation.Request(), GetObservation.Response())
    assert (observation.success, observation.error_code) == (False, GetObservation.Response.SIMULATOR_ERROR)
    assert "simulator crashed" in observation.error_msg
    query = bridge_core.handle_query_scene(broken, QueryScene.Request(), QueryScene.Response())
    assert query.error_code == QueryScene.Response.SIMULATOR_ERROR
    reset_response = bridge_core.handle_reset(broken, ResetEpisode.Request(seed=1), ResetEpisode.Response())
    assert reset_response.error_code == ResetEpisode.Response.SIMULATOR_ERROR


def test_images_odometry_and_clock_conversions() -> None:
    pixels = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    message = bridge_core.image_message(pixels, 12.25, "cam")
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (12, 250_000_000)
    # A simulated clock summed from 20 ms ticks lands just under whole seconds: the stamp still rounds up to them.
    clock = sum([0.02] * 650)
    assert clock < 13.0
    assert (bridge_core.stamp(clock).sec, bridge_core.stamp(clock).nanosec) == (13, 0)
    assert bridge_core.seconds_of(bridge_core.stamp(2.999_999_999_7)) == 3.0
    assert np.array_equal(image_to_array(message), pixels)
    depth = np.array([[0.5, 1.5]], dtype=np.float32)
    assert np.array_equal(image_to_array(bridge_core.image_message(depth, 0.0, "cam")), depth)
    with pytest.raises(ValueError):
        bridge_core.BridgeConfig(rate_hz=0.0)
    with pytest.raises(ValueError, match="scene_path"):
        bridge_core.BridgeConfig(scene_path="/no/such/file.json")


def test_ticks_step_the_periods_since_the_last_one_so_simulated_time_keeps_pace_with_wall_time() -> None:
    pacer = bridge_core.TickPacer(0.02, now=100.0)
    assert [pacer.periods(now) for now in (100.019, 100.041, 100.06)] == [1, 1, 1]  # on time: one period each
    assert pacer.periods(100.16) == 5  # a tick 80 ms late steps the four periods it missed as well
    assert sum(pacer.periods(100.16 + 0.013 * tick) for tick in range(1, 101)) == 65  # fractions carry over
    late = pacer.periods(160.0)  # a process stopped for a minute catches up at most MAX_CATCH_UP_S at once
    assert 0.2 < late * 0.02 <= bridge_core.MAX_CATCH_UP_S
    assert pacer.periods(160.02) == 1  # and owes nothing of the rest


def test_a_base_command_holds_for_its_time_out_in_simulated_time() -> None:
    command = bridge_core.BaseCommand(timeout=0.5)
    assert command.due(1.0) == (0.0, 0.0)  # nothing received yet
    command.receive(0.4, 0.1)
    assert command.due(2.0) == (0.4, 0.1)  # holds from the first tick that sees it, however late that comes
    assert command.due(2.5) == (0.4, 0.1)
    assert command.due(2.52) == (0.0, 0.0)  # 0.5 s of simulation without a new one
    command.receive(0.2, 0.0)
    assert command.due(2.6) == (0.2, 0.0)
    assert command.due(0.02) == (0.0, 0.0)  # a reset took the time back
    command.receive(0.3, 0.0)
    command.stop()  # paused: the command from before does not outlive the pause
    assert command.due(0.04) == (0.0, 0.0)


class RecordingDetector:
    """A learned-detector stand-in: says what it sees, records what it was given."""

    def __init__(self) -> None:
        self.given: list[object] = []

    def visible(self, observation: object) -> dict[str, list[tuple[str, str]]]:
        self.given.append(observation)
        return {"front": [("013_apple", "on kitchen_counter"), ("kitchen_counter", "")]}


def test_with_a_detector_the_names_come_from_it_and_no_segmentation_is_rendered(backend: MujocoBackend,
                                                                              compact_spec: SceneSpec,
                                                                              monkeypatch) -> None:
    reset(backend, scene_json=json.dumps(compact_spec.to_dict()))
    asked = []
    real_observe = backend.observe
    monkeypatch.setattr(backend, "observe", lambda views, **kwargs: asked.append(kwargs) or real_observe(views, **kwargs))
    monkeypatch.setattr(backend, "object_states", lambda *args: pytest.fail("a privileged query"))
    detector = RecordingDetector()
    response = bridge_core.handle_get_observation(backend, GetObservation.Request(), GetObservation.Response(),
                                                  detector)  # type: ignore[arg-type]
    assert response.success and asked == [{"depth": True, "segmentation": False}]
    assert not detector.given[0].segmentation and detector.given[0].depth  # type: ignore[attr-defined]
    front, left = response.visible[0], response.visible[1]
    assert (front.view, front.names, front.locations) == ("front", ["013_apple", "kitchen_counter"],
                                                          ["on kitchen_counter", ""])
    assert (left.view, left.names) == ("left", [])
    assert response.depth == []  # depth was rendered for the detector, not asked for in the response
