"""M3, the privileged skills ("with background information"), on the simulator backend's API.

Every attempt starts with the arm reset (fingers opened unless holding, torso lowered, arm tucked; not counted in the
step budget), then:

- navigate: plan on the backend's occupancy grid (walls, furniture, doors and drawers at their current position,
  a door as its panel), inflated by the robot's radius; pick a standing spot (an object: the reachable cell nearest
  it, in front of its receptacle when that has a front; furniture: nearest its front face, or its footprint for tables
  and chairs; a door or drawer: in front of its handle; a room: nearest its centre); follow the shortened path with the
  base controller and turn to face the target. Success (release rule): the base ends within 0.65 m of the spot and
  the contact force stayed under 5 N.
- pick: move the base within arm's reach if needed, solve the arm with mink for a top-down grasp (a level one for
  objects on fridge or cabinet shelves, with tilted ones in between), approach from 10 cm, weld-grasp, lift, tuck.
  Success: the right object is held and was not dropped.
- put: choose a free spot on a support region of the receptacle (inside a fridge or a drawer only when it is open),
  carry the object over it, release, let it settle. Success: the object rests within 0.5 m of that region.
- open / close: stand in front of the handle, reach it, retract, step out of the door's swing or the drawer's
  travel, drive the joint past its open threshold (or back to closed). Success: the joint is past the threshold.

One control step is `control_period` seconds of simulated time; step budgets count control steps (500 for
navigation, 200 for the others). Physics runs in simulated time: the skills step the backend themselves. Every
backend call holds `lock`, so a bridge node sharing the backend can serve observations between control steps.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import numpy as np
from habitat_bridge import layout
from habitat_bridge.backends import fetch_model
from habitat_bridge.backends.base import BackendError, ContainerState, InstanceState, SimBackend, UnknownNameError
from habitat_bridge.furniture import MovingPart, Surface
from habitat_bridge.scene_spec import Articulation, Furniture, SceneSpec

from homiebot_executor.failure_model import FailureModel
from homiebot_executor.monitor import ExecutionWatcher
from homiebot_executor.policies.arm_ik import ArmIk, IkConfig, grasp_rotation
from homiebot_executor.policies.arm_motion import ArmCollisionChecker
from homiebot_executor.policies.navigation import BaseController, ControllerConfig, GeodesicField, GridPlanner, wrap_angle
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus

Progress = Callable[[str, int, float], None]
Area = Callable[[np.ndarray, np.ndarray], np.ndarray]
# Furniture models approached from their front face (doors, drawers, seats, open shelves face one way).
FRONT_MODELS: tuple[str, ...] = ("counter", "fridge", "cabinet", "shelf", "sofa", "tv_stand", "desk", "tv")
# The arm raised in front, elbow high, gripper 0.43 m ahead at 1.07 m pointing down (with the torso at READY_TORSO):
# the pose between the tucked arm and a target, clear of table and counter tops.
READY_ARM: tuple[float, ...] = (0.0, -1.2, 0.0, 1.4, 0.0, 1.9, 0.0)
READY_TORSO = 0.3
TUCKED_TORSO = 0.15
# Regions with less free height than this above them are reached with a level gripper (metres).
LEVEL_BELOW_CLEARANCE = 0.6
# Free height assumed above an object used as a place (nothing hangs over a bowl on a table).
OBJECT_PLACE_CLEARANCE = 1.0
# Via poses tried, in this order, when a straight joint move would hit furniture: the arm raised and folded close in
# front (0.38 m ahead at most), and raised at the side.
VIA_POSES: tuple[tuple[tuple[float, ...], float], ...] = (
    ((0.0, -1.2, 0.0, 2.2, 0.0, 1.9, 0.0), READY_TORSO),
    ((1.32, -1.2, -0.2, 1.72, 0.0, 1.66, 0.0), READY_TORSO),
    (READY_ARM, READY_TORSO),
)


@dataclass(frozen=True)
class PrivilegedConfig:
    """Settings of the M3 skills.

    Attributes:
        control_period: simulated seconds per control step (the unit of the step budgets).
        robot_radius: radius of the base footprint (metres).
        clearance: extra margin kept from obstacles when planning (metres).
        grid_resolution: occupancy-grid cell size (metres).
        nav_success_distance: the base must end within this distance of its standing spot (release: 0.65 m).
        contact_limit: contact force that makes navigation fail (release: 5 N).
        place_success_distance: a put succeeds when the object rests within this distance of the region (0.5 m).
        reach: planar distance from the base centre within which the arm works (metres).
        arm_speed: largest joint change per control step (radians).
        grasp_distance: largest gap between the grasp point and an object's box for the weld grasp (metres).
        hinge_open: joint target for opening a door (radians).
        slide_open: joint target for opening a drawer (metres).
        controller: base controller gains.
        ik: arm IK settings.
    """

    control_period: float = 0.1
    robot_radius: float = 0.32
    clearance: float = 0.03
    grid_resolution: float = 0.05
    nav_success_distance: float = 0.65
    contact_limit: float = 5.0
    place_success_distance: float = 0.5
    reach: float = 0.88
    arm_speed: float = 0.2
    grasp_distance: float = 0.08
    hinge_open: float = 1.45
    slide_open: float = 0.43
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    ik: IkConfig = field(default_factory=IkConfig)

    def __post_init__(self) -> None:
        for name in ("control_period", "robot_radius", "grid_resolution", "nav_success_distance", "contact_limit",
                     "place_success_distance", "reach", "arm_speed", "grasp_distance", "hinge_open", "slide_open"):
            if not getattr(self, name) > 0:
                raise ValueError(f"PrivilegedConfig.{name}: expected a positive number, got {getattr(self, name)}")
        if self.clearance < 0:
            raise ValueError(f"PrivilegedConfig.clearance: expected >= 0, got {self.clearance}")


class _Stop(Exception):
    """Ends an attempt early with a status."""

    def __init__(self, status: SkillStatus, message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class _Attempt:
    """Book-keeping of one running attempt."""

    goal: SkillGoal
    watcher: ExecutionWatcher
    should_cancel: Callable[[], bool]
    progress: Progress
    phase: str = "reset_arm"
    steps: int = 0
    distance: float = float("nan")


class PrivilegedSkills:
    """The M3 skills on one backend (see the module docstring)."""

    def __init__(self, backend: SimBackend, config: PrivilegedConfig | None = None,
                 failure_model: FailureModel | None = None, lock: AbstractContextManager | None = None) -> None:
        """Drive `backend`; `lock` serialises backend access with other users (a fresh lock by default)."""
        self.backend = backend
        self.config = config or PrivilegedConfig()
        self.failure_model = failure_model
        self.lock = lock if lock is not None else threading.RLock()
        self.ik = ArmIk(self.config.ik)
        self._checker: ArmCollisionChecker | None = None
        self._attempt: _Attempt | None = None

    # ---- entry point -------------------------------------------------------------------------------------------
    def run(self, goal: SkillGoal, should_cancel: Callable[[], bool] = lambda: False,
            progress: Progress = lambda phase, steps, distance: None) -> SkillOutcome:
        """Run one attempt of `goal`: reset the arm, then the skill. Skill failures never raise."""
        attempt = _Attempt(goal, ExecutionWatcher(contact_limit=self.config.contact_limit), should_cancel, progress)
        self._attempt = attempt
        try:
            self._reset_arm()
            attempt.steps = 0
            attempt.watcher = ExecutionWatcher(held_at_start=self._held(), step_budget=goal.step_budget,
                                               contact_limit=self.config.contact_limit)
            injected = self.failure_model.draw(goal.skill) if self.failure_model is not None else None
            if injected is not None:
                status, message = self._injected(goal, injected.drop_object)
            else:
                skill = {"navigate": self._navigate, "pick": self._pick, "put": self._put,
                         "open": self._open, "close": self._close}[goal.skill]
                status, message = skill(goal)
        except _Stop as stop:
            status, message = stop.status, stop.message
        except UnknownNameError as error:
            status, message = SkillStatus.UNKNOWN_TARGET, str(error)
        except BackendError as error:
            status, message = SkillStatus.INTERNAL_ERROR, f"simulator: {error}"
        finally:
            self._attempt = None
        try:
            with self.lock:
                self.backend.set_base_velocity(0.0, 0.0)
                held_after: str | None = self.backend.held_object() or ""
        except BackendError:
            held_after = None
        return SkillOutcome(status, message, held_after, attempt.steps, attempt.distance)

    # ---- stepping ----------------------------------------------------------------------------------------------
    def _tick(self, count: int = 1) -> None:
        """Advance `count` control steps, watching the hand, contacts, the budget and cancel requests."""
        attempt = self._attempt
        for _ in range(count):
            if attempt is not None and attempt.should_cancel():
                raise _Stop(SkillStatus.CANCELED, "cancel requested")
            with self.lock:
                self.backend.step(self.config.control_period)
                held = self.backend.held_object() or ""
                force = self.backend.contact_force()
            if attempt is None:
                continue
            attempt.steps += 1
            incidents = attempt.watcher.observe(attempt.steps, held, force)
            if attempt.steps % 5 == 0:
                attempt.progress(attempt.phase, attempt.steps, attempt.distance)
            drop = next((incident for incident in incidents if incident.kind == "drop"), None)
            if drop is not None:
                raise _Stop(SkillStatus.OBJECT_DROPPED, drop.detail)
            if attempt.watcher.saw("timeout"):
                raise _Stop(SkillStatus.TIMEOUT, f"step budget of {attempt.goal.step_budget} control steps used up "
                                                 f"in phase {attempt.phase}")

    def _phase(self, name: str) -> None:
        if self._attempt is not None:
            self._attempt.phase = name
            self._attempt.progress(name, self._attempt.steps, self._attempt.distance)

    def _held(self) -> str:
        with self.lock:
            return self.backend.held_object() or ""

    def _spec(self) -> SceneSpec:
        spec = getattr(self.backend, "spec", None)
        if not isinstance(spec, SceneSpec):
            raise BackendError(f"the privileged skills need a backend exposing its scene spec; "
                               f"{type(self.backend).__name__} does not")
        return spec

    def _base(self) -> tuple[float, float, float]:
        with self.lock:
            base = self.backend.robot_state().base
        return base.position[0], base.position[1], base.yaw

    # ---- arm ---------------------------------------------------------------------------------------------------
    def _joint_state(self) -> tuple[tuple[float, float, float], dict[str, float]]:
        with self.lock:
            state = self.backend.robot_state()
        joints = dict(zip(state.joint_names, state.joint_positions))
        return (state.base.position[0], state.base.position[1], state.base.yaw), joints

    def _arm_error(self, target: np.ndarray) -> float:
        _, joints = self._joint_state()
        return float(np.max(np.abs(np.array([joints[name] for name in fetch_model.ARM_JOINTS]) - target)))

    def _move_arm(self, arm: Sequence[float], torso: float | None = None, settle: int = 5,
                  must_arrive: bool = False) -> None:
        """Drive the arm (and torso) to joint targets, interpolating at `arm_speed` per control step.

        Raises:
            _Stop: UNREACHABLE when `must_arrive` and a joint stays more than 0.35 rad off (blocked by furniture).
        """
        _, joints = self._joint_state()
        start = np.array([joints[name] for name in fetch_model.ARM_JOINTS])
        target = np.asarray(arm, dtype=float)
        steps = max(1, int(math.ceil(float(np.max(np.abs(target - start))) / self.config.arm_speed)))
        if torso is not None:
            with self.lock:
                self.backend.set_torso_target(torso)
        for fraction in np.linspace(1.0 / steps, 1.0, steps):
            with self.lock:
                self.backend.set_arm_targets(start + fraction * (target - start))
            self._tick()
        for _ in range(settle):
            if self._arm_error(target) < 0.03:
                return
            self._tick()
        if must_arrive and self._arm_error(target) > 0.35:
            raise _Stop(SkillStatus.UNREACHABLE, f"the arm is blocked {self._arm_error(target):.2f} rad short of its "
                                                 "target")

    def _collision_checker(self) -> ArmCollisionChecker | None:
        """The checker for the current scene (rebuilt when the backend compiled a new model); None without MuJoCo."""
        model = getattr(self.backend, "model", None)
        if self._checker is None or self._checker.model is not model:
            try:
                self._checker = ArmCollisionChecker(self.backend)
            except TypeError:
                return None
        return self._checker

    def _collides(self, arm: Sequence[float], torso: float) -> bool:
        checker = self._collision_checker()
        if checker is None:
            return False
        with self.lock:
            return checker.collides(arm, torso)

    def _route_arm(self, arm: Sequence[float], torso: float, must_arrive: bool = False) -> None:
        """Move to a configuration, through via poses when the straight joint move would hit furniture."""
        checker = self._collision_checker()
        _, joints = self._joint_state()
        start = (tuple(joints[name] for name in fetch_model.ARM_JOINTS), joints[fetch_model.TORSO_JOINT])
        goal = (tuple(arm), torso)
        route: list[tuple[tuple[float, ...], float]] = [goal]
        if checker is not None:
            candidates = [[goal]] + [[via, goal] for via in VIA_POSES] + \
                [[first, second, goal] for first in VIA_POSES for second in VIA_POSES if first is not second]
            with self.lock:
                for candidate in candidates:
                    points = [start, *candidate]
                    if all(checker.segment_free(a[0], a[1], b[0], b[1]) for a, b in zip(points, points[1:])):
                        route = candidate
                        break
        for index, (joints_target, torso_target) in enumerate(route):
            last = index == len(route) - 1
            self._move_arm(joints_target, torso_target, settle=5 if last else 1, must_arrive=must_arrive and last)

    def _reset_arm(self) -> None:
        """The reset before every attempt: fingers open unless holding, torso down, arm tucked."""
        self._phase("reset_arm")
        with self.lock:
            if not self.backend.held_object():
                self.backend.open_gripper()
        self._route_arm(fetch_model.TUCKED_ARM, TUCKED_TORSO)

    def _solve(self, position: Sequence[float] | np.ndarray, rotations: Sequence[np.ndarray],
               collision_free: bool = False) -> tuple[tuple[float, ...], float, np.ndarray]:
        """Arm joints, torso lift and the rotation used, for the grasp point at `position` (rotations in turn).

        Raises:
            _Stop: UNREACHABLE when no rotation converges (to a collision-free configuration if asked).
        """
        base, joints = self._joint_state()
        closest = math.inf
        colliding = 0
        for rotation in rotations:
            self.ik.set_robot(base, joints)
            solution = self.ik.solve(position, rotation)
            if solution.converged:
                if collision_free and self._collides(solution.arm, solution.torso):
                    colliding += 1
                    continue
                return solution.arm, solution.torso, rotation
            closest = min(closest, solution.position_error)
        if colliding:
            raise _Stop(SkillStatus.UNREACHABLE, f"every arm configuration reaching ({position[0]:.2f}, "
                                                 f"{position[1]:.2f}, {position[2]:.2f}) hits furniture")
        raise _Stop(SkillStatus.UNREACHABLE, f"no arm configuration reaches ({position[0]:.2f}, {position[1]:.2f}, "
                                             f"{position[2]:.2f}); closest {closest:.3f} m off")

    def _line(self, start: np.ndarray, end: np.ndarray, rotation: np.ndarray, pieces: int,
              must_arrive: bool = True) -> None:
        """Move the grasp point along a straight segment in `pieces` IK steps."""
        for fraction in np.linspace(1.0 / pieces, 1.0, pieces):
            arm, torso, _ = self._solve(start + fraction * (end - start), [rotation])
            self._move_arm(arm, torso, settle=2, must_arrive=must_arrive and fraction == 1.0)

    def _approach(self, point: np.ndarray, rotations: Sequence[np.ndarray],
                  back: float = 0.10) -> tuple[np.ndarray, np.ndarray]:
        """Go to `back` metres before `point` along the approach of the first rotation that reaches both, with a
        collision-free configuration before the target.

        Returns:
            (rotation, the point before the target).
        """
        base, joints = self._joint_state()
        for rotation in rotations:
            before = point - back * rotation[:, 0]
            self.ik.set_robot(base, joints)
            if not self.ik.solve(point, rotation).converged:
                continue
            self.ik.set_robot(base, joints)
            solution = self.ik.solve(before, rotation)
            if solution.converged and not self._collides(solution.arm, solution.torso):
                self._route_arm(solution.arm, solution.torso, must_arrive=True)
                return rotation, before
        self._solve(point, rotations)
        raise _Stop(SkillStatus.UNREACHABLE, "no collision-free approach pose before the target")

    def _grip(self) -> tuple[np.ndarray, np.ndarray]:
        """Grasp point position and rotation matrix in the world."""
        with self.lock:
            gripper = self.backend.robot_state().gripper
        w, x, y, z = gripper.orientation
        rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                             [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                             [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
        return np.array(gripper.position), rotation

    def _retreat(self, rotation: np.ndarray, tuck: bool = False) -> None:
        """Back out along the approach (and up), then fold the arm up in front (the next reset tucks it), or tuck it
        when something is about to swing towards the robot."""
        start, _ = self._grip()
        level = abs(rotation[2, 0]) < 0.5
        end = start - 0.12 * rotation[:, 0] + np.array([0.0, 0.0, 0.03 if level else 0.10])
        try:
            self._line(start, end, rotation, 2, must_arrive=False)
        except _Stop as stop:
            if stop.status is not SkillStatus.UNREACHABLE:
                raise
        if tuck:
            self._route_arm(fetch_model.TUCKED_ARM, TUCKED_TORSO)
        else:
            self._route_arm(*VIA_POSES[0])

    # ---- scene -------------------------------------------------------------------------------------------------
    def _instance(self, name: str) -> InstanceState:
        with self.lock:
            states = self.backend.object_states([name])
        exact = [state for state in states if state.name == name]
        return (exact or states)[0]

    def _container(self, name: str) -> ContainerState:
        with self.lock:
            states = self.backend.container_states([name])
        exact = [state for state in states if state.name == name]
        return (exact or states)[0]

    def _furniture_of(self, name: str) -> Furniture | None:
        """The furniture an instance is, belongs to (a door or drawer), or rests on or in (an object)."""
        spec = self._spec()
        item = spec.item(name)
        if isinstance(item, Furniture):
            return item
        if isinstance(item, Articulation):
            return spec.owner_of(item.name)
        state = self._instance(name)
        if state.kind == "object" and state.receptacle:
            return self._furniture_of(state.receptacle)
        return None

    # ---- navigation --------------------------------------------------------------------------------------------
    def _planner(self) -> GridPlanner:
        with self.lock:
            grid = self.backend.occupancy_grid(self.config.grid_resolution)
        return GridPlanner(grid, self.config.robot_radius + self.config.clearance)

    @staticmethod
    def _cells(planner: GridPlanner) -> tuple[np.ndarray, np.ndarray]:
        grid = planner.grid
        rows, columns = grid.shape
        return np.meshgrid(grid.origin[0] + (np.arange(columns) + 0.5) * grid.resolution,
                           grid.origin[1] + (np.arange(rows) + 0.5) * grid.resolution)

    @staticmethod
    def _best_cell(field_: GeodesicField, cost: np.ndarray) -> tuple[int, int] | None:
        """Reachable cell of least cost (ties: the shorter drive)."""
        total = np.where(field_.reachable(), cost + 0.05 * field_.distances, np.inf)
        if not np.isfinite(total).any():
            return None
        row, column = np.unravel_index(int(np.argmin(total)), total.shape)
        return int(column), int(row)

    @staticmethod
    def _local(piece: Furniture, gx: np.ndarray, gy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c, s = math.cos(piece.pose.yaw), math.sin(piece.pose.yaw)
        return c * (gx - piece.pose.x) + s * (gy - piece.pose.y), -s * (gx - piece.pose.x) + c * (gy - piece.pose.y)

    def _front_penalty(self, piece: Furniture | None, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
        """Extra cost of standing beside or behind furniture that is used from its front."""
        if piece is None or piece.model not in FRONT_MODELS:
            return np.zeros_like(gx)
        u, v = self._local(piece, gx, gy)
        behind = np.maximum(v + piece.size[1] / 2, 0.0)
        beside = np.maximum(np.abs(u) - piece.size[0] / 2 + 0.1, 0.0)
        return 3.0 * behind + 2.0 * beside

    def _spot_cost(self, target: str, planner: GridPlanner) -> tuple[np.ndarray, tuple[float, float] | None]:
        """Per-cell cost of standing there for `target`, and the point to face."""
        spec = self._spec()
        gx, gy = self._cells(planner)
        item = spec.item(target)
        if isinstance(item, Articulation):
            handle = self._container(item.name).handle
            point = (handle[0], handle[1])
            return np.hypot(gx - point[0], gy - point[1]) + self._front_penalty(spec.owner_of(item.name), gx, gy), point
        if isinstance(item, Furniture):
            if item.model in FRONT_MODELS:
                c, s = math.cos(item.pose.yaw), math.sin(item.pose.yaw)
                point = (item.pose.x + s * item.size[1] / 2, item.pose.y - c * item.size[1] / 2)
                return np.hypot(gx - point[0], gy - point[1]) + self._front_penalty(item, gx, gy), point
            u, v = self._local(item, gx, gy)
            footprint = np.hypot(np.maximum(np.abs(u) - item.size[0] / 2, 0.0),
                                 np.maximum(np.abs(v) - item.size[1] / 2, 0.0))
            return footprint, (item.pose.x, item.pose.y)
        state = self._instance(target)
        point = (state.pose.position[0], state.pose.position[1])
        distance = np.hypot(gx - point[0], gy - point[1])
        if state.kind == "room":
            return distance, None
        return distance + self._front_penalty(self._furniture_of(target), gx, gy), point

    def _navigate(self, goal: SkillGoal) -> tuple[SkillStatus, str]:
        self._phase("plan")
        x, y, _ = self._base()
        planner = self._planner()
        field_ = planner.geodesic_from(x, y)
        if field_ is None:
            return SkillStatus.NO_PATH, "the robot is boxed in: no free cell around the base"
        cost, face = self._spot_cost(goal.target, planner)
        spot = self._best_cell(field_, cost)
        if spot is None:
            return SkillStatus.NO_PATH, f"no reachable standing spot near {goal.target}"
        spot_xy = planner.grid.center_of(*spot)
        self._drive(planner, field_, spot, face)
        bx, by, _ = self._base()
        distance = math.dist((bx, by), spot_xy)
        attempt = self._attempt
        if attempt is not None:
            attempt.distance = distance
            contact = next((item for item in attempt.watcher.incidents if item.kind == "contact"), None)
            if contact is not None:
                return SkillStatus.COLLISION, contact.detail
        if distance >= self.config.nav_success_distance:
            return SkillStatus.TIMEOUT, f"ended {distance:.2f} m from the standing spot"
        return SkillStatus.SUCCEEDED, ""

    def _drive(self, planner: GridPlanner, field_: GeodesicField, spot: tuple[int, int],
               face: tuple[float, float] | None) -> None:
        """Follow the path to `spot`, then turn towards `face`."""
        x, y, _ = self._base()
        waypoints = planner.path(field_, spot, (x, y))
        if not waypoints:
            raise _Stop(SkillStatus.NO_PATH, "no path to the standing spot")
        goal_xy = waypoints[-1]
        final_yaw = None if face is None else math.atan2(face[1] - goal_xy[1], face[0] - goal_xy[0])
        controller = BaseController(waypoints, final_yaw, self.config.controller)
        self._phase("drive")
        while True:
            bx, by, yaw = self._base()
            if self._attempt is not None:
                self._attempt.distance = math.dist((bx, by), goal_xy)
            command = controller.command(bx, by, yaw)
            if command is None:
                break
            with self.lock:
                self.backend.set_base_velocity(*command)
            self._tick()
        with self.lock:
            self.backend.set_base_velocity(0.0, 0.0)
        self._tick()

    def _go_near(self, point: tuple[float, float], min_distance: float, max_distance: float,
                 piece: Furniture | None = None, forbidden: Area | None = None,
                 face: tuple[float, float] | None = None, preferred: float | None = None) -> None:
        """Reposition the base (inside the attempt) to stand `min_distance`..`max_distance` from `point`.

        Ends facing `face` (default: `point`), preferably `preferred` metres from `point`. Stays put when already
        there; prefers the front of `piece`; never ends inside `forbidden`.
        """
        face = face or point
        x, y, yaw = self._base()
        here = math.dist((x, y), point)
        facing = abs(wrap_angle(math.atan2(face[1] - y, face[0] - x) - yaw)) < 0.2
        penalty = float(self._front_penalty(piece, np.array([x]), np.array([y]))[0])
        clear = forbidden is None or not bool(forbidden(np.array([x]), np.array([y]))[0])
        if min_distance <= here <= max_distance and facing and clear and penalty < 0.05:
            return
        self._phase("position_base")
        planner = self._planner()
        field_ = planner.geodesic_from(x, y)
        if field_ is None:
            raise _Stop(SkillStatus.NO_PATH, "the robot is boxed in")
        gx, gy = self._cells(planner)
        distance = np.hypot(gx - point[0], gy - point[1])
        allowed = (distance >= min_distance) & (distance <= max_distance)
        if forbidden is not None:
            allowed &= ~forbidden(gx, gy)
        if preferred is None:
            preferred = min_distance + 0.4 * (max_distance - min_distance)
        cost = np.where(allowed, np.abs(distance - preferred) + self._front_penalty(piece, gx, gy), np.inf)
        spot = self._best_cell(field_, cost)
        if spot is None:
            raise _Stop(SkillStatus.UNREACHABLE, f"no free standing spot {min_distance:.2f}-{max_distance:.2f} m from "
                                                 f"({point[0]:.2f}, {point[1]:.2f})")
        self._drive(planner, field_, spot, face)

    # ---- pick --------------------------------------------------------------------------------------------------
    @staticmethod
    def _rotations(yaw: float, level: bool) -> list[np.ndarray]:
        pitches = (0.0, 0.3, 0.6) if level else (math.pi / 2, 1.2, 0.9, 0.6, 0.3)
        return [grasp_rotation(yaw, pitch) for pitch in pitches]

    @staticmethod
    def _reached_level(surface: Surface | None) -> bool:
        """Whether things on a region are reached with a level gripper: the region has a board or shelf close above
        it (fridge and cabinet shelves, open shelving); a drawer is pulled out from under the top, so it is not."""
        return surface is not None and surface.part is None and surface.clearance < LEVEL_BELOW_CLEARANCE

    def _surface_of(self, state: InstanceState) -> Surface | None:
        spec = self._spec()
        item = spec.item(state.receptacle)
        piece = spec.owner_of(item.name) if isinstance(item, Articulation) else item
        return piece.geometry.surface(state.surface) if isinstance(piece, Furniture) else None

    def _pick(self, goal: SkillGoal) -> tuple[SkillStatus, str]:
        if self._held():
            return SkillStatus.GRASP_FAILED, f"the hand already holds {self._held()}"
        state = self._instance(goal.target)
        if state.kind != "object":
            return SkillStatus.UNKNOWN_TARGET, f"{goal.target} is not a graspable object"
        centre = np.array(state.pose.position)
        self._go_near((centre[0], centre[1]), 0.4, self.config.reach, self._furniture_of(state.name))
        x, y, _ = self._base()
        yaw = math.atan2(centre[1] - y, centre[0] - x)
        level = self._reached_level(self._surface_of(state))
        grasp_point = centre.copy()
        grasp_point[2] = max(centre[2], centre[2] + state.size[2] / 2 - 0.03)
        self._phase("approach")
        rotation, before = self._approach(grasp_point, self._rotations(yaw, level))
        self._phase("grasp")
        self._line(before, grasp_point, rotation, 2)
        with self.lock:
            grasped = self.backend.close_gripper(self.config.grasp_distance)
        self._tick(2)
        if grasped != state.name:
            if grasped is not None:
                with self.lock:
                    self.backend.open_gripper()
            self._retreat(rotation)
            if grasped is None:
                return SkillStatus.GRASP_FAILED, f"nothing within {self.config.grasp_distance:g} m of the grasp point"
            return SkillStatus.GRASP_FAILED, f"grasped {grasped} instead of {state.name}"
        if self._attempt is not None:
            self._attempt.watcher.held = grasped
        self._phase("lift")
        self._retreat(rotation)
        if self._held() != state.name:
            return SkillStatus.OBJECT_DROPPED, f"{state.name} is no longer held"
        return SkillStatus.SUCCEEDED, ""

    # ---- put ---------------------------------------------------------------------------------------------------
    def _put(self, goal: SkillGoal) -> tuple[SkillStatus, str]:
        held = self._held()
        if not held:
            return SkillStatus.PLACE_FAILED, "the hand is empty"
        place = goal.place or goal.target
        regions = self._regions(place)
        if not regions:
            return SkillStatus.PLACE_FAILED, f"{place} offers no open region to put things on or in"
        obj = self._instance(held)
        # Onto an object (a bowl): its centre, which other objects may not keep clear of.
        onto_object = not isinstance(self._spec().item(place), (Furniture, Articulation))
        spots = ([(region, region.center) for region in regions] if onto_object
                 else self._free_spots(regions, obj, self._base()[:2]))
        if not spots:
            return SkillStatus.PLACE_FAILED, f"no free spot on {place}"
        # Try the best few spots until one has a free standing place within reach.
        for index, (region, point) in enumerate(spots[:4]):
            try:
                self._go_near((point[0], point[1]), 0.4, self.config.reach - 0.05, region.furniture)
                break
            except _Stop as stop:
                if stop.status is not SkillStatus.UNREACHABLE or index == min(3, len(spots) - 1):
                    raise
        if not onto_object:
            region, point = (self._free_spots([region], obj, self._base()[:2]) or [(region, point)])[0]
        x, y, _ = self._base()
        yaw = math.atan2(point[1] - y, point[0] - x)
        level = self._reached_level(region.surface)
        grip, grip_rotation = self._grip()
        offset = grip_rotation.T @ (np.array(self._instance(held).pose.position) - grip)
        target = np.array([point[0], point[1], point[2] + obj.size[2] / 2 + 0.02])
        self._phase("approach")
        chosen = None
        for rotation in self._rotations(yaw, level):
            try:
                chosen = self._approach(target - rotation @ offset, [rotation])
                break
            except _Stop as stop:
                if stop.status is not SkillStatus.UNREACHABLE:
                    raise
        if chosen is None:
            self._route_arm(fetch_model.TUCKED_ARM, TUCKED_TORSO)
            return SkillStatus.UNREACHABLE, f"cannot hold {held} over {region.receptacle}"
        rotation, before = chosen
        self._phase("release")
        self._line(before, target - rotation @ offset, rotation, 2)
        if self._attempt is not None:
            self._attempt.watcher.release_allowed = True
        with self.lock:
            self.backend.open_gripper()
        self._tick(5)
        self._retreat(rotation)
        return self._placed(held, region)

    def _regions(self, place: str) -> list[layout.WorldSurface]:
        """Support regions of the receptacle, moved with their drawer; inside regions only behind an open door."""
        spec = self._spec()
        item = spec.item(place)
        surfaces = layout.world_surfaces(spec)
        if isinstance(item, Articulation):
            state = self._container(item.name)
            if not state.is_open:
                return []
            return [self._moved(region, state) for region in surfaces if region.receptacle == item.name]
        if not isinstance(item, Furniture):
            return self._object_region(place)
        own = [region for region in surfaces if region.furniture.name == item.name and region.surface.part is None]
        outside = [region for region in own if not region.surface.inside]
        if outside:
            return outside
        doors = [self._container(articulation.name) for articulation in item.articulations]
        if doors and not all(door.is_open for door in doors):
            return []
        return own

    def _object_region(self, name: str) -> list[layout.WorldSurface]:
        """An object used as the place ("put the banana in the bowl"): the top of its bounding box, a small region
        around its centre, on the furniture it rests on. Empty when the object stands on no furniture."""
        state = self._instance(name)
        piece = self._furniture_of(state.name) if state.kind == "object" else None
        if piece is None:
            return []
        top = state.pose.position[2] + state.size[2] / 2
        half = (max(state.size[0] / 2 - 0.02, 0.01), max(state.size[1] / 2 - 0.02, 0.01))
        surface = Surface(f"on_{state.name}", (0.0, 0.0, top), half, False, OBJECT_PLACE_CLEARANCE)
        return [layout.WorldSurface(piece, surface, state.name, (state.pose.position[0], state.pose.position[1], top),
                                    half, 0.0)]

    @staticmethod
    def _moved(region: layout.WorldSurface, state: ContainerState) -> layout.WorldSurface:
        """A drawer region at the drawer's current opening."""
        piece = region.furniture
        articulation = piece.articulation_for_slot(region.surface.part or "")
        if articulation is None:
            return region
        moving = next(part for part in piece.geometry.moving if part.key == articulation.slot)
        delta = state.position - articulation.initial
        c, s = math.cos(piece.pose.yaw), math.sin(piece.pose.yaw)
        local = np.asarray(moving.axis) * delta
        center = (region.center[0] + c * local[0] - s * local[1], region.center[1] + s * local[0] + c * local[1],
                  region.center[2] + local[2])
        return layout.WorldSurface(region.furniture, region.surface, region.receptacle, center, region.half, region.yaw)

    def _free_spots(self, regions: Sequence[layout.WorldSurface], obj: InstanceState,
                    base: tuple[float, float]) -> list[tuple[layout.WorldSurface, tuple[float, float, float]]]:
        """Spots on the regions clear of other objects, best first (near the robot, at a comfortable height), at
        least 0.3 m apart."""
        with self.lock:
            others = [state for state in self.backend.object_states() if state.kind == "object"
                      and state.name != obj.name]
        radius = math.hypot(obj.size[0], obj.size[1]) / 2
        scored: list[tuple[float, layout.WorldSurface, tuple[float, float, float]]] = []
        for region in regions:
            if region.surface.clearance < obj.size[2] + 0.03:
                continue
            margin_u, margin_v = region.half[0] - radius, region.half[1] - radius
            if margin_u < 0 or margin_v < 0:
                continue
            near = [other for other in others if abs(other.pose.position[2] - region.center[2]) < 0.35]
            for u in np.linspace(-margin_u, margin_u, max(2, int(2 * margin_u / 0.05) + 1)):
                for v in np.linspace(-margin_v, margin_v, max(2, int(2 * margin_v / 0.05) + 1)):
                    x, y = region.to_world(float(u), float(v))
                    if any(math.dist((x, y), other.pose.position[:2]) <
                           radius + math.hypot(other.size[0], other.size[1]) / 2 + 0.03 for other in near):
                        continue
                    score = math.dist((x, y), base) + 0.5 * abs(region.center[2] - 0.85)
                    scored.append((score, region, (x, y, region.center[2])))
        scored.sort(key=lambda item: item[0])
        chosen: list[tuple[layout.WorldSurface, tuple[float, float, float]]] = []
        for _, region, point in scored:
            if all(math.dist(point[:2], other[:2]) >= 0.3 for _, other in chosen):
                chosen.append((region, point))
        return chosen

    def _placed(self, name: str, region: layout.WorldSurface) -> tuple[SkillStatus, str]:
        if self._held() == name:
            return SkillStatus.PLACE_FAILED, f"{name} is still in the gripper"
        self._tick(3)
        position = np.array(self._instance(name).pose.position)
        u, v = region.to_local(position[0], position[1])
        du, dv = max(abs(u) - region.half[0], 0.0), max(abs(v) - region.half[1], 0.0)
        dz = position[2] - region.center[2]
        distance = math.sqrt(du * du + dv * dv + min(dz, 0.0) ** 2 + max(dz - 0.3, 0.0) ** 2)
        if distance > self.config.place_success_distance:
            return SkillStatus.PLACE_FAILED, f"{name} came to rest {distance:.2f} m from {region.receptacle}"
        return SkillStatus.SUCCEEDED, ""

    # ---- open / close ------------------------------------------------------------------------------------------
    def _open(self, goal: SkillGoal) -> tuple[SkillStatus, str]:
        return self._articulate(goal, opening=True)

    def _close(self, goal: SkillGoal) -> tuple[SkillStatus, str]:
        return self._articulate(goal, opening=False)

    def _articulate(self, goal: SkillGoal, opening: bool) -> tuple[SkillStatus, str]:
        if self._held():
            return SkillStatus.UNREACHABLE, f"the hand holds {self._held()}"
        state = self._container(goal.target)
        piece = self._spec().owner_of(state.name)
        if piece is None:
            return SkillStatus.UNKNOWN_TARGET, f"{state.name} belongs to no furniture"
        if (opening and state.is_open) or (not opening and state.position <= state.lower + 0.03):
            return SkillStatus.SUCCEEDED, ""  # already past the threshold (or closed): nothing to drive
        if opening:
            target = min(self.config.hinge_open if state.joint_type == "hinge" else self.config.slide_open,
                         state.upper - 0.02)
        else:
            target = state.lower
        push_shut = state.joint_type == "hinge" and state.position > 0.3 and not opening
        # An open door is pushed shut from the inner face of its free edge; everything else is taken by the handle.
        touch, normal = self._contact_point(state, piece, push_shut)
        # A drawer comes towards the robot: stand beyond its travel so it can slide out without a second move.
        away = 0.6
        if state.joint_type == "slide":
            away = max(away, target - state.position + self.config.robot_radius + self.config.clearance + 0.04)
        try:
            # Square in front of the contact point, so the fingers meet it head on.
            stance = (touch[0] + away * normal[0], touch[1] + away * normal[1])
            self._go_near(stance, 0.0, 0.12, face=(touch[0], touch[1]))
        except _Stop as stop:
            if stop.status is not SkillStatus.UNREACHABLE:
                raise
            self._go_near((touch[0], touch[1]), 0.45, self.config.reach - 0.15, None if push_shut else piece)
        x, y, _ = self._base()
        yaw = math.atan2(touch[1] - y, touch[0] - x)
        self._phase("reach_handle")
        rotation, before = self._approach(touch, self._rotations(yaw, level=True), back=0.08)
        self._line(before, touch, rotation, 2, must_arrive=False)
        self._phase("retract")
        self._retreat(rotation, tuck=True)
        centre, radius, inside = self._travel_area(state, piece, target)
        self._go_near(centre, radius, radius + 0.7, piece, inside, face=(touch[0], touch[1]), preferred=radius + 0.05)
        self._phase("drive_joint")
        # Ramp the joint target over eight control steps (the part follows it smoothly; hinged doors are critically
        # damped), then wait until the part has stayed past its threshold (or closed) for three control steps.
        start = self._container(state.name).position
        for fraction in np.linspace(0.125, 1.0, 8):
            with self.lock:
                self.backend.set_container_target(state.name, start + fraction * (target - start))
            self._tick()
        steady = 0
        while steady < 3:
            self._tick()
            position = self._container(state.name).position
            arrived = position >= state.open_threshold + 0.05 if opening else position <= state.lower + 0.03
            steady = steady + 1 if arrived else 0
        final = self._container(state.name)
        if opening and not final.is_open:
            return SkillStatus.JOINT_NOT_MOVED, f"{state.name} at {final.position:.2f}, open from {final.open_threshold}"
        if not opening and final.position > final.lower + 0.05:
            return SkillStatus.JOINT_NOT_MOVED, f"{state.name} still at {final.position:.2f}"
        return SkillStatus.SUCCEEDED, ""

    @staticmethod
    def _moving_part(state: ContainerState, piece: Furniture) -> MovingPart:
        return next(part for part in piece.geometry.moving
                    if (articulation := piece.articulation_for_slot(part.key)) is not None
                    and articulation.name == state.name)

    def _contact_point(self, state: ContainerState, piece: Furniture,
                       inner: bool) -> tuple[np.ndarray, tuple[float, float]]:
        """Where the gripper touches the part (its handle, or the inner face of a door's free edge) and the
        horizontal normal pointing from there towards where the robot should stand, at the part's current position.
        """
        moving = self._moving_part(state, piece)
        if not inner:
            angle = state.position * float(np.sign(moving.axis[2])) if state.joint_type == "hinge" else 0.0
            local_normal = (math.sin(angle), -math.cos(angle))
            yaw = piece.pose.yaw
            normal = (math.cos(yaw) * local_normal[0] - math.sin(yaw) * local_normal[1],
                      math.sin(yaw) * local_normal[0] + math.cos(yaw) * local_normal[1])
            return np.array(state.handle), normal
        inner_y = max(box.center[1] + box.half[1] for box in moving.boxes) + 0.03
        local = np.array([moving.handle[0], inner_y, moving.handle[2]])
        pivot = np.asarray(moving.pivot)
        angle = state.position * float(np.sign(moving.axis[2]))
        c, s = math.cos(angle), math.sin(angle)
        rel = local - pivot
        rotated = pivot + np.array([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1], rel[2]])
        local_normal = (-s, c)  # the door's inner side, local +y turned with the door
        yaw = piece.pose.yaw
        normal = (math.cos(yaw) * local_normal[0] - math.sin(yaw) * local_normal[1],
                  math.sin(yaw) * local_normal[0] + math.cos(yaw) * local_normal[1])
        return np.array(layout.local_to_world(piece, tuple(rotated))), normal

    def _travel_area(self, state: ContainerState, piece: Furniture,
                     target: float) -> tuple[tuple[float, float], float, Area]:
        """Where the base must not stand while the part moves: (reference point, minimum distance, area test)."""
        moving = self._moving_part(state, piece)
        margin = self.config.robot_radius + self.config.clearance
        pivot = layout.local_to_world(piece, moving.pivot)
        if state.joint_type == "slide":
            travel = max(target, state.position)
            front = -piece.size[1] / 2

            def in_travel(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
                _, v = self._local(piece, gx, gy)
                return v > front - travel - margin

            return (pivot[0], pivot[1]), travel + margin, in_travel
        radius = math.hypot(moving.handle[0] - moving.pivot[0], moving.handle[1] - moving.pivot[1]) + 0.1 + margin

        def in_swing(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
            return np.hypot(gx - pivot[0], gy - pivot[1]) < radius

        return (pivot[0], pivot[1]), radius, in_swing

    # ---- injected failures -------------------------------------------------------------------------------------
    def _injected(self, goal: SkillGoal, drop: bool) -> tuple[SkillStatus, str]:
        """A failure drawn by the failure model: nothing moves, except a dropped object for Put."""
        held = self._held()
        if drop and held:
            if self._attempt is not None:
                self._attempt.watcher.release_allowed = True
            with self.lock:
                self.backend.open_gripper()
            self._tick(5)
            return SkillStatus.INJECTED_FAILURE, f"failure model: {held} dropped"
        return SkillStatus.INJECTED_FAILURE, f"failure model: {goal.skill} attempt failed"
