"""What the Habitat backend needs around habitat-lab: the modules it imports (stubbed in tests), its four-view Fetch,
the one-episode dataset file, and the conversions between Habitat's y-up frame and this project's z-up frame.

(x, y, z)_habitat -> (x, -z, y); quaternions are (w, x, y, z).
"""

from __future__ import annotations

import gzip
import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from emmoe_core.robot.state import VIEWS, BackendError

from habitat_bridge.official import OfficialEpisode

CAMERA_PREFIX = "emmoe_head_"
ROBOT_CLASS_NAME = "FourViewFetchRobot"
# Head camera placement in the Fetch root frame (x forward, y up, z to the right), as habitat-lab's own head camera.
_HEAD_OFFSET = (0.25, 1.2)
_HEAD_LOOK_AT = (0.75, 1.0)
# Quaternion (w, x, y, z) taking Habitat's y-up frame to the z-up frame.
_Y_UP_TO_Z_UP = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)


def to_zup(vector: Sequence[float]) -> tuple[float, float, float]:
    """A Habitat (y-up) point in the z-up frame."""
    x, y, z = (float(v) for v in vector)
    return x, -z, y


def to_yup(vector: Sequence[float]) -> tuple[float, float, float]:
    """A z-up point in Habitat's y-up frame."""
    x, y, z = (float(v) for v in vector)
    return x, z, -y


def _multiply(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float, float]:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return (w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2)


def rotation_to_zup(quaternion: Sequence[float]) -> tuple[float, float, float, float]:
    """A Habitat-frame orientation (w, x, y, z) expressed in the z-up frame."""
    w, x, y, z = _Y_UP_TO_Z_UP
    return _multiply(_multiply(_Y_UP_TO_Z_UP, quaternion), (w, -x, -y, -z))


def quaternion_of(rotation: Any) -> tuple[float, float, float, float]:
    """(w, x, y, z) of a magnum Quaternion."""
    vector = rotation.vector
    return float(rotation.scalar), float(vector[0]), float(vector[1]), float(vector[2])


# ---- the habitat modules ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HabitatModules:
    """The habitat-lab / habitat-sim / magnum modules the adapter uses (imported lazily)."""

    habitat: ModuleType
    config_default: ModuleType
    structured_configs: ModuleType
    fetch_robot: ModuleType
    mobile_manipulator: ModuleType
    agent_manager: ModuleType
    physics: ModuleType
    magnum: ModuleType

    @classmethod
    def load(cls) -> HabitatModules:
        """Import them.

        Raises:
            BackendError: habitat-lab or habitat-sim is not installed.
        """
        names = {
            "habitat": "habitat", "config_default": "habitat.config.default",
            "structured_configs": "habitat.config.default_structured_configs",
            "fetch_robot": "habitat.articulated_agents.robots.fetch_robot",
            "mobile_manipulator": "habitat.articulated_agents.mobile_manipulator",
            "agent_manager": "habitat.tasks.rearrange.articulated_agent_manager",
            "physics": "habitat_sim.physics", "magnum": "magnum",
        }
        loaded = {}
        for key, module in names.items():
            try:
                loaded[key] = importlib.import_module(module)
            except ImportError as error:
                raise BackendError(f"the habitat backend needs habitat-lab and habitat-sim ({module}: {error}); "
                                   "use the mujoco backend") from None
        return cls(**loaded)


def four_view_fetch_class(modules: HabitatModules) -> type:
    """habitat-lab's FetchRobot with four head cameras (front, left, back, right) added to its camera params."""
    magnum = modules.magnum
    camera_params = modules.mobile_manipulator.ArticulatedAgentCameraParams
    fetch = modules.fetch_robot.FetchRobot

    class FourViewFetchRobot(fetch):  # type: ignore[misc, valid-type]
        """Fetch with cameras `emmoe_head_{front,left,back,right}` around the head (sensor names start with them)."""

        def _get_fetch_params(self) -> Any:
            params = super()._get_fetch_params()
            cameras = dict(params.cameras)
            for index, view in enumerate(VIEWS):
                yaw = index * math.pi / 2
                # Turning left in the root frame (y up, z right) moves +x towards -z.
                forward = (math.cos(yaw), -math.sin(yaw))
                cameras[CAMERA_PREFIX + view] = camera_params(
                    cam_offset_pos=magnum.Vector3(_HEAD_OFFSET[0] * forward[0], _HEAD_OFFSET[1],
                                                  _HEAD_OFFSET[0] * forward[1]),
                    cam_look_at_pos=magnum.Vector3(_HEAD_LOOK_AT[0] * forward[0], _HEAD_LOOK_AT[1],
                                                   _HEAD_LOOK_AT[0] * forward[1]),
                    attached_link_id=-1)
            params.cameras = cameras
            return params

    FourViewFetchRobot.__name__ = ROBOT_CLASS_NAME
    return FourViewFetchRobot


def write_episode_dataset(episode: OfficialEpisode, directory: Path) -> Path:
    """Write an official episode as a one-episode RearrangeDataset file (.json.gz) and return its path."""
    path = directory / f"emmoe_{episode.episode_id}.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump({"config": None, "episodes": [dict(episode.raw)]}, handle)
    return path


def matrix_quaternion(columns: Any) -> tuple[float, float, float, float]:
    """(w, x, y, z) of a 3x3 rotation given column by column (magnum's Matrix3x3 indexing: m[i] is column i)."""
    m = np.asarray([[float(columns[column][row]) for column in range(3)] for row in range(3)])
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = math.sqrt(trace + 1.0) * 2
        return 0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s
    index = int(np.argmax(np.diag(m)))
    if index == 0:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        return (m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s
    if index == 1:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        return (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s
    s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
    return (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s
