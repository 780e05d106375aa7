"""Training the learned detector: labels at half resolution keep small things, crops favour objects, a short run on
synthetic views learns a coloured square and resumes from its checkpoint, rendered views carry the right classes,
and the evaluation scores a perfect labelling at 100."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from emmoe_core.perception.classes import DetectorClasses  # noqa: E402

from homiebot.perception import evaluation  # noqa: E402
from homiebot.perception.training import (  # noqa: E402
    CropSampler, TrainingConfig, ViewSet, class_weights, half_labels, object_priority, train_detector)
from homiebot.perception.views import ViewSampling, catalog_classes, class_image, render_views  # noqa: E402

CLASSES = DetectorClasses(("background", "013_apple", "fridge"))
APPLE = {"013_apple": (0.075, 0.075, 0.075)}
PRIORITY = object_priority(CLASSES, set(APPLE))


def test_a_half_resolution_block_takes_its_smallest_thing():
    label = np.array([[0, 2, 0, 0],
                      [1, 2, 0, 0],
                      [2, 2, 0, 0],
                      [2, 2, 0, 2]], np.uint8)
    assert PRIORITY.tolist() == [0, 2, 1]
    assert half_labels(label, PRIORITY).tolist() == [[1, 0], [2, 2]]


def test_rare_classes_weigh_more_and_absent_ones_nothing():
    weights = class_weights(np.array([0] * 900 + [2] * 99 + [1], np.uint8), 4)
    assert weights[1] > weights[2] > weights[0] and weights[3] == 0.0


def synthetic_views(count: int = 16, size: int = 64) -> ViewSet:
    """Grey rooms, a red 6x6 apple and a white fridge block at random places."""
    rng = np.random.default_rng(0)
    rgb = np.full((count, size, size, 3), 110, np.uint8)
    depth = np.full((count, size, size), 3.0, np.float32)
    label = np.zeros((count, size, size), np.uint8)
    for index in range(count):
        row, column = rng.integers(0, size - 6, 2)
        rgb[index, row:row + 6, column:column + 6] = (200, 20, 20)
        depth[index, row:row + 6, column:column + 6] = 1.0
        label[index, row:row + 6, column:column + 6] = 1
        top = rng.integers(0, size - 20)
        rgb[index, top:top + 20, :8], label[index, top:top + 20, :8] = 235, 2
        depth[index, top:top + 20, :8] = 3.0  # the fridge hides an apple drawn under it, depth too
    return ViewSet(rgb, depth, label)


def test_crops_are_the_configured_size_and_mostly_hold_an_object():
    views = synthetic_views()
    config = TrainingConfig(batch_size=40, crop=32, object_crop_share=1.0)
    sampler = CropSampler(views, half_labels(views.label, PRIORITY), PRIORITY, config)
    rgb, depth, label = sampler.batch()
    assert rgb.shape == (40, 32, 32, 3) and depth.shape == (40, 32, 32) and label.shape == (40, 16, 16)
    assert np.mean([(crop == 1).any() for crop in label]) > 0.9


def test_a_short_run_learns_the_red_square_and_a_stopped_run_resumes(tmp_path):
    import torch

    views = synthetic_views()
    config = TrainingConfig(steps=120, batch_size=8, crop=32, learning_rate=1e-2, checkpoint_every=50)
    lines: list[str] = []

    def stop_at_step_100(line: str) -> None:
        lines.append(line)
        if "step 100/" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_detector(views, CLASSES, APPLE, tmp_path / "w", config, stop_at_step_100)
    assert (tmp_path / "w" / "checkpoint.pt").exists() and not (tmp_path / "w" / "model.safetensors").exists()
    card = train_detector(views, CLASSES, APPLE, tmp_path / "w", config, lines.append)
    assert "[detector] resuming at step 50/120" in lines
    assert card["views"] == 16 and not (tmp_path / "w" / "checkpoint.pt").exists()
    from emmoe_core.perception.learned import LearnedDetector
    from emmoe_core.robot.state import Observation

    detector = LearnedDetector(tmp_path / "w", min_pixels=4)
    assert detector.network.config.objects == ("013_apple",)
    labels, confidence = detector.label_views(
        Observation(time=0.0, rgb={"front": views.rgb[0]}, depth={"front": views.depth[0]}))["front"]
    assert confidence.shape == labels.shape and 0.0 < float(confidence.min()) <= float(confidence.max()) <= 1.0
    labels = {"front": labels}
    apple = views.label[0] == 1
    assert np.mean(labels["front"][apple] == 1) > 0.5
    assert np.mean(labels["front"][views.label[0] == 0] == 0) > 0.9
    torch.save({"config": {}}, tmp_path / "w" / "checkpoint.pt")
    with pytest.raises(ValueError, match="other settings"):
        train_detector(views, CLASSES, APPLE, tmp_path / "w", config, lines.append)


def test_fine_tuning_starts_from_the_given_weights_and_refuses_another_label_set(tmp_path):
    from emmoe_core.perception.network import NetworkConfig, SegmentationNet, load_network, save_network

    views = synthetic_views(count=4)
    start = SegmentationNet(NetworkConfig(CLASSES.names, ("013_apple",)))
    save_network(start, tmp_path / "start")
    config = TrainingConfig(steps=1, batch_size=2, crop=32, learning_rate=1e-9, init=str(tmp_path / "start"))
    card = train_detector(views, CLASSES, APPLE, tmp_path / "tuned", config, lambda line: None)
    assert card["training"]["init"] == str(tmp_path / "start")
    tuned, saved = load_network(tmp_path / "tuned").state_dict(), load_network(tmp_path / "start").state_dict()
    assert all(np.allclose(tuned[name].numpy(), saved[name].numpy(), atol=1e-3) for name in saved)  # one tiny step
    assert load_network(tmp_path / "tuned").config.sizes == ((0.075, 0.075, 0.075),)
    save_network(SegmentationNet(NetworkConfig(("background", "fridge"))), tmp_path / "other")
    with pytest.raises(ValueError, match="other classes"):
        train_detector(views, CLASSES, APPLE, tmp_path / "again", TrainingConfig(
            steps=1, batch_size=2, crop=32, init=str(tmp_path / "other")), lambda line: None)


def test_a_perfect_labelling_scores_a_hundred(tmp_path, monkeypatch):
    from emmoe_core.perception import learned
    from emmoe_core.perception.network import NetworkConfig, SegmentationNet, save_network

    views = synthetic_views(count=8)
    np.savez_compressed(tmp_path / "shard.npz", rgb=views.rgb, depth=(views.depth * 1000).astype(np.uint16),
                        label=views.label, focal=np.full(len(views.rgb), 32.0, np.float32))
    save_network(SegmentationNet(NetworkConfig(CLASSES.names, ("013_apple",), widths=(4, 4, 4, 4), decoder_width=4)),
                 tmp_path / "w")
    truth = iter(views.label)
    monkeypatch.setattr(learned.LearnedDetector, "label_views",
                        lambda self, observation: {view: learned.ViewLabels(labels, np.ones(labels.shape))
                                                   for view, labels in zip(observation.rgb, truth)})
    scores = evaluation.evaluate_detector(tmp_path / "w", [tmp_path / "shard.npz"], min_pixels=4)
    assert scores["object_recall"]["0-1.5m"] == {"found": 8, "instances": 8, "recall": 100.0}
    assert scores["classes"]["fridge"]["iou"] == 100.0 and scores["object_detection_precision"] == 100.0
    assert scores["visible_names"] == {"precision": 100.0, "recall": 100.0}
    assert any(line.startswith("013_apple") for line in evaluation.report_lines(scores))


def test_views_are_rendered_with_classes_and_a_rerun_reuses_the_shard(tmp_path):
    pytest.importorskip("mujoco")
    classes = catalog_classes()
    assert class_image(np.array([[-1, 0, 1]]), ("013_apple", "kitchen"), classes).tolist() == \
        [[0, classes.index["013_apple"], 0]]  # rooms and walls are background
    lines: list[str] = []
    shards = render_views([3], [None], tmp_path, ViewSampling(poses_per_scene=2), lines.append)
    assert len(lines) == 1 and shards == [tmp_path / "3_own.npz"]
    shard = np.load(shards[0])
    assert shard["rgb"].shape == (8, 256, 256, 3) and shard["label"].max() >= len(classes) - 11  # furniture seen
    assert shard["focal"].shape == (8,) and np.allclose(shard["focal"], 128.0)  # 90 degrees over 256 pixels
    assert render_views([3], [None], tmp_path, ViewSampling(poses_per_scene=2), lines.append) == shards
    assert len(lines) == 1
    assert (tmp_path / "classes.txt").read_text().split() == list(classes.names)
