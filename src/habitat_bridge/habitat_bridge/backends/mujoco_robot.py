"""The MuJoCo backend's physics stepping, grasp (a weld to the gripper) and camera views, as functions of the model
index."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import mujoco
import numpy as np
from emmoe_core.robot.state import VIEWS, BackendError, CameraView, Observation, Pose

from habitat_bridge.backends import fetch_model, mjcf_builder
from habitat_bridge.backends.mujoco_index import Instance, ModelIndex
from habitat_bridge.backends.rendering import MultiViewRenderer
from habitat_bridge.furniture import Box

# How far (m or rad) the base actuators' integrated targets may lead the real base pose beyond the tracking lag.
_WINDUP = 0.01


def run_physics(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, command: tuple[float, float],
                seconds: float, held_body: int) -> float:
    """Step `seconds` of physics with the base driven at (forward, turn); returns the largest contact force on the
    robot body seen (the held object's contacts excluded).

    Raises:
        BackendError: MuJoCo failed or the state diverged.
    """
    steps = int(round(seconds / model.opt.timestep))
    forward, turn = command
    yaw_address = index.base_qpos[2]
    activations = [int(model.actuator_actadr[actuator]) for actuator in index.base_actuators]
    peak = 0.0
    try:
        for _ in range(steps):
            yaw = data.qpos[yaw_address]
            commands = (forward * math.cos(yaw), forward * math.sin(yaw), turn)
            for actuator, value in zip(index.base_actuators, commands):
                data.ctrl[actuator] = value
            mujoco.mj_step(model, data)
            # Anti-windup: the integrated target may lead the real pose only by the lag that tracking the
            # command needs, so a blocked base does not build up a spring that later yanks it.
            for address, activation, lag, value in zip(index.base_qpos, activations, index.base_lag, commands):
                window = 1.5 * lag * abs(value) + _WINDUP
                data.act[activation] = min(max(data.act[activation], data.qpos[address] - window),
                                           data.qpos[address] + window)
            if data.ncon:
                peak = max(peak, _robot_contact_force(model, data, index, held_body))
        # Positions, cameras and contacts computed for the state the steps ended in (queries and renders).
        mujoco.mj_forward(model, data)
    except mujoco.FatalError as error:
        raise BackendError(f"MuJoCo failed while stepping: {error}") from None
    if not np.all(np.isfinite(data.qpos)):
        raise BackendError("the simulation diverged (non-finite state); reset the episode")
    return peak


def _robot_contact_force(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, held_body: int) -> float:
    geoms = data.contact.geom[: data.ncon]
    touching = index.robot_geoms[geoms[:, 0]] ^ index.robot_geoms[geoms[:, 1]]
    if not touching.any():
        return 0.0
    largest = 0.0
    wrench = np.zeros(6)
    for contact in np.nonzero(touching)[0]:
        if held_body >= 0 and held_body in (model.geom_bodyid[geoms[contact, 0]], model.geom_bodyid[geoms[contact, 1]]):
            continue
        mujoco.mj_contactForce(model, data, int(contact), wrench)
        largest = max(largest, float(abs(wrench[0])))
    return largest


def carry(model: mujoco.MjModel, data: mujoco.MjData, held: str, before: tuple[np.ndarray, np.ndarray],
          old_base: tuple[float, float, float], new_base: tuple[float, float, float]) -> None:
    """Move the held object (at `before`: position, quaternion) rigidly with a base teleported from `old_base` to
    `new_base` (x, y, yaw)."""
    old_x, old_y, old_yaw = old_base
    x, y, yaw = new_base
    turn = yaw - old_yaw
    c, s = math.cos(turn), math.sin(turn)
    dx, dy = before[0][0] - old_x, before[0][1] - old_y
    joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, mjcf_builder.object_body(held))
    address = model.jnt_qposadr[joint]
    data.qpos[address: address + 3] = (x + c * dx - s * dy, y + s * dx + c * dy, before[0][2])
    rotation = np.array([math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)])
    quaternion = np.zeros(4)
    mujoco.mju_mulQuat(quaternion, rotation, before[1])
    data.qpos[address + 3: address + 7] = quaternion


def nearest_object(index: ModelIndex, data: mujoco.MjData, max_distance: float) -> Instance | None:
    """The object whose box lies nearest the grasp point, if within `max_distance` metres."""
    grip = data.site_xpos[index.grip_site]
    best, best_distance = None, max_distance
    for item in index.instances:
        if item.kind != "object":
            continue
        rotation = data.xmat[item.body].reshape(3, 3)
        local = rotation.T @ (grip - data.xpos[item.body])
        half = np.asarray(item.size) / 2
        distance = float(np.linalg.norm(local - np.clip(local, -half, half)))
        if distance <= best_distance:
            best, best_distance = item, distance
    return best


# How far in from a door panel's free edge the fingers may close on the panel (metres): a door whose handle is out of
# reach (an open door with its outer face towards a wall) is held by its edge.
PANEL_EDGE_BAND = 0.06
# How much the fingers squeeze what they hold beyond its half width (metres per finger).
_SQUEEZE = 0.007


def holdable(box: Box, pivot: np.ndarray, joint: str, offset: np.ndarray) -> bool:
    """Whether the fingers at `offset` from `box`'s centre (its local frame) close on something they can hold: a
    handle bar anywhere, or a hinged panel near its free edge (the end of its long side away from the hinge)."""
    if box.name.endswith("_handle"):
        return True
    if joint != "hinge" or not box.name.endswith("_panel"):
        return False
    half = np.asarray(box.half)
    along = int(np.argmax(half[:2]))
    outwards = math.copysign(1.0, box.center[along] - pivot[along])
    return bool(offset[along] * outwards >= half[along] - PANEL_EDGE_BAND)


def nearest_handle(index: ModelIndex, data: mujoco.MjData, max_distance: float) -> tuple[str, float] | None:
    """The door or drawer whose handle bar (or hinged panel's free edge) lies nearest the grasp point, if within
    `max_distance` metres, and the half width the fingers close to on it."""
    grip = data.site_xpos[index.grip_site]
    best, best_distance = None, max_distance
    for name, (piece, articulation, _, _, body) in index.articulations.items():
        moving = next(part for part in piece.geometry.moving if part.key == articulation.slot)
        pivot = np.asarray(moving.pivot)
        local = data.xmat[body].reshape(3, 3).T @ (grip - data.xpos[body])
        for box in moving.boxes:
            offset = local - (np.asarray(box.center) - pivot)
            half = np.asarray(box.half)
            distance = float(np.linalg.norm(offset - np.clip(offset, -half, half)))
            if distance <= best_distance and holdable(box, pivot, moving.joint, offset):
                best, best_distance = (name, float(min(half[:2]))), distance
    return best


def hold_handle(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, name: str, width: float) -> None:
    """Hold the handle (or panel edge) of door or drawer `name` at the grasp point, the fingers closed to half width
    `width`: the part follows the hand through a point constraint, its own actuator goes slack (the hand moves it),
    and it stops colliding with the robot."""
    _, _, _, actuator, body = index.articulations[name]
    grip = data.site_xpos[index.grip_site]
    gripper = index.gripper_body
    in_gripper = data.xmat[gripper].reshape(3, 3).T @ (grip - data.xpos[gripper])
    in_part = data.xmat[body].reshape(3, 3).T @ (grip - data.xpos[body])
    equality = index.handle_equality
    model.eq_obj2id[equality] = body
    model.eq_data[equality, 0:3] = in_gripper
    model.eq_data[equality, 3:6] = in_part
    data.eq_active[equality] = 1
    model.actuator_gainprm[actuator, 0] = 0.0
    model.actuator_biasprm[actuator, 1:3] = 0.0
    part_geoms = model.geom_bodyid == body
    model.geom_conaffinity[part_geoms] = index.object_conaffinity[part_geoms] & ~fetch_model.ROBOT_BIT
    for finger in index.finger_actuators:
        data.ctrl[finger] = max(0.0, width - _SQUEEZE)
    mujoco.mj_forward(model, data)


def let_go_handle(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, name: str) -> None:
    """Release a held handle: the part's actuator holds it where it now is."""
    _, _, address, actuator, _ = index.articulations[name]
    data.eq_active[index.handle_equality] = 0
    gains, biases = index.actuator_gains
    model.actuator_gainprm[actuator] = gains[actuator]
    model.actuator_biasprm[actuator] = biases[actuator]
    data.ctrl[actuator] = data.qpos[address]
    model.geom_conaffinity[:] = index.object_conaffinity
    for finger in index.finger_actuators:
        data.ctrl[finger] = fetch_model.FINGER_OPEN


def weld(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, item: Instance) -> None:
    """Weld `item` to the gripper where it is now; it stops colliding with the robot and the fingers close onto it.

    Raises:
        BackendError: the scene has no grasp constraint (no objects).
    """
    if index.grasp_equality < 0:
        raise BackendError("this scene has no grasp constraint (it has no objects)")
    gripper = index.gripper_body
    inverse = np.zeros(4)
    mujoco.mju_negQuat(inverse, data.xquat[gripper])
    relative_position = np.zeros(3)
    mujoco.mju_rotVecQuat(relative_position, data.xpos[item.body] - data.xpos[gripper], inverse)
    relative_orientation = np.zeros(4)
    mujoco.mju_mulQuat(relative_orientation, inverse, data.xquat[item.body])
    model.eq_obj2id[index.grasp_equality] = item.body
    model.eq_data[index.grasp_equality, 0:3] = 0.0
    model.eq_data[index.grasp_equality, 3:6] = relative_position
    model.eq_data[index.grasp_equality, 6:10] = relative_orientation
    model.eq_data[index.grasp_equality, 10] = 1.0
    data.eq_active[index.grasp_equality] = 1
    # The held object no longer collides with the robot; the fingers close onto its width.
    object_geoms = model.geom_bodyid == item.body
    model.geom_conaffinity[object_geoms] = index.object_conaffinity[object_geoms] & ~fetch_model.ROBOT_BIT
    finger = max(0.0, min(fetch_model.FINGER_OPEN, min(item.size[0], item.size[1]) / 2 - 0.001))
    for actuator in index.finger_actuators:
        data.ctrl[actuator] = finger
    mujoco.mj_forward(model, data)


def release(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, held_body: int) -> None:
    """Open the fingers and drop the weld of the object with body `held_body` (-1: the hand was empty).

    The object keeps ignoring the robot until `restore_contacts` finds the hand clear of it: fingers closed on an
    object held off-centre overlap it, and contacts switched on at once would fling it off its support (the weld
    grasp sets the finger width from the object's size, so the fingers' true contact is not simulated).
    """
    for actuator in index.finger_actuators:
        data.ctrl[actuator] = fetch_model.FINGER_OPEN
    if held_body >= 0:
        data.eq_active[index.grasp_equality] = 0
        others = model.geom_bodyid != held_body
        model.geom_conaffinity[others] = index.object_conaffinity[others]
        # Held still, the object counts as ready to sleep; wake it fully so that it falls instead of hanging.
        data.tree_asleep[int(model.body_treeid[held_body])] = -(1 + mujoco.mjMINAWAKE)


def hand_geoms(model: mujoco.MjModel, index: ModelIndex) -> np.ndarray:
    """Geoms of the gripper link and the links attached to it (the fingers)."""
    bodies = [index.gripper_body, *np.flatnonzero(model.body_parentid == index.gripper_body)]
    return np.flatnonzero(np.isin(model.geom_bodyid, bodies))


def restore_contacts(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, body: int, hand: np.ndarray,
                     gap: float = 0.05) -> bool:
    """Let a released object (`body`) touch the robot again once every `hand` geom is `gap` metres clear of it;
    whether it was."""
    geoms = np.flatnonzero(model.geom_bodyid == body)
    if any(mujoco.mj_geomDistance(model, data, int(first), int(second), gap, None) < gap
           for first in hand for second in geoms):
        return False
    model.geom_conaffinity[geoms] = index.object_conaffinity[geoms]
    return True


def render_views(renderer: MultiViewRenderer, data: mujoco.MjData, index: ModelIndex, views: Sequence[str],
                 depth: bool, segmentation: bool, held: str | None, min_pixels: int,
                 distance_of: Callable[[Instance], float]) -> Observation:
    """Render known `views` (RGB, optionally depth and instance segmentation with the visible instances, nearest
    first by `distance_of`, seen with at least `min_pixels` pixels)."""
    observation = Observation(time=float(data.time), rgb={}, held_object=held,
                              instance_names=tuple(item.name for item in index.instances),
                              instance_canonicals=tuple(item.canonical for item in index.instances))
    head = [view for view in views if view in VIEWS]
    third = [view for view in views if view not in VIEWS]
    # Head views: inside the walls, without the robot body behind and below the cameras. Third-person views: a
    # cut-away without walls and ceiling, so the robot is always in sight.
    batches = ((head, (fetch_model.BODY_GROUP,), False), (third, (mjcf_builder.WALL_GROUP,), True))
    for batch, hidden, skybox in batches:
        for start in range(0, len(batch), 4):
            chunk = batch[start: start + 4]
            images = renderer.render(data, [index.cameras[view] for view in chunk], depth=depth,
                                     segmentation=segmentation, hidden_groups=hidden, skybox=skybox)
            for view, image in zip(chunk, images):
                observation.rgb[view] = image.rgb
                observation.cameras[view] = camera_view(data.model, data, index.cameras[view], image.rgb.shape)
                if image.depth is not None:
                    observation.depth[view] = image.depth
                if image.segmentation is not None:
                    instance_ids = np.where(image.segmentation >= 0,
                                            index.geom_instance[np.maximum(image.segmentation, 0)], -1)
                    observation.segmentation[view] = instance_ids.astype(np.int32)
                    observation.visible[view] = _visible(index, instance_ids, min_pixels, distance_of)
    return observation


# MuJoCo cameras look along their -z with y up; the optical frame looks along +z with y down.
_OPTICAL_FROM_MUJOCO = np.diag([1.0, -1.0, -1.0])


def camera_pose(data: mujoco.MjData, camera: int) -> tuple[tuple[float, float, float], np.ndarray]:
    """World position and optical-to-world rotation (emmoe_core.robot.state.CameraView) of a camera, from data whose
    camera poses are computed (mj_forward, or mj_kinematics and mj_camlight)."""
    rotation: np.ndarray = data.cam_xmat[camera].reshape(3, 3) @ _OPTICAL_FROM_MUJOCO
    x, y, z = (float(value) for value in data.cam_xpos[camera])
    return (x, y, z), rotation.copy()


def site_pose(data: mujoco.MjData, site: int) -> Pose:
    """World pose of a site (the grasp point)."""
    quaternion = np.zeros(4)
    mujoco.mju_mat2Quat(quaternion, data.site_xmat[site])
    x, y, z = (float(value) for value in data.site_xpos[site])
    w, qx, qy, qz = (float(value) for value in quaternion)
    return Pose((x, y, z), (w, qx, qy, qz))


def camera_view(model: mujoco.MjModel, data: mujoco.MjData, camera: int, shape: tuple[int, ...]) -> CameraView:
    """Intrinsics (square pixels, centred principal point) and world pose of a camera for an image of `shape`."""
    height, width = int(shape[0]), int(shape[1])
    focal = (height / 2.0) / math.tan(math.radians(float(model.cam_fovy[camera])) / 2.0)
    position, rotation = camera_pose(data, camera)
    return CameraView.centred(width, height, focal, position, rotation)


def _visible(index: ModelIndex, instance_ids: np.ndarray, min_pixels: int,
             distance_of: Callable[[Instance], float]) -> tuple[str, ...]:
    seen_ids = index.visible_owner[instance_ids[instance_ids >= 0].ravel()]
    counts = np.bincount(seen_ids, minlength=len(index.instances))
    seen = [index.instances[number] for number in np.nonzero(counts >= min_pixels)[0]]
    seen.sort(key=distance_of)
    return tuple(item.name for item in seen)


def planar_scan(model: mujoco.MjModel, data: mujoco.MjData, index: ModelIndex, origin: Sequence[float], yaw: float,
                angles: np.ndarray, max_range: float) -> np.ndarray:
    """Ranges of a horizontal laser at `origin` (world) facing `yaw`, mounted on the robot's base body, one per angle
    (radians, counter-clockwise from straight ahead): the distance to the first surface of the room, inf where there
    is none within `max_range` or where the ray meets the robot's arm or what it holds (a laser driver's
    self-filter)."""
    base = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, fetch_model.BASE_BODY))
    headings = yaw + np.asarray(angles, dtype=float)
    directions = np.stack([np.cos(headings), np.sin(headings), np.zeros_like(headings)], axis=1)
    geoms = np.full(len(headings), -1, dtype=np.int32)
    ranges = np.full(len(headings), -1.0)
    mujoco.mj_multiRay(model, data, np.asarray(origin, dtype=float), directions.ravel(), None, True, base, geoms,
                       ranges, None, len(headings), float(max_range))
    missed = (geoms < 0) | (ranges < 0) | (ranges > max_range)
    missed[~missed] |= index.robot_geoms[geoms[~missed]]
    return np.where(missed, np.inf, ranges)
