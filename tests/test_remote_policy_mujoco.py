"""RemotePolicy drives the MuJoCo robot with action chunks from the 127.0.0.1 reference server."""

from __future__ import annotations

import math
import socket

import pytest

pytest.importorskip("mujoco")

from habitat_bridge.apartment import compact_room  # noqa: E402
from habitat_bridge.backends.mujoco_backend import MujocoBackend  # noqa: E402

from homiebot_executor.policies.remote import RemotePolicy  # noqa: E402
from homiebot_executor.remote.client import ClientConfig, PolicyClient  # noqa: E402
from homiebot_executor.remote.server import ReferencePolicyServer, ReferenceServerConfig  # noqa: E402
from homiebot_executor.skills import SkillGoal, SkillStatus  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    sim = MujocoBackend()
    sim.reset(compact_room(0))
    yield sim
    sim.close()


def test_navigation_chunks_move_the_base_and_are_judged_by_the_simulator(backend):
    start = backend.robot_state().base
    config = ReferenceServerConfig(chunk_size=5, requests_per_session=3)
    with ReferencePolicyServer(config) as server:
        policy = RemotePolicy(backend, PolicyClient(ClientConfig(server.url)), "NoMaD")
        phases: list[str] = []
        outcome = policy.run(SkillGoal("navigate", "brown_table_0", instruction="go to the brown table"),
                             progress=lambda phase, steps, distance: phases.append(phase))
    end = backend.robot_state().base
    # Three chunks of five 0.1 s steps at 0.2 m/s: about 0.3 m straight ahead.
    moved = math.dist(start.position[:2], end.position[:2])
    assert 0.2 < moved < 0.4
    assert outcome.sim_steps == 15 and phases
    assert outcome.status in (SkillStatus.SUCCEEDED, SkillStatus.TIMEOUT)
    seen = server.received
    assert [request.step for request in seen] == [0, 1, 2] and len({request.session for request in seen}) == 1
    assert seen[0].image_shapes == {"head": (256, 256, 3)} and seen[0].model == "NoMaD"


def test_arm_chunks_run_and_a_missed_grasp_is_a_skill_failure(backend):
    with ReferencePolicyServer(ReferenceServerConfig(chunk_size=2, requests_per_session=2)) as server:
        policy = RemotePolicy(backend, PolicyClient(ClientConfig(server.url)), "RT-1-X")
        outcome = policy.run(SkillGoal("pick", "bowl_0", instruction="pick the bowl"))
    assert outcome.status is SkillStatus.GRASP_FAILED and outcome.held_object == ""
    assert [request.skill for request in server.received] == ["pick", "pick"]


def test_unreachable_policy_server_is_policy_unavailable(backend):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = RemotePolicy(backend, PolicyClient(ClientConfig(f"http://127.0.0.1:{port}", timeout_s=1)), "octo")
    outcome = policy.run(SkillGoal("open", "fridge_0_door"))
    assert outcome.status is SkillStatus.POLICY_UNAVAILABLE and "cannot reach" in outcome.message
