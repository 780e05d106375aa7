"""The learned detector's core without a trained network: the label set, saving and loading weights, and what the
detector makes of a labelled image (regions, depth clean-up, tracks across looks, places, the query's category)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from emmoe_core.perception.classes import DetectorClasses  # noqa: E402
from emmoe_core.perception.learned import LearnedDetector, ViewLabels, back_project, main_layer  # noqa: E402
from emmoe_core.perception.network import (  # noqa: E402
    NetworkConfig, NetworkLoadError, SegmentationNet, load_network, network_input, save_network)
from emmoe_core.robot.state import CameraView, Observation  # noqa: E402

CLASSES = ("background", "013_apple", "024_bowl", "fridge", "frl_apartment_table_01")
OBJECTS = ("013_apple", "024_bowl")


def tiny_weights(folder):
    save_network(SegmentationNet(NetworkConfig(CLASSES, OBJECTS, widths=(4, 4, 4, 4), decoder_width=4)), folder,
                 {"note": "untrained"})
    return folder


def camera_along_x(size: int = 32) -> CameraView:
    focal = size / 2  # 90 degrees
    rotation = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    return CameraView(size, size, focal, focal, size / 2, size / 2, (0.0, 0.0, 1.0), rotation)


def test_the_label_set_starts_with_the_background_and_never_repeats():
    assert DetectorClasses(CLASSES).index["fridge"] == 3 and len(DetectorClasses(CLASSES)) == 5
    with pytest.raises(ValueError, match="background"):
        DetectorClasses(("013_apple", "background"))
    with pytest.raises(ValueError, match="repeat"):
        DetectorClasses(("background", "fridge", "fridge"))


def test_weights_round_trip_in_half_precision_and_a_bad_folder_says_what_is_missing(tmp_path):
    network = SegmentationNet(NetworkConfig(CLASSES, OBJECTS, widths=(4, 4, 4, 4), decoder_width=4)).eval()
    save_network(network, tmp_path / "w")
    loaded = load_network(tmp_path / "w")
    assert loaded.config == network.config
    inputs = network_input(np.full((1, 32, 32, 3), 200, np.uint8), np.full((1, 32, 32), np.nan, np.float32))
    assert inputs.shape == (1, 4, 32, 32) and float(inputs[0, 3].abs().max()) == 0.0  # unknown depth reads as 0
    with torch.inference_mode():
        assert loaded(inputs).shape == (1, len(CLASSES), 16, 16)
        assert torch.allclose(loaded(inputs), network(inputs), atol=5e-2)
    with pytest.raises(NetworkLoadError, match="config.json and model.safetensors"):
        load_network(tmp_path / "nowhere")
    other = tmp_path / "other"
    save_network(SegmentationNet(NetworkConfig(CLASSES, OBJECTS, widths=(8, 8, 8, 8), decoder_width=8)), other)
    (other / "config.json").write_text((tmp_path / "w" / "config.json").read_text())
    with pytest.raises(NetworkLoadError, match="do not fit"):
        load_network(other)


def test_back_projection_puts_a_pixel_where_its_depth_says():
    depth = np.full((32, 32), np.nan, np.float32)
    depth[16, 16] = 2.0
    mask = np.zeros((32, 32), bool)
    mask[16, 16] = mask[0, 0] = True  # the second has no depth and is dropped
    points = back_project(mask, depth, camera_along_x())
    assert points.shape == (1, 3)
    assert np.allclose(points[0], [2.0, -2.0 * 0.5 / 16, 1.0 - 2.0 * 0.5 / 16])


def labelled(detector: LearnedDetector, labels: dict[str, np.ndarray], confidence: float = 1.0) -> None:
    """Make the detector see `labels` (view -> class indices) with `confidence` whatever the images hold."""
    answer = {view: ViewLabels(image, np.full(image.shape, confidence, np.float32)) for view, image in labels.items()}
    detector.label_views = lambda observation: answer  # type: ignore[method-assign]


def scene(time: float, depth_of_apple: float = 1.0) -> Observation:
    depth = np.full((32, 32), 3.0, np.float32)
    depth[9:14, 9:14] = depth_of_apple
    return Observation(time=time, rgb={"front": np.zeros((32, 32, 3), np.uint8)}, depth={"front": depth},
                       cameras={"front": camera_along_x()})


def apple_on_table() -> np.ndarray:
    labels = np.zeros((32, 32), np.uint8)
    labels[20:32, 4:28] = 4  # the table below
    labels[9:15, 9:15] = 1   # the apple's mask spills one pixel onto the wall behind it (depth 3 m)
    return labels


def test_regions_drop_the_spill_behind_a_small_object_and_read_its_place(tmp_path):
    detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=4)
    labelled(detector, {"front": apple_on_table()})
    observation = scene(0.0)
    apple = detector.detect(observation, "apple")
    assert len(apple) == 1 and apple[0].label == "013_apple"
    assert int(apple[0].mask.sum()) == 25  # the 6x6 mask less the 11 pixels at the wall's depth
    assert detector.detect(observation, "apple_0")[0].track == apple[0].track  # instance names mean their category
    assert detector.detect(observation, "bowl") == []
    assert detector.visible(observation) == {"front": [("013_apple", "on frl_apartment_table_01"),
                                                       ("frl_apartment_table_01", "")]}


def test_a_thing_seen_again_keeps_its_track_and_a_new_episode_forgets_them(tmp_path):
    detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=4)
    labelled(detector, {"front": apple_on_table()})
    first = detector.detect(scene(0.0), "apple")[0].track
    assert detector.detect(scene(1.0), "apple")[0].track == first
    moved = detector.detect(scene(2.0, depth_of_apple=2.0), "apple")[0].track  # a metre farther: another apple
    assert moved != first
    assert detector.detect(scene(0.5), "apple")[0].track == 0  # time went back: tracks start again


def test_regions_under_the_minimum_size_are_not_detections(tmp_path):
    detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=40)
    labelled(detector, {"front": apple_on_table()})
    assert detector.detect(scene(0.0), "apple") == []
    assert [label for label, _ in detector.visible(scene(0.0))["front"]] == ["frl_apartment_table_01"]


def test_a_region_much_smaller_than_its_class_is_no_detection(tmp_path):
    # the apple's 25 pixels at 1 m through a focal length of 16 pixels cover 0.098 m^2
    sizes = {"an apple": (0.075, 0.075, 0.075), "an apple a metre wide": (1.0, 1.0, 1.0)}
    found = {}
    for name, size in sizes.items():
        config = NetworkConfig(CLASSES, OBJECTS, (size, (0.16, 0.16, 0.05)), widths=(4, 4, 4, 4), decoder_width=4)
        save_network(SegmentationNet(config), tmp_path / name)
        detector = LearnedDetector(tmp_path / name, min_pixels=4, min_area_share=0.2)
        labelled(detector, {"front": apple_on_table()})
        found[name] = len(detector.detect(scene(0.0), "apple"))
    assert found == {"an apple": 1, "an apple a metre wide": 0}  # 0.098 m^2 is under a fifth of 1 m^2
    assert detector.network.config.sizes[0] == (1.0, 1.0, 1.0)  # the sizes travel with the weights
    with pytest.raises(ValueError, match="one size per object class"):
        NetworkConfig(CLASSES, OBJECTS, ((1.0, 1.0, 1.0),))


def test_a_part_s_instance_name_finds_its_furniture_and_an_unknown_name_finds_nothing(tmp_path):
    detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=4)
    labelled(detector, {"front": apple_on_table()})
    assert "fridge" in detector.categories("fridge_0_door")
    assert [item.label for item in detector.detect(scene(0.0), "frl_apartment_table_01_2_drawer_1")] == \
        ["frl_apartment_table_01"]
    assert detector.detect(scene(0.0), "spaceship_0_door") == []


def test_a_region_the_network_is_unsure_of_is_no_detection(tmp_path):
    detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=4, object_confidence=0.65,
                               furniture_confidence=0.8)
    labelled(detector, {"front": apple_on_table()}, confidence=0.7)
    assert [label for label, _ in detector.visible(scene(0.0))["front"]] == ["013_apple"]  # the table is unsure
    labelled(detector, {"front": apple_on_table()}, confidence=0.6)
    assert detector.visible(scene(1.0)) == {"front": []}


def test_the_untrained_network_runs_on_every_view_at_half_resolution(tmp_path):
    detector = LearnedDetector(tiny_weights(tmp_path / "w"))
    observation = Observation(time=0.0, rgb={view: np.zeros((32, 32, 3), np.uint8) for view in ("front", "back")},
                              depth={"front": np.ones((32, 32), np.float32)})
    labels = {view: answer.labels for view, answer in detector.label_views(observation).items()}
    assert set(labels) == {"front", "back"} and labels["back"].shape == (32, 32)
    assert (labels["front"][::2, ::2] == labels["front"][1::2, 1::2]).all()  # each half-resolution label fills 2x2
    assert not math.isnan(float(labels["front"].mean()))


def test_the_main_depth_layer_leaves_out_a_nearer_thing() -> None:
    depths = np.concatenate([np.full(10, 1.0), np.linspace(3.0, 3.6, 50), [8.0]])
    assert main_layer(depths) == (3.0, 3.6)


def table_behind_a_chair_edge() -> tuple[np.ndarray, np.ndarray]:
    """The table's labels and a depth image where its mask's left columns lie on a chair 2 m nearer."""
    labels = np.zeros((32, 32), np.uint8)
    labels[16:32, 4:28] = 4
    depth = np.full((32, 32), 3.0, np.float32)
    depth[:, 4:7] = 1.0
    return labels, depth


def test_a_furniture_region_keeps_its_own_depth_layer_and_a_speck_of_furniture_is_none(tmp_path):
    labels, depth = table_behind_a_chair_edge()
    observation = Observation(time=0.0, rgb={"front": np.zeros((32, 32, 3), np.uint8)}, depth={"front": depth},
                              cameras={"front": camera_along_x()})
    detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=4)
    labelled(detector, {"front": labels})
    table = detector.detect(observation, "frl_apartment_table_01")
    assert len(table) == 1 and int(table[0].mask.sum()) == 16 * 21  # the 3 columns on the chair are left out
    speck = np.zeros((32, 32), np.uint8)
    speck[20:24, 20:24] = 4  # 16 pixels at 3 m through a focal length of 16 pixels: 0.56 m^2
    for least, found in ((0.5, 1), (0.6, 0)):
        detector = LearnedDetector(tiny_weights(tmp_path / "w"), min_pixels=4, min_furniture_area=least)
        labelled(detector, {"front": speck})
        assert len(detector.detect(scene(0.0), "frl_apartment_table_01")) == found
