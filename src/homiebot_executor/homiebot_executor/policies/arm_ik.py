"""Inverse kinematics of Fetch's arm with mink (differential IK on MuJoCo), on a robot-only kinematic model.

The model is the robot's kinematic description (Robot.robot_description(): MJCF with the joints and grasp site of
emmoe_core.robot.fetch), compiled once per process per description in a few milliseconds. The base pose, head and
fingers are copied from the simulator and frozen; the torso lift and the seven arm joints are solved for, with a light
posture task that keeps the solution near the current configuration. Targets are poses of the grasp site
`fetch/grip` in the world frame.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import mink
import mujoco
import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.validation import require_positive_fields

GRIP_SITE = fetch.PREFIX + fetch.GRIP_SITE
SOLVED_JOINTS: tuple[str, ...] = (fetch.TORSO_JOINT, *fetch.ARM_JOINTS)
# Arm configurations to restart from when the solve from the current one ends in a local minimum (arm raised in
# front at several elbow bends); with them about 90 % of grasp poses 0.35-0.9 m in front at 0.45-1.15 m height solve.
RESTART_ARMS: tuple[tuple[float, ...], ...] = (
    (0.0, -1.2, 0.0, 1.4, 0.0, 1.9, 0.0),
    (0.0, -0.3, 0.0, 1.6, 0.0, 0.3, 0.0),
    (0.0, 0.3, 0.0, 1.2, 0.0, 1.2, 0.0),
    (0.0, -0.8, 0.0, 1.0, 0.0, 1.2, 0.0),
    (0.0, 0.0, 0.0, 0.5, 0.0, 1.0, 0.0),
)


@dataclass(frozen=True)
class IkConfig:
    """Settings of the solver.

    Attributes:
        max_iterations: integration steps before giving up.
        position_tolerance: metres.
        orientation_tolerance: radians.
        orientation_cost: weight of the orientation error relative to position (1 = equal).
        posture_cost: weight of staying near the start configuration.
        dt: integration step of the differential IK.
        damping: Levenberg-Marquardt damping of the QP.
    """

    max_iterations: int = 150
    position_tolerance: float = 0.01
    orientation_tolerance: float = 0.15
    orientation_cost: float = 0.5
    posture_cost: float = 1e-3
    dt: float = 0.2
    damping: float = 1e-3

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError(f"IkConfig.max_iterations: expected >= 1, got {self.max_iterations}")
        require_positive_fields(self, ("position_tolerance", "orientation_tolerance", "dt"))


@dataclass(frozen=True)
class IkSolution:
    """A solved configuration.

    Attributes:
        joints: joint name -> position for SOLVED_JOINTS (torso lift and the arm).
        position_error: remaining position error (metres).
        orientation_error: remaining orientation error (radians).
        converged: both errors within tolerance.
    """

    joints: Mapping[str, float]
    position_error: float
    orientation_error: float
    converged: bool

    @property
    def arm(self) -> tuple[float, ...]:
        """The seven arm joints in fetch.ARM_JOINTS order."""
        return tuple(self.joints[name] for name in fetch.ARM_JOINTS)

    @property
    def torso(self) -> float:
        """Torso lift (metres)."""
        return self.joints[fetch.TORSO_JOINT]


@lru_cache(maxsize=4)
def kinematic_model(description: str) -> mujoco.MjModel:
    """The compiled robot description (cached per description)."""
    return mujoco.MjModel.from_xml_string(description)


def grasp_rotation(approach_yaw: float, pitch: float) -> np.ndarray:
    """World rotation of the grasp frame: fingers pointing along `approach_yaw`, tilted down by `pitch`.

    pitch 0 is a horizontal (side) grasp, pi/2 a top-down grasp. The fingers close horizontally.
    """
    c, s = math.cos(approach_yaw), math.sin(approach_yaw)
    forward = np.array([c * math.cos(pitch), s * math.cos(pitch), -math.sin(pitch)])
    side = np.array([-s, c, 0.0])
    up = np.cross(forward, side)
    return np.column_stack([forward, side, up])


class ArmIk:
    """Solves grasp-site poses for the torso and arm, given the rest of the robot's configuration."""

    def __init__(self, description: str, config: IkConfig | None = None) -> None:
        """Prepare the kinematic model of `description` (Robot.robot_description()), tasks and limits."""
        self.config = config or IkConfig()
        self.model = kinematic_model(description)
        self._configuration = mink.Configuration(self.model)
        self._qpos = {name: int(self.model.jnt_qposadr[self._joint(name)]) for name in self._all_joints()}
        solved_dofs = {int(self.model.jnt_dofadr[self._joint(name)]) for name in SOLVED_JOINTS}
        frozen = [dof for dof in range(self.model.nv) if dof not in solved_dofs]
        self._freeze = mink.DofFreezingTask(self.model, dof_indices=frozen)
        self._frame = mink.FrameTask(GRIP_SITE, "site", position_cost=1.0,
                                     orientation_cost=self.config.orientation_cost, lm_damping=1.0)
        self._posture = mink.PostureTask(self.model, cost=self.config.posture_cost)
        self._limits = [mink.ConfigurationLimit(self.model)]

    def _joint(self, name: str) -> int:
        full = name if name.startswith(fetch.PREFIX) else fetch.PREFIX + name
        joint = int(mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, full))
        if joint < 0:
            raise KeyError(f"the Fetch model has no joint {name!r}")
        return joint

    @staticmethod
    def _all_joints() -> tuple[str, ...]:
        return (*fetch.BASE_JOINTS, fetch.TORSO_JOINT, *fetch.HEAD_JOINTS, *fetch.ARM_JOINTS,
                *fetch.FINGER_JOINTS)

    def set_robot(self, base: tuple[float, float, float], joints: Mapping[str, float]) -> None:
        """Copy the simulator's configuration: base (x, y, yaw) and joint name -> position (short names)."""
        q = self._configuration.q.copy()
        for name, value in zip(fetch.BASE_JOINTS, base):
            q[self._qpos[name]] = value
        for name, value in joints.items():
            if name in self._qpos:
                q[self._qpos[name]] = value
        # The simulator may sit a hair outside a limit; the QP needs a start inside them.
        limited = self.model.jnt_limited.astype(bool)
        for joint in np.nonzero(limited)[0]:
            address = self.model.jnt_qposadr[joint]
            low, high = self.model.jnt_range[joint]
            q[address] = np.clip(q[address], low + 1e-4, high - 1e-4)
        self._configuration.update(q)

    def solve(self, position: Sequence[float] | np.ndarray, rotation: np.ndarray) -> IkSolution:
        """Torso and arm joints that put the grasp site at `position` with `rotation` (world frame).

        Starts from the configuration given by `set_robot` (so successive targets along a path stay continuous);
        when that does not converge, restarts from each of RESTART_ARMS. Leaves the best solution in the model.
        """
        start = self._configuration.q.copy()
        best = self._solve_from_current(position, rotation)
        for arm in RESTART_ARMS:
            if best.converged:
                break
            candidate = self._solve_from_seed(start, arm, position, rotation)
            if candidate.converged or candidate.position_error < best.position_error:
                best = candidate
        q = start.copy()
        for name, value in best.joints.items():
            q[self._qpos[name]] = value
        self._configuration.update(q)
        return best

    def solutions(self, position: Sequence[float] | np.ndarray, rotation: np.ndarray) -> list[IkSolution]:
        """Every distinct converged solution for the pose: from the configuration given by `set_robot` and from each
        of RESTART_ARMS (different elbow and wrist branches reach one pose); leaves the start configuration in the
        model."""
        start = self._configuration.q.copy()
        found: list[IkSolution] = []
        for arm in (None, *RESTART_ARMS):
            candidate = self._solve_from_seed(start, arm, position, rotation)
            if candidate.converged and all(
                    max(abs(candidate.joints[name] - other.joints[name]) for name in SOLVED_JOINTS) > 0.2
                    for other in found):
                found.append(candidate)
        self._configuration.update(start)
        return found

    def _solve_from_seed(self, start: np.ndarray, arm: Sequence[float] | None, position: Sequence[float] | np.ndarray,
                         rotation: np.ndarray) -> IkSolution:
        """A solve from `start` with the arm joints set to `arm` (None: `start` as it is)."""
        q = start.copy()
        for name, value in zip(fetch.ARM_JOINTS, arm or ()):
            q[self._qpos[name]] = value
        self._configuration.update(q)
        return self._solve_from_current(position, rotation)

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of (torso, *arm joints); joints without limits (the rolls) get -pi..pi."""
        bounds = []
        for name in SOLVED_JOINTS:
            joint = self._joint(name)
            bounds.append(tuple(self.model.jnt_range[joint]) if self.model.jnt_limited[joint] else (-math.pi, math.pi))
        return np.array([low for low, _ in bounds]), np.array([high for _, high in bounds])

    def _solve_from_current(self, position: Sequence[float] | np.ndarray, rotation: np.ndarray) -> IkSolution:
        target = mink.SE3.from_rotation_and_translation(mink.SO3.from_matrix(np.asarray(rotation, dtype=float)),
                                                        np.asarray(position, dtype=float))
        self._frame.set_target(target)
        self._posture.set_target(self._configuration.q.copy())
        error = self._frame.compute_error(self._configuration)
        position_error, orientation_error = float(np.linalg.norm(error[:3])), float(np.linalg.norm(error[3:]))
        for _ in range(self.config.max_iterations):
            try:
                velocity = mink.solve_ik(self._configuration, [self._frame, self._posture], self.config.dt, "daqp",
                                         damping=self.config.damping, limits=self._limits,
                                         constraints=[self._freeze])
            except mink.NoSolutionFound:
                break
            self._configuration.integrate_inplace(velocity, self.config.dt)
            error = self._frame.compute_error(self._configuration)
            position_error, orientation_error = float(np.linalg.norm(error[:3])), float(np.linalg.norm(error[3:]))
            if position_error <= self.config.position_tolerance and \
                    orientation_error <= self.config.orientation_tolerance:
                break
        q = self._configuration.q
        joints = {name: float(q[self._qpos[name]]) for name in SOLVED_JOINTS}
        converged = position_error <= self.config.position_tolerance and \
            orientation_error <= self.config.orientation_tolerance
        return IkSolution(joints, position_error, orientation_error, converged)
