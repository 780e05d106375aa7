"""The remote policy protocol (version `homiebot-policy/1`): request and response types with JSON (de)serialisation.

A learned policy (NoMaD, PixNav, RT-1-X, Octo) served elsewhere receives one `PolicyRequest` per control cycle over
HTTP (`POST /v1/act`, JSON body) and answers with a `PolicyResponse` holding an action chunk: the actions to run
before the next request. `GET /v1/health` answers `{"protocol": ..., "models": [...]}`. The full specification is
docs/remote_policy_protocol.md. Every parser here raises `ProtocolError` naming the offending field.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PROTOCOL = "homiebot-policy/1"
ACT_PATH = "/v1/act"
HEALTH_PATH = "/v1/health"
ENCODINGS: dict[str, tuple[type, int]] = {"rgb8": (np.uint8, 3), "mono8": (np.uint8, 1), "32FC1": (np.float32, 1)}
SKILLS: tuple[str, ...] = ("navigate", "pick", "put", "open", "close")
STATUSES: tuple[str, ...] = ("running", "done", "error")
ACTION_TYPES: tuple[str, ...] = ("base_velocity", "base_waypoint", "ee_delta", "gripper", "stop")


class ProtocolError(ValueError):
    """A message does not follow the protocol; the text names the field."""


def _require(mapping: Any, key: str, path: str) -> Any:
    if not isinstance(mapping, Mapping):
        raise ProtocolError(f"{path or 'message'}: expected a JSON object, got {type(mapping).__name__}")
    if key not in mapping:
        raise ProtocolError(f"{path + '.' if path else ''}{key}: missing")
    return mapping[key]


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{path}: expected a string, got {type(value).__name__}")
    return value


def _integer(value: Any, path: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProtocolError(f"{path}: expected an integer >= {minimum}, got {value!r}")
    return value


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProtocolError(f"{path}: expected a finite number, got {value!r}")
    return float(value)


def _numbers(value: Any, path: str, count: int | None = None) -> tuple[float, ...]:
    if not isinstance(value, list) or (count is not None and len(value) != count):
        what = f"a list of {count} numbers" if count is not None else "a list of numbers"
        raise ProtocolError(f"{path}: expected {what}, got {value!r}")
    return tuple(_number(item, f"{path}[{index}]") for index, item in enumerate(value))


def _choice(value: Any, options: Sequence[str], path: str) -> str:
    if value not in options:
        raise ProtocolError(f"{path}: expected one of {', '.join(options)}, got {value!r}")
    chosen: str = value
    return chosen


@dataclass(frozen=True)
class WireImage:
    """An image on the wire: row-major pixels, base64 encoded.

    Attributes:
        encoding: "rgb8" (H x W x 3 uint8), "mono8" (H x W uint8) or "32FC1" (H x W float32 metres, little endian).
        width: pixels.
        height: pixels.
        data: base64 of the raw pixel bytes.
    """

    encoding: str
    width: int
    height: int
    data: str

    @classmethod
    def from_array(cls, pixels: np.ndarray) -> WireImage:
        """Encode an (H, W, 3) uint8, (H, W) uint8 or (H, W) float32 array.

        Raises:
            ProtocolError: another shape or dtype.
        """
        if pixels.ndim == 3 and pixels.shape[2] == 3 and pixels.dtype == np.uint8:
            encoding = "rgb8"
        elif pixels.ndim == 2 and pixels.dtype == np.uint8:
            encoding = "mono8"
        elif pixels.ndim == 2 and pixels.dtype == np.float32:
            encoding = "32FC1"
        else:
            raise ProtocolError(f"image: unsupported array {pixels.dtype} {pixels.shape}; expected HxWx3 uint8, "
                                "HxW uint8 or HxW float32")
        raw = np.ascontiguousarray(pixels).astype(pixels.dtype.newbyteorder("<"), copy=False).tobytes()
        return cls(encoding, int(pixels.shape[1]), int(pixels.shape[0]), base64.b64encode(raw).decode("ascii"))

    def to_array(self) -> np.ndarray:
        """Decode the pixels.

        Raises:
            ProtocolError: bad base64 or a byte count that does not match the size and encoding.
        """
        dtype, channels = ENCODINGS[self.encoding]
        try:
            raw = base64.b64decode(self.data, validate=True)
        except (binascii.Error, ValueError) as error:
            raise ProtocolError(f"image.data: invalid base64 ({error})") from None
        expected = self.width * self.height * channels * np.dtype(dtype).itemsize
        if len(raw) != expected:
            raise ProtocolError(f"image.data: {len(raw)} bytes for a {self.width}x{self.height} {self.encoding} "
                                f"image, expected {expected}")
        array: np.ndarray = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
        shape = (self.height, self.width, channels) if channels > 1 else (self.height, self.width)
        return array.reshape(shape)

    def to_json(self) -> dict[str, Any]:
        """JSON object."""
        return {"encoding": self.encoding, "width": self.width, "height": self.height, "data": self.data}

    @classmethod
    def from_json(cls, data: Any, path: str = "image") -> WireImage:
        """Parse a JSON object (pixels are decoded lazily by to_array)."""
        return cls(_choice(_require(data, "encoding", path), tuple(ENCODINGS), f"{path}.encoding"),
                   _integer(_require(data, "width", path), f"{path}.width", 1),
                   _integer(_require(data, "height", path), f"{path}.height", 1),
                   _string(_require(data, "data", path), f"{path}.data"))


@dataclass(frozen=True)
class RobotStateMessage:
    """Proprioception sent with every request.

    Attributes:
        base_pose: (x, y, yaw) in the odometry frame (metres, radians).
        base_velocity: (forward m/s, turn rad/s).
        arm_joints: the seven arm joint positions (radians), shoulder pan to wrist roll.
        torso_height: torso lift (metres).
        gripper_opening: finger opening (metres per finger, 0 closed).
        ee_position: grasp point in the base frame (metres).
        ee_orientation: grasp frame orientation in the base frame, quaternion (w, x, y, z).
        holding: whether an object is grasped.
    """

    base_pose: tuple[float, float, float]
    base_velocity: tuple[float, float]
    arm_joints: tuple[float, ...]
    torso_height: float
    gripper_opening: float
    ee_position: tuple[float, float, float]
    ee_orientation: tuple[float, float, float, float]
    holding: bool

    def to_json(self) -> dict[str, Any]:
        """JSON object."""
        return {"base_pose": list(self.base_pose), "base_velocity": list(self.base_velocity),
                "arm_joints": list(self.arm_joints), "torso_height": self.torso_height,
                "gripper_opening": self.gripper_opening, "ee_position": list(self.ee_position),
                "ee_orientation": list(self.ee_orientation), "holding": self.holding}

    @classmethod
    def from_json(cls, data: Any, path: str = "state") -> RobotStateMessage:
        """Parse a JSON object."""
        holding = _require(data, "holding", path)
        if not isinstance(holding, bool):
            raise ProtocolError(f"{path}.holding: expected true or false, got {holding!r}")
        return cls(
            base_pose=_numbers(_require(data, "base_pose", path), f"{path}.base_pose", 3),  # type: ignore[arg-type]
            base_velocity=_numbers(_require(data, "base_velocity", path), f"{path}.base_velocity", 2),  # type: ignore[arg-type]
            arm_joints=_numbers(_require(data, "arm_joints", path), f"{path}.arm_joints", 7),
            torso_height=_number(_require(data, "torso_height", path), f"{path}.torso_height"),
            gripper_opening=_number(_require(data, "gripper_opening", path), f"{path}.gripper_opening"),
            ee_position=_numbers(_require(data, "ee_position", path), f"{path}.ee_position", 3),  # type: ignore[arg-type]
            ee_orientation=_numbers(_require(data, "ee_orientation", path), f"{path}.ee_orientation", 4),  # type: ignore[arg-type]
            holding=holding)


@dataclass(frozen=True)
class Goal:
    """What the skill is after.

    Attributes:
        name: the target as named in the subtask ("apple", "fridge").
        kind: "object" or "place" (navigation), "" for arm skills.
        image: goal image (NoMaD's image goal), or None.
    """

    name: str
    kind: str = ""
    image: WireImage | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON object."""
        return {"name": self.name, "kind": self.kind, "image": self.image.to_json() if self.image else None}

    @classmethod
    def from_json(cls, data: Any, path: str = "goal") -> Goal:
        """Parse a JSON object."""
        image = _require(data, "image", path)
        return cls(_string(_require(data, "name", path), f"{path}.name"),
                   _choice(_require(data, "kind", path), ("", "object", "place"), f"{path}.kind"),
                   None if image is None else WireImage.from_json(image, f"{path}.image"))


@dataclass(frozen=True)
class PolicyRequest:
    """One control cycle's request.

    Attributes:
        model: the policy asked ("NoMaD", "PixNav", "RT-1-X", "octo").
        skill: one of SKILLS.
        session: identifier of the skill attempt (servers keep observation history per session).
        step: request number within the session, from 0.
        instruction: natural-language instruction ("pick the apple").
        goal: the goal.
        images: camera name -> image ("head" at least; "front", "left", "back", "right" when sent).
        depth: camera name -> depth image (may be empty).
        state: robot proprioception.
    """

    model: str
    skill: str
    session: str
    step: int
    instruction: str
    goal: Goal
    images: Mapping[str, WireImage]
    state: RobotStateMessage
    depth: Mapping[str, WireImage] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON object."""
        return {"protocol": PROTOCOL, "model": self.model, "skill": self.skill, "session": self.session,
                "step": self.step, "instruction": self.instruction, "goal": self.goal.to_json(),
                "observation": {"images": {name: image.to_json() for name, image in self.images.items()},
                                "depth": {name: image.to_json() for name, image in self.depth.items()},
                                "state": self.state.to_json()}}

    @classmethod
    def from_json(cls, data: Any) -> PolicyRequest:
        """Parse and validate a request.

        Raises:
            ProtocolError: naming the first invalid field.
        """
        _check_protocol(data)
        observation = _require(data, "observation", "")
        images = _image_map(_require(observation, "images", "observation"), "observation.images")
        if not images:
            raise ProtocolError("observation.images: at least one image is required")
        return cls(model=_string(_require(data, "model", ""), "model"),
                   skill=_choice(_require(data, "skill", ""), SKILLS, "skill"),
                   session=_string(_require(data, "session", ""), "session"),
                   step=_integer(_require(data, "step", ""), "step"),
                   instruction=_string(_require(data, "instruction", ""), "instruction"),
                   goal=Goal.from_json(_require(data, "goal", "")),
                   images=images,
                   depth=_image_map(observation.get("depth", {}), "observation.depth"),
                   state=RobotStateMessage.from_json(_require(observation, "state", "observation"),
                                                     "observation.state"))


def _image_map(data: Any, path: str) -> dict[str, WireImage]:
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{path}: expected a JSON object of camera name -> image")
    return {str(name): WireImage.from_json(image, f"{path}.{name}") for name, image in data.items()}


def _check_protocol(data: Any) -> None:
    version = _require(data, "protocol", "")
    if version != PROTOCOL:
        raise ProtocolError(f"protocol: expected {PROTOCOL!r}, got {version!r}")


@dataclass(frozen=True)
class PolicyAction:
    """One action of a chunk.

    Types and their fields:
    - "base_velocity": `linear` (m/s), `angular` (rad/s), `duration` (s).
    - "base_waypoint": `x`, `y` (metres, robot frame at request time), `yaw` (radians or None), NoMaD-style.
    - "ee_delta": `translation` (dx, dy, dz metres, base frame), `rotation` (droll, dpitch, dyaw radians),
      `gripper` (1 open ... 0 closed, or None to keep), RT-1-X/Octo-style.
    - "gripper": `gripper` (1 open, 0 closed).
    - "stop": the policy declares the goal reached (PixNav's stop).
    """

    type: str
    linear: float = 0.0
    angular: float = 0.0
    duration: float = 0.0
    x: float = 0.0
    y: float = 0.0
    yaw: float | None = None
    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gripper: float | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON object with the fields of its type only."""
        if self.type == "base_velocity":
            return {"type": self.type, "linear": self.linear, "angular": self.angular, "duration": self.duration}
        if self.type == "base_waypoint":
            return {"type": self.type, "x": self.x, "y": self.y, "yaw": self.yaw}
        if self.type == "ee_delta":
            return {"type": self.type, "translation": list(self.translation), "rotation": list(self.rotation),
                    "gripper": self.gripper}
        if self.type == "gripper":
            return {"type": self.type, "gripper": self.gripper}
        return {"type": self.type}

    @classmethod
    def from_json(cls, data: Any, path: str = "action") -> PolicyAction:
        """Parse one action."""
        kind = _choice(_require(data, "type", path), ACTION_TYPES, f"{path}.type")
        if kind == "base_velocity":
            duration = _number(_require(data, "duration", path), f"{path}.duration")
            if duration <= 0:
                raise ProtocolError(f"{path}.duration: expected a positive number of seconds, got {duration}")
            return cls(kind, linear=_number(_require(data, "linear", path), f"{path}.linear"),
                       angular=_number(_require(data, "angular", path), f"{path}.angular"), duration=duration)
        if kind == "base_waypoint":
            yaw = data.get("yaw")
            return cls(kind, x=_number(_require(data, "x", path), f"{path}.x"),
                       y=_number(_require(data, "y", path), f"{path}.y"),
                       yaw=None if yaw is None else _number(yaw, f"{path}.yaw"))
        if kind == "ee_delta":
            return cls(kind, translation=_numbers(_require(data, "translation", path), f"{path}.translation", 3),  # type: ignore[arg-type]
                       rotation=_numbers(_require(data, "rotation", path), f"{path}.rotation", 3),  # type: ignore[arg-type]
                       gripper=_gripper(data.get("gripper"), f"{path}.gripper", optional=True))
        if kind == "gripper":
            return cls(kind, gripper=_gripper(_require(data, "gripper", path), f"{path}.gripper", optional=False))
        return cls(kind)


def _gripper(value: Any, path: str, optional: bool) -> float | None:
    if value is None and optional:
        return None
    number = _number(value, path)
    if not 0.0 <= number <= 1.0:
        raise ProtocolError(f"{path}: expected a value in [0, 1] (1 open, 0 closed), got {number}")
    return number


@dataclass(frozen=True)
class PolicyResponse:
    """A server's answer.

    Attributes:
        status: "running" (execute the chunk and ask again), "done" (the policy thinks the skill is finished; the
            chunk, possibly empty, is still executed) or "error" (the policy cannot act; `message` says why).
        actions: the action chunk, executed in order.
        message: detail ("" when none).
    """

    status: str
    actions: tuple[PolicyAction, ...] = ()
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON object."""
        return {"protocol": PROTOCOL, "status": self.status, "actions": [action.to_json() for action in self.actions],
                "message": self.message}

    @classmethod
    def from_json(cls, data: Any) -> PolicyResponse:
        """Parse and validate a response.

        Raises:
            ProtocolError: naming the first invalid field.
        """
        _check_protocol(data)
        actions = _require(data, "actions", "")
        if not isinstance(actions, list):
            raise ProtocolError(f"actions: expected a list, got {type(actions).__name__}")
        message = data.get("message", "")
        return cls(_choice(_require(data, "status", ""), STATUSES, "status"),
                   tuple(PolicyAction.from_json(item, f"actions[{index}]") for index, item in enumerate(actions)),
                   _string(message, "message"))
