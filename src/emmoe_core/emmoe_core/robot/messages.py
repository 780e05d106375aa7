"""QueryScene <-> SceneSnapshot: the one conversion between the privileged scene and its ROS interface.

The bridge fills /sim/query_scene responses with `snapshot_to_query`; the executor and the monitor read them with
`snapshot_from_query`. Doors and drawers are listed among the response's objects too (kind "container"), as their
own instances; the snapshot keeps them apart (`SceneSnapshot.parts`). QueryScene carries no handle positions,
support-region names or part labels: a snapshot read from a response has NaN handles, empty surfaces and the label
of its joint type.
"""

from __future__ import annotations

from typing import Any

from emmoe_interfaces.msg import ContainerState as ContainerStateMessage
from emmoe_interfaces.msg import ObjectState
from emmoe_interfaces.srv import QueryScene

from emmoe_core.robot.scene import SceneSnapshot, assemble
from emmoe_core.robot.state import INSTANCE_KINDS, ContainerState, InstanceState, Pose


def fill_pose(message: Any, pose: Pose) -> Any:
    """Write a pose into a geometry_msgs/Pose message and return the message."""
    message.position.x, message.position.y, message.position.z = (float(v) for v in pose.position)
    w, x, y, z = pose.orientation
    message.orientation.w, message.orientation.x = float(w), float(x)
    message.orientation.y, message.orientation.z = float(y), float(z)
    return message


def _pose(message: Any) -> Pose:
    position = (float(message.position.x), float(message.position.y), float(message.position.z))
    orientation = tuple(float(getattr(message.orientation, key)) for key in ("w", "x", "y", "z"))
    return Pose(position, orientation)  # type: ignore[arg-type]


def _object_message(state: InstanceState) -> ObjectState:
    message = ObjectState(name=state.name, canonical=state.canonical, kind=state.kind, on=state.receptacle,
                          inside=state.inside, distance=float(state.distance))
    fill_pose(message.pose, state.pose)
    message.size.x, message.size.y, message.size.z = (float(v) for v in state.size)
    return message


def snapshot_to_query(snapshot: SceneSnapshot, response: QueryScene.Response) -> QueryScene.Response:
    """Fill a successful QueryScene response from a snapshot."""
    fill_pose(response.robot_pose, Pose.from_yaw(*snapshot.robot_position, 0.0, snapshot.robot_yaw))
    response.held_object = snapshot.held_object
    response.contact_force = float(snapshot.contact_force)
    response.objects.extend(_object_message(state) for state in (*snapshot.objects, *snapshot.parts))
    for part in snapshot.containers:
        response.containers.append(ContainerStateMessage(
            name=part.name, canonical=part.canonical, furniture=part.furniture, joint_type=part.joint_type,
            position=float(part.position), lower_limit=float(part.lower), upper_limit=float(part.upper),
            open_threshold=float(part.open_threshold), is_open=part.is_open))
    response.success, response.error_code = True, QueryScene.Response.NONE
    return response


def snapshot_from_query(response: QueryScene.Response) -> SceneSnapshot:
    """A SceneSnapshot from a successful QueryScene response (kinds the stack does not know read as furniture)."""
    instances = [InstanceState(state.name, state.canonical,
                               state.kind if state.kind in INSTANCE_KINDS else "furniture", _pose(state.pose),
                               (float(state.size.x), float(state.size.y), float(state.size.z)), state.on, "",
                               bool(state.inside), float(state.distance))
                 for state in response.objects]
    containers = [ContainerState(part.name, part.canonical, "door" if part.joint_type == "hinge" else "drawer",
                                 part.furniture, part.joint_type, float(part.position), float(part.lower_limit),
                                 float(part.upper_limit), float(part.open_threshold))
                  for part in response.containers]
    robot = _pose(response.robot_pose)
    return assemble((robot.position[0], robot.position[1]), robot.yaw, response.held_object,
                    float(response.contact_force), instances, containers)
