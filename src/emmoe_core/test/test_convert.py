"""The one conversion of each message type (emmoe_core.convert): subtasks and images, round trips (no ROS graph)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from emmoe_interfaces.msg import Subtask
from hypothesis import given
from hypothesis import strategies as st
from sensor_msgs.msg import Image

from emmoe_core.convert import (
    COLOUR_ENCODINGS,
    ENCODINGS,
    PICTURE_ENCODINGS,
    ImageEncodingError,
    image_to_array,
    image_to_rgb,
    subtask_from_message,
    subtask_message,
)
from emmoe_core.protocol import SubtaskText, parse_subtask

_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)


def _image(pixels: np.ndarray, encoding: str, padding: int = 0) -> Image:
    height, width, channels = pixels.shape
    rows = [row.tobytes() + bytes(padding) for row in pixels]
    return Image(height=height, width=width, encoding=encoding, step=width * channels + padding, data=b"".join(rows))


@given(_TEXT, _TEXT, _TEXT, _TEXT)
def test_subtask_round_trip_keeps_every_field_as_written(action: str, target: str, place: str, model: str) -> None:
    subtask = SubtaskText(action, target, place, model)
    message = subtask_message(subtask)
    assert isinstance(message, Subtask)
    assert (message.action, message.target, message.place, message.model) == (action, target, place, model)
    assert subtask_from_message(message) == subtask


def test_a_model_chosen_apart_from_the_subtask_is_sent() -> None:
    parsed = parse_subtask("[Put, apple, fridge]")
    message = subtask_message(parsed, "RT-1-X")
    assert (message.action, message.target, message.place, message.model) == ("Put", "apple", "fridge", "RT-1-X")
    assert subtask_message(SubtaskText("End", model="None"), "").model == ""
    assert subtask_message(SubtaskText("End", model="None")).model == "None"


def test_rgb_bgr_and_alpha_with_row_padding() -> None:
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert np.array_equal(image_to_rgb(_image(rgb, "rgb8", padding=2)), rgb)
    assert np.array_equal(image_to_rgb(_image(rgb[:, :, ::-1].copy(), "bgr8")), rgb)
    rgba = np.concatenate([rgb, np.full((2, 3, 1), 255, np.uint8)], axis=2)
    assert np.array_equal(image_to_rgb(_image(rgba, "rgba8")), rgb)
    with pytest.raises(ValueError, match="unsupported image encoding 'mono8'"):
        image_to_rgb(Image(height=1, width=1, encoding="mono8", step=1, data=b"\x00"))
    with pytest.raises(ValueError, match="does not fit"):
        image_to_rgb(Image(height=2, width=2, encoding="rgb8", step=6, data=b"\x00" * 6))


def test_rgb_arrays_are_contiguous_and_keep_no_alpha() -> None:
    bgra = np.arange(2 * 2 * 4, dtype=np.uint8).reshape(2, 2, 4)
    rgb = image_to_rgb(_image(bgra, "bgra8", padding=3))
    assert rgb.flags.c_contiguous and np.array_equal(rgb, bgra[:, :, 2::-1])
    assert np.array_equal(image_to_array(_image(bgra, "bgra8")), bgra[:, :, [2, 1, 0, 3]])


@pytest.mark.parametrize("encoding", ["rgb8", "rgba8", "8UC3", "8UC4"])
def test_colour_pictures_round_trip(encoding: str) -> None:
    _, channels = ENCODINGS[encoding]
    pixels = np.random.default_rng(7).integers(0, 256, (3, 5, channels), dtype=np.uint8)
    assert np.array_equal(image_to_array(_image(pixels, encoding, padding=1)), pixels)


def test_one_channel_images_come_back_two_dimensional() -> None:
    grey = np.array([[7], [9]], dtype=np.uint8)
    for encoding in ("mono8", "8UC1"):
        assert image_to_array(_image(grey[:, :, None], encoding)).tolist() == [[7], [9]]
    depth = np.array([[0.5, 1.5], [np.inf, -2.25]], dtype="<f4")
    message = Image(height=2, width=2, encoding="32FC1", step=8, data=depth.tobytes())
    assert np.array_equal(image_to_array(message), depth) and image_to_array(message).dtype == np.float32
    ids = np.array([[0, -1, 70_000]], dtype="<i4")
    back = image_to_array(Image(height=1, width=3, encoding="32SC1", step=16, data=ids.tobytes() + bytes(4)))
    assert back.tolist() == ids.tolist() and back.dtype == np.int32


def test_big_endian_depth_and_unpadded_rows_without_a_step() -> None:
    depth = np.array([[0.5, 1.5, 2.5]], dtype=">f4")
    message = Image(height=1, width=3, encoding="32FC1", is_bigendian=1, step=0, data=depth.tobytes())
    assert image_to_array(message).tolist() == [[0.5, 1.5, 2.5]]


def test_a_caller_limits_the_encodings_it_accepts() -> None:
    depth = Image(height=1, width=1, encoding="32FC1", step=4, data=bytes(4))
    with pytest.raises(ImageEncodingError, match="unsupported image encoding '32FC1'"):
        image_to_array(depth, PICTURE_ENCODINGS)
    with pytest.raises(ImageEncodingError, match="unsupported image encoding '16UC1'"):
        image_to_array(Image(height=1, width=1, encoding="16UC1", step=2, data=bytes(2)))
    assert set(COLOUR_ENCODINGS) <= set(PICTURE_ENCODINGS) < set(ENCODINGS)


def test_attribute_only_messages_are_read_like_rosbags_dataclasses() -> None:
    bag_image = SimpleNamespace(height=1, width=2, encoding="bgr8", is_bigendian=0, step=8,
                                data=np.array([1, 2, 3, 4, 5, 6, 0, 0], dtype=np.uint8))
    assert image_to_array(bag_image).tolist() == [[[3, 2, 1], [6, 5, 4]]]
    assert subtask_from_message(SimpleNamespace(action="Go to", target="fridge", place="", model="NoMaD")) == \
        SubtaskText("Go to", "fridge", "", "NoMaD")
