"""Conversions between ROS messages and the project's plain Python types: the one place each of them is written.

* emmoe_interfaces/Subtask <-> `SubtaskText` (the planner's goal, the executor's request, the monitor's check, the
  command-line tools).
* sensor_msgs/Image -> numpy array (the planner's views, the evaluator's saved views and videos, the bridge's camera
  frames). `image_to_array` reads attributes only, so it also takes the dataclasses the `rosbags` library
  deserialises bags into.

The scene (QueryScene <-> SceneSnapshot) has its own module, `emmoe_core.robot.messages`; conversions to types of a
higher layer live in the package that owns the type (`emmoe_eval.records`: StepRecord -> Step;
`homiebot_executor.messages`: the skill actions <-> SkillGoal and SkillOutcome). No rclpy here.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from emmoe_interfaces.msg import Subtask

from emmoe_core.protocol import SubtaskText

# Encoding -> (element type, channels) of the images this project reads.
ENCODINGS: dict[str, tuple[str, int]] = {
    "rgb8": ("u1", 3), "bgr8": ("u1", 3), "rgba8": ("u1", 4), "bgra8": ("u1", 4),
    "mono8": ("u1", 1), "8UC1": ("u1", 1), "8UC3": ("u1", 3), "8UC4": ("u1", 4),
    "32FC1": ("f4", 1), "32SC1": ("i4", 1),
}
# 8-bit pictures (what the evaluator saves as PNG files and videos).
PICTURE_ENCODINGS: tuple[str, ...] = tuple(name for name, (kind, _) in ENCODINGS.items() if kind == "u1")
# Colour pictures (what the planner shows its model).
COLOUR_ENCODINGS: tuple[str, ...] = ("rgb8", "bgr8", "rgba8", "bgra8")


class ImageEncodingError(ValueError):
    """A sensor_msgs/Image cannot be turned into an array: unsupported encoding or a buffer that does not fit."""


def subtask_message(subtask: SubtaskText, model: str | None = None) -> Subtask:
    """A SubtaskText as an emmoe_interfaces/Subtask (fields as written).

    Args:
        subtask: the subtask.
        model: the low-level model to send, when the caller chose it apart from the subtask (default: subtask.model).
    """
    return Subtask(action=subtask.action, target=subtask.target, place=subtask.place,
                   model=subtask.model if model is None else model)


def subtask_from_message(message: Any) -> SubtaskText:
    """The SubtaskText an emmoe_interfaces/Subtask carries (fields as written)."""
    return SubtaskText(message.action, message.target, message.place, message.model)


def image_to_array(image: Any, accept: Collection[str] = tuple(ENCODINGS)) -> np.ndarray:
    """The pixels of a sensor_msgs/Image, row padding removed.

    Colour comes back in RGB(A) order (bgr8 and bgra8 are reordered) with shape (height, width, channels); one-channel
    images (mono8, 8UC1, 32FC1 depth in metres, 32SC1 instance ids) have shape (height, width). A zero `step` reads
    as unpadded rows.

    Args:
        image: the message (or a rosbags dataclass of it).
        accept: the encodings the caller can use, a subset of ENCODINGS (default: all of them).

    Raises:
        ImageEncodingError: for an encoding outside `accept` or a buffer that does not fit the size.
    """
    if image.encoding not in ENCODINGS or image.encoding not in accept:
        raise ImageEncodingError(f"unsupported image encoding {image.encoding!r}; expected one of {', '.join(accept)}")
    kind, channels = ENCODINGS[image.encoding]
    dtype = np.dtype(kind).newbyteorder(">" if getattr(image, "is_bigendian", 0) else "<")
    height, width = int(image.height), int(image.width)
    pixel_bytes = width * channels * dtype.itemsize
    row = int(image.step) or pixel_bytes
    data = np.frombuffer(memoryview(image.data).cast("B"), dtype=np.uint8)
    if row < pixel_bytes or data.size < height * row:
        raise ImageEncodingError(f"image data of {data.size} bytes does not fit {width}x{height} {image.encoding} "
                                 f"with row step {row}")
    rows = data[:height * row].reshape(height, row)[:, :pixel_bytes]
    if dtype.itemsize > 1:
        rows = np.ascontiguousarray(rows).view(dtype).astype(dtype.newbyteorder("="), copy=False)
    pixels = rows.reshape(height, width, channels)
    if image.encoding.startswith("bgr"):
        pixels = pixels[:, :, [2, 1, 0, 3][:channels]]
    return pixels[:, :, 0] if channels == 1 else pixels


def image_to_rgb(image: Any) -> np.ndarray:
    """A colour sensor_msgs/Image (COLOUR_ENCODINGS) as a contiguous (height, width, 3) uint8 RGB array, alpha dropped.

    Raises:
        ImageEncodingError: for another encoding or a buffer that does not fit the size.
    """
    return np.ascontiguousarray(image_to_array(image, COLOUR_ENCODINGS)[:, :, :3])
