"""The remote policy protocol: message round trips, validation errors, the client against the 127.0.0.1 server."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from homiebot_executor.remote.client import ClientConfig, PolicyClient, RemotePolicyError
from homiebot_executor.remote.protocol import (
    PROTOCOL,
    Goal,
    PolicyAction,
    PolicyRequest,
    PolicyResponse,
    ProtocolError,
    RobotStateMessage,
    WireImage,
)
from homiebot_executor.remote.server import ReferencePolicyServer, ReferenceServerConfig

STATE = RobotStateMessage(base_pose=(1.0, 2.0, 0.5), base_velocity=(0.0, 0.0), arm_joints=(0.1,) * 7,
                          torso_height=0.15, gripper_opening=0.05, ee_position=(0.4, 0.0, 0.9),
                          ee_orientation=(1.0, 0.0, 0.0, 0.0), holding=False)


def request(skill: str = "pick", step: int = 0, model: str = "RT-1-X", session: str = "s1") -> PolicyRequest:
    rgb = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3)
    depth = np.linspace(0.5, 3.0, 48, dtype=np.float32).reshape(8, 6)
    return PolicyRequest(model, skill, session, step, f"{skill} the apple", Goal("apple", "object" if skill ==
                                                                                 "navigate" else ""),
                         {"head": WireImage.from_array(rgb)}, STATE, {"head": WireImage.from_array(depth)})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_images_round_trip_bit_exact():
    rgb = np.random.default_rng(0).integers(0, 255, (16, 12, 3), dtype=np.uint8)
    depth = np.random.default_rng(1).random((16, 12), dtype=np.float32)
    assert np.array_equal(WireImage.from_array(rgb).to_array(), rgb)
    assert np.array_equal(WireImage.from_array(depth).to_array(), depth)
    with pytest.raises(ProtocolError, match="unsupported array"):
        WireImage.from_array(np.zeros((4, 4, 4), dtype=np.uint8))


def test_request_round_trips_through_json():
    original = request()
    parsed = PolicyRequest.from_json(json.loads(json.dumps(original.to_json())))
    assert parsed.to_json() == original.to_json()
    assert parsed.images["head"].to_array().shape == (8, 6, 3)


def test_response_round_trips_through_json():
    original = PolicyResponse("running", (
        PolicyAction("base_velocity", linear=0.2, angular=-0.1, duration=0.1),
        PolicyAction("base_waypoint", x=0.5, y=0.1, yaw=None),
        PolicyAction("ee_delta", translation=(0.01, 0.0, -0.02), rotation=(0.0, 0.1, 0.0), gripper=None),
        PolicyAction("gripper", gripper=0.0), PolicyAction("stop")))
    assert PolicyResponse.from_json(json.loads(json.dumps(original.to_json()))) == original


@pytest.mark.parametrize("mutate,field", [
    (lambda data: data.update(protocol="other/2"), "protocol"),
    (lambda data: data.update(skill="dance"), "skill"),
    (lambda data: data["observation"]["state"].update(arm_joints=[0.0] * 6), "observation.state.arm_joints"),
    (lambda data: data["observation"]["images"]["head"].update(encoding="bgr8"), "observation.images.head.encoding"),
    (lambda data: data["observation"].update(images={}), "observation.images"),
    (lambda data: data.pop("goal"), "goal"),
])
def test_invalid_requests_name_the_field(mutate, field):
    data = request().to_json()
    mutate(data)
    with pytest.raises(ProtocolError, match=f"^{field.replace('.', '[.]')}"):
        PolicyRequest.from_json(data)


def test_corrupt_image_bytes_are_rejected():
    image = WireImage("rgb8", 4, 4, WireImage.from_array(np.zeros((4, 3, 3), dtype=np.uint8)).data)
    with pytest.raises(ProtocolError, match="36 bytes for a 4x4 rgb8 image, expected 48"):
        image.to_array()


def test_invalid_actions_name_the_field():
    with pytest.raises(ProtocolError, match=r"actions\[0\]\.duration"):
        PolicyResponse.from_json({"protocol": PROTOCOL, "status": "running",
                                  "actions": [{"type": "base_velocity", "linear": 1, "angular": 0, "duration": 0}]})
    with pytest.raises(ProtocolError, match=r"actions\[1\]\.gripper"):
        PolicyResponse.from_json({"protocol": PROTOCOL, "status": "running",
                                  "actions": [{"type": "stop"}, {"type": "gripper", "gripper": 2}]})


def test_client_and_reference_server_end_to_end():
    config = ReferenceServerConfig(chunk_size=3, requests_per_session=2)
    with ReferencePolicyServer(config) as server:
        assert server.url.startswith("http://127.0.0.1:")
        client = PolicyClient(ClientConfig(server.url, timeout_s=5))
        assert client.health() == ["NoMaD", "PixNav", "octo", "RT-1-X"]
        first = client.act(request("pick", 0))
        assert first.status == "running" and [a.type for a in first.actions] == ["ee_delta"] * 3
        last = client.act(request("pick", 1))
        assert last.status == "done" and last.actions[-1] == PolicyAction("gripper", gripper=0.0)
        nav = client.act(request("navigate", 1, model="NoMaD", session="s2"))
        assert nav.status == "done" and nav.actions[-1].type == "stop"
        unknown = client.act(request("pick", 0, model="GPT-4o"))
        assert unknown.status == "error" and "not served" in unknown.message
    assert [(seen.skill, seen.step, seen.session) for seen in server.received[:3]] == [
        ("pick", 0, "s1"), ("pick", 1, "s1"), ("navigate", 1, "s2")]
    assert server.received[0].image_shapes == {"head": (8, 6, 3), "depth:head": (8, 6)}


def test_server_rejects_malformed_requests_with_400():
    with ReferencePolicyServer() as server:
        client = PolicyClient(ClientConfig(server.url))
        bad = request().to_json()
        bad["observation"]["state"]["holding"] = "yes"
        with pytest.raises(RemotePolicyError, match="HTTP 400.*holding"):
            client._exchange("POST", "/v1/act", bad)
    assert server.rejected and "holding" in server.rejected[0]


def test_client_time_out_and_unreachable_server():
    with ReferencePolicyServer(ReferenceServerConfig(delay_s=1.0)) as server:
        with pytest.raises(RemotePolicyError, match="no answer within 0.2 s"):
            PolicyClient(ClientConfig(server.url, timeout_s=0.2)).act(request())
    with pytest.raises(RemotePolicyError, match="cannot reach the policy server"):
        PolicyClient(ClientConfig(f"http://127.0.0.1:{free_port()}", timeout_s=1)).health()


def test_configs_validate():
    with pytest.raises(ValueError, match="loopback only"):
        ReferenceServerConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="ClientConfig.url"):
        ClientConfig("ftp://example")
