"""What the MuJoCo backend looks up once per compiled model (instances, actuators, joints, sites), and the on/in
relations it reads from the simulator state."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.state import ContainerState, Pose, UnknownNameError

from habitat_bridge import layout
from habitat_bridge.backends import fetch_model, mjcf_builder
from habitat_bridge.furniture import slot_defaults
from habitat_bridge.scene_spec import Articulation, Furniture, SceneSpec

GRIP_SITE = fetch.PREFIX + fetch.GRIP_SITE
_P = fetch.PREFIX
# Torso, head, arm and finger joints: the order of RobotState.joint_names.
ACTUATED_JOINTS: tuple[str, ...] = (fetch.TORSO_JOINT, *fetch.HEAD_JOINTS, *fetch.ARM_JOINTS,
                                    *fetch.FINGER_JOINTS)
# Support-region match tolerances (metres): how far an object's bottom may sit from the plane, and how far past the
# region's edge its centre may be, to count as resting there.
_BELOW, _ABOVE, _EDGE = 0.03, 0.05, 0.04


@dataclass(frozen=True)
class Instance:
    """One named thing of the loaded scene and how to find it in the model."""

    name: str
    canonical: str
    kind: str
    body: int  # body id (-1 for rooms)
    size: tuple[float, float, float]
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelIndex:
    """Ids of one compiled model.

    Attributes:
        instances: every object, piece of furniture, door or drawer, and room.
        instance_ids: instance name -> index in `instances`.
        visible_owner: instance index -> the index it counts as when seen (a door or drawer: its furniture).
        geom_instance: geom id -> instance index (-1 for walls, floor, robot).
        cameras: view -> camera id.
        base_actuators: actuator ids of the base joints (x, y, yaw).
        arm_actuators: of the seven arm joints.
        finger_actuators: of the two fingers.
        torso_actuator: of the torso lift.
        head_actuators: of head pan and tilt.
        base_qpos: qpos addresses of the base joints.
        base_dof: dof addresses of the base joints.
        base_lag: seconds each base actuator's target lags a constant-velocity command (damping over stiffness).
        actuated_qpos: qpos addresses of ACTUATED_JOINTS.
        actuated_dof: dof addresses of ACTUATED_JOINTS.
        articulations: door or drawer name -> (furniture, articulation, qpos address, actuator id, body id).
        robot_geoms: per geom, whether it belongs to the robot.
        gripper_body: body id of the gripper link.
        grip_site: site id of the grasp point.
        grasp_equality: equality id of the weld grasp (-1 when the model has none).
        handle_equality: equality id of the handle grasp (-1 when the scene has no doors or drawers).
        actuator_gains: actuator gain and bias parameters as compiled (holding a handle makes its part passive).
        object_conaffinity: the geoms' contact affinities as compiled (grasping changes them).
    """

    instances: list[Instance]
    instance_ids: dict[str, int]
    visible_owner: np.ndarray
    geom_instance: np.ndarray
    cameras: dict[str, int]
    base_actuators: list[int]
    arm_actuators: list[int]
    finger_actuators: list[int]
    torso_actuator: int
    head_actuators: list[int]
    base_qpos: list[int]
    base_dof: list[int]
    base_lag: list[float]
    actuated_qpos: list[int]
    actuated_dof: list[int]
    articulations: dict[str, tuple[Furniture, Articulation, int, int, int]]
    robot_geoms: np.ndarray
    gripper_body: int
    grip_site: int
    grasp_equality: int
    handle_equality: int
    actuator_gains: tuple[np.ndarray, np.ndarray]
    object_conaffinity: np.ndarray


def qpos_address(model: mujoco.MjModel, joint: str) -> int:
    """qpos address of a robot joint (short name, e.g. "elbow_flex_joint") or articulation ("art/<name>").

    Raises:
        UnknownNameError: the model has no such joint.
    """
    full = joint if joint.startswith(("art/", "obj/")) else _P + joint
    joint_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, full)
    if joint_id < 0:
        raise UnknownNameError(joint)
    return int(model.jnt_qposadr[joint_id])


def index_model(model: mujoco.MjModel, spec: SceneSpec, views: tuple[str, ...]) -> ModelIndex:
    """Look up ids once per model: instances, cameras, actuators, geoms -> instances."""

    def body(name: str) -> int:
        return int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name))

    def actuator(name: str) -> int:
        return int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name))

    def dof(joint: str) -> int:
        return int(model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, _P + joint)])

    instances: list[Instance] = []
    for obj in spec.objects:
        instances.append(Instance(obj.name, obj.canonical, "object", body(mjcf_builder.object_body(obj.name)),
                                  obj.size))
    for piece in spec.furniture:
        kind = "container" if piece.articulations else "furniture"
        instances.append(Instance(piece.name, piece.canonical, kind, body(mjcf_builder.furniture_body(piece.name)),
                                  piece.size))
        for articulation in piece.articulations:
            label = slot_defaults(piece.model, articulation.slot).label
            instances.append(Instance(articulation.name, piece.canonical, "container",
                                      body(mjcf_builder.articulation_name(articulation.name)), piece.size, (label,)))
    for room in spec.rooms:
        xmin, ymin, xmax, ymax = room.bounds
        instances.append(Instance(room.name, room.canonical or room.kind, "room", -1,
                                  (xmax - xmin, ymax - ymin, mjcf_builder.CEILING_HEIGHT), (room.kind,)))
    instance_ids = {item.name: index for index, item in enumerate(instances)}
    # Doors and drawers count as their furniture in the lists of visible things.
    owners = {articulation.name: piece.name for piece in spec.furniture for articulation in piece.articulations}
    visible_owner = np.array([instance_ids[owners.get(item.name, item.name)] for item in instances], dtype=np.int32)
    body_instance = np.full(model.nbody, -1, dtype=np.int32)
    for index, item in enumerate(instances):
        if item.body >= 0:
            body_instance[item.body] = index
    base_actuators = [actuator(_P + joint) for joint in fetch.BASE_JOINTS]
    base_dof = [dof(joint) for joint in fetch.BASE_JOINTS]
    articulations: dict[str, tuple[Furniture, Articulation, int, int, int]] = {}
    for piece in spec.furniture:
        for articulation in piece.articulations:
            name = mjcf_builder.articulation_name(articulation.name)
            joint_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            articulations[articulation.name] = (piece, articulation, int(model.jnt_qposadr[joint_id]),
                                                actuator(name), body(name))
    return ModelIndex(
        instances=instances, instance_ids=instance_ids, visible_owner=visible_owner,
        geom_instance=body_instance[model.geom_bodyid],
        cameras={view: int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, _P + view)) for view in views},
        base_actuators=base_actuators,
        arm_actuators=[actuator(_P + joint) for joint in fetch.ARM_JOINTS],
        finger_actuators=[actuator(_P + joint) for joint in fetch.FINGER_JOINTS],
        torso_actuator=actuator(_P + fetch.TORSO_JOINT),
        head_actuators=[actuator(_P + joint) for joint in fetch.HEAD_JOINTS],
        base_qpos=[qpos_address(model, joint) for joint in fetch.BASE_JOINTS], base_dof=base_dof,
        base_lag=[float(model.dof_damping[index] / model.actuator_gainprm[base, 0])
                  for index, base in zip(base_dof, base_actuators)],
        actuated_qpos=[qpos_address(model, joint) for joint in ACTUATED_JOINTS],
        actuated_dof=[dof(joint) for joint in ACTUATED_JOINTS], articulations=articulations,
        robot_geoms=np.array([model.body(int(model.geom_bodyid[geom])).name.startswith(_P)
                              for geom in range(model.ngeom)]),
        gripper_body=body(_P + fetch_model.GRIPPER_BODY),
        grip_site=int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE)),
        grasp_equality=int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, mjcf_builder.GRASP_EQUALITY)),
        handle_equality=int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, mjcf_builder.HANDLE_EQUALITY)),
        actuator_gains=(model.actuator_gainprm.copy(), model.actuator_biasprm.copy()),
        object_conaffinity=model.geom_conaffinity.copy())


def resting_relations(index: ModelIndex, data: mujoco.MjData, spec: SceneSpec,
                      held: str | None) -> dict[str, tuple[str, str, bool]]:
    """Object name -> (receptacle, support region, inside) for objects resting on or in something.

    An object rests on a region when its lowest point is within a few centimetres of the region's plane and its
    centre lies over the region (drawers counted at their current opening). Held objects and objects on the
    floor are absent.
    """
    positions = {name: float(data.qpos[address]) for name, (_, _, address, _, _) in index.articulations.items()}
    regions = []
    for region in layout.world_surfaces(spec):
        offset = np.zeros(3)
        if region.surface.part is not None:
            piece = region.furniture
            articulation = piece.articulation_for_slot(region.surface.part)
            if articulation is not None:
                moving = next(part for part in piece.geometry.moving if part.key == region.surface.part)
                delta = positions[articulation.name] - articulation.initial
                local = np.asarray(moving.axis) * delta
                c, s = math.cos(piece.pose.yaw), math.sin(piece.pose.yaw)
                offset = np.array([c * local[0] - s * local[1], s * local[0] + c * local[1], local[2]])
        regions.append((region, offset))
    found: dict[str, tuple[str, str, bool]] = {}
    for item in index.instances:
        if item.kind != "object" or item.name == held:
            continue
        center = data.xpos[item.body]
        rotation = data.xmat[item.body].reshape(3, 3)
        bottom = center[2] - float(np.abs(rotation[2]) @ (np.asarray(item.size) / 2))
        best, best_gap = None, None
        for region, offset in regions:
            plane = region.center[2] + offset[2]
            gap = bottom - plane
            if not -_BELOW <= gap <= _ABOVE:
                continue
            u, v = region.to_local(center[0] - offset[0], center[1] - offset[1])
            if abs(u) > region.half[0] + _EDGE or abs(v) > region.half[1] + _EDGE:
                continue
            if best_gap is None or abs(gap) < best_gap:
                best, best_gap = region, abs(gap)
        if best is not None:
            found[item.name] = (best.receptacle, best.surface.name, best.surface.inside)
    return found


def instance_pose(spec: SceneSpec, data: mujoco.MjData, item: Instance) -> Pose:
    """Pose of an instance's bounding-box centre (a room: its floor centre)."""
    if item.kind == "room":
        room = spec.item(item.name)
        x, y = room.center  # type: ignore[union-attr]
        return Pose((x, y, 0.0))
    if item.kind == "object":
        return Pose(tuple(float(v) for v in data.xpos[item.body]),  # type: ignore[arg-type]
                    tuple(float(v) for v in data.xquat[item.body]))  # type: ignore[arg-type]
    position = data.xpos[item.body]
    quaternion = data.xquat[item.body]
    height = item.size[2] / 2
    return Pose((float(position[0]), float(position[1]), float(position[2] + height)),
                tuple(float(v) for v in quaternion))  # type: ignore[arg-type]


def container_state(index: ModelIndex, data: mujoco.MjData, name: str) -> ContainerState:
    """The state of the door or drawer `name` (a key of index.articulations)."""
    piece, articulation, address, _, body = index.articulations[name]
    moving = next(part for part in piece.geometry.moving if part.key == articulation.slot)
    handle_local = np.asarray(moving.handle) - np.asarray(moving.pivot)
    handle = data.xpos[body] + data.xmat[body].reshape(3, 3) @ handle_local
    label = slot_defaults(piece.model, articulation.slot).label
    return ContainerState(name, piece.canonical, label, piece.name, articulation.joint, float(data.qpos[address]),
                          articulation.range[0], articulation.range[1], articulation.open_threshold,
                          tuple(float(v) for v in handle))  # type: ignore[arg-type]
