"""Collision checks of arm configurations and joint-space paths against the MuJoCo scene (privileged).

What MujocoBackend.arm_collides and arm_path_free answer (emmoe_core.robot.interface.PrivilegedScene).

The M3 arm moves in joint space between the tucked pose, a raised ready pose and IK solutions. A straight joint
interpolation can sweep the wrist through a counter top, so each segment is checked first on a scratch copy of the
simulator state (kinematics and collision detection only, about 0.06 ms per configuration in the apartment): the
robot's arm and gripper geoms must not penetrate furniture or walls, and neither may a held object (carried with the
gripper in the scratch copy, HELD_TOLERANCE deep contacts allowed: it starts resting on its support). Other objects
are ignored (the arm may brush the one it picks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
import numpy as np
from emmoe_core.robot import fetch

# Bodies whose geoms are checked: the arm from the shoulder out, and the gripper.
ARM_BODIES: tuple[str, ...] = ("shoulder_pan_link", "shoulder_lift_link", "upperarm_roll_link", "elbow_flex_link",
                               "forearm_roll_link", "wrist_flex_link", "wrist_roll_link", "gripper_link",
                               "r_gripper_finger_link", "l_gripper_finger_link")
# Penetration of a held object into furniture that still counts as free (m): resting contact, not a collision.
HELD_TOLERANCE = 0.005


class ArmCollisionChecker:
    """Checks arm configurations of the robot in the backend's current scene."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, qpos_index: Callable[[str], int],
                 gripper_body: int, held_body: Callable[[], int] = lambda: -1, resolution: float = 0.08) -> None:
        """Check against `data` (the live simulator state) of `model`; `qpos_index` maps a short joint name to its
        qpos address; a held object moves with `gripper_body`, and `held_body` gives its body now (-1: none);
        `resolution` is the joint step between checks along a segment (rad)."""
        self.resolution = resolution
        self.model = model
        self._data = data
        self._scratch = mujoco.MjData(model)
        self._gripper = gripper_body
        self._held_body = held_body
        self._carried: tuple[np.ndarray, int, np.ndarray, np.ndarray] | None = None
        arm_bodies = {mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, fetch.PREFIX + name)
                      for name in ARM_BODIES}
        self._arm_geom = np.isin(model.geom_bodyid, list(arm_bodies))
        body_names = [model.body(index).name for index in range(model.nbody)]
        self._blocking_geom = np.array([not body_names[body].startswith((fetch.PREFIX, "obj/"))
                                        for body in model.geom_bodyid])
        self._arm_qpos = [qpos_index(name) for name in fetch.ARM_JOINTS]
        self._torso_qpos = qpos_index(fetch.TORSO_JOINT)

    def _load(self) -> None:
        self._scratch.qpos[:] = self._data.qpos
        body = self._held_body()
        self._carried = None
        if body >= 0:
            data, gripper = self._data, self._gripper
            inverse = np.zeros(4)
            mujoco.mju_negQuat(inverse, data.xquat[gripper])
            offset, turn = np.zeros(3), np.zeros(4)
            mujoco.mju_rotVecQuat(offset, data.xpos[body] - data.xpos[gripper], inverse)
            mujoco.mju_mulQuat(turn, inverse, data.xquat[body])
            address = int(self.model.jnt_qposadr[self.model.body_jntadr[body]])
            self._carried = (self.model.geom_bodyid == body, address, offset, turn)

    def _carry(self) -> np.ndarray:
        """Move the held object with the gripper in the scratch state; its geoms (none when nothing is held)."""
        scratch = self._scratch
        if self._carried is None:
            return np.zeros(self.model.ngeom, dtype=bool)
        geoms, address, offset, turn = self._carried
        position, orientation = np.zeros(3), np.zeros(4)
        mujoco.mju_rotVecQuat(position, offset, scratch.xquat[self._gripper])
        mujoco.mju_mulQuat(orientation, scratch.xquat[self._gripper], turn)
        scratch.qpos[address:address + 3] = scratch.xpos[self._gripper] + position
        scratch.qpos[address + 3:address + 7] = orientation
        mujoco.mj_kinematics(self.model, scratch)
        return geoms

    def _collides_loaded(self, arm: Sequence[float], torso: float) -> bool:
        scratch = self._scratch
        scratch.qpos[self._arm_qpos] = arm
        scratch.qpos[self._torso_qpos] = torso
        mujoco.mj_kinematics(self.model, scratch)
        held = self._carry()
        mujoco.mj_collision(self.model, scratch)
        if scratch.ncon == 0:
            return False
        geoms = scratch.contact.geom[: scratch.ncon]
        deep = scratch.contact.dist[: scratch.ncon] < -HELD_TOLERANCE
        hits = (self._arm_geom[geoms[:, 0]] & self._blocking_geom[geoms[:, 1]]) | \
               (self._arm_geom[geoms[:, 1]] & self._blocking_geom[geoms[:, 0]]) | \
               (deep & ((held[geoms[:, 0]] & self._blocking_geom[geoms[:, 1]]) |
                        (held[geoms[:, 1]] & self._blocking_geom[geoms[:, 0]])))
        return bool(hits.any())

    def collides(self, arm: Sequence[float], torso: float) -> bool:
        """Whether the arm at `arm` (seven joints) with the torso at `torso` penetrates furniture or walls.

        The rest of the robot and the scene stay as they are in the simulator now.
        """
        self._load()
        return self._collides_loaded(arm, torso)

    def segment_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                     end_torso: float) -> bool:
        """Whether the straight joint interpolation from start to end stays collision-free (end included)."""
        self._load()
        first, last = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        span = max(float(np.max(np.abs(last - first))), abs(end_torso - start_torso) * 4)
        count = max(1, int(np.ceil(span / self.resolution)))
        for fraction in np.linspace(1.0 / count, 1.0, count):
            arm = first + fraction * (last - first)
            torso = start_torso + fraction * (end_torso - start_torso)
            if self._collides_loaded(arm, torso):
                return False
        return True
