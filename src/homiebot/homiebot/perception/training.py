"""Training the learned detector on rendered views (homiebot.perception.views), on the CPU, resumably.

Each step takes a batch of 128x128 crops of the 256x256 views, most of them centred on a small object (objects
cover a fraction of a percent of the pixels), with random horizontal flips and brightness changes. The loss is
cross-entropy against labels at the network's half resolution, where a 2x2 block takes the label of the smallest
thing in it (object over furniture over background, so a 3-pixel object is not averaged away), weighted by the
inverse fourth root of each class's frequency. `<out>/checkpoint.pt` is written every `checkpoint_every` steps;
rerunning the same command continues from it. The finished weights go to `<out>/model.safetensors` with their
config and card.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from emmoe_core.perception.classes import DetectorClasses


@dataclass(frozen=True)
class TrainingConfig:
    """Settings of one training run.

    Attributes:
        steps: optimiser steps.
        batch_size: crops per step.
        crop: crop side in pixels (a multiple of 16).
        learning_rate: peak AdamW learning rate (cosine decay to 5 %).
        object_crop_share: share of crops centred on a small object.
        threads: torch CPU threads.
        seed: random seed of crops, flips and initial weights.
        checkpoint_every: steps between resumable checkpoints.
        init: a weights folder (save_network's) to start from, fine-tuning it; empty: random initial weights.
    """

    steps: int = 10000
    batch_size: int = 24
    crop: int = 128
    learning_rate: float = 3e-3
    object_crop_share: float = 0.6
    threads: int = 2
    seed: int = 0
    checkpoint_every: int = 250
    init: str = ""


@dataclass
class ViewSet:
    """Rendered views in memory: rgb (N, H, W, 3) uint8, depth (N, H, W) metres float32, label (N, H, W) uint8,
    focal (N,) the camera's focal length in pixels (None: shards rendered before it was kept)."""

    rgb: np.ndarray
    depth: np.ndarray
    label: np.ndarray
    focal: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.rgb)


def load_views(shards: Sequence[Path]) -> ViewSet:
    """Concatenate the shards written by homiebot.perception.views.

    Raises:
        FileNotFoundError: a shard is missing.
    """
    parts = [np.load(shard) for shard in shards]
    focal = np.concatenate([part["focal"] for part in parts]) if all("focal" in part for part in parts) else None
    return ViewSet(np.concatenate([part["rgb"] for part in parts]),
                   np.concatenate([part["depth"] for part in parts]).astype(np.float32) / 1000.0,
                   np.concatenate([part["label"] for part in parts]), focal)


def object_priority(classes: DetectorClasses, objects: set[str]) -> np.ndarray:
    """Per class: 2 for a small object, 1 for furniture, 0 for the background."""
    return np.array([0] + [2 if name in objects else 1 for name in classes.names[1:]], dtype=np.uint8)


def half_labels(label: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """(..., H, W) labels -> (..., H/2, W/2): each 2x2 block takes its highest-priority label."""
    *lead, height, width = label.shape
    blocks = label.reshape(*lead, height // 2, 2, width // 2, 2)
    blocks = np.moveaxis(blocks, -3, -2).reshape(*lead, height // 2, width // 2, 4)
    pick = priority[blocks].argmax(-1)
    halved: np.ndarray = np.take_along_axis(blocks, pick[..., None], -1)[..., 0]
    return halved


def class_weights(half: np.ndarray, count: int, power: float = 0.25) -> np.ndarray:
    """Each class's pixel frequency to the power -`power`, normalised to mean 1 over the classes present (0.25: rare
    small objects weigh more, without making the network see them everywhere)."""
    frequency = np.bincount(half.ravel(), minlength=count).astype(np.float64)
    weights = np.where(frequency > 0, np.maximum(frequency, 1.0) ** -power, 0.0)
    weights /= weights[frequency > 0].mean()
    return np.where(frequency > 0, np.clip(weights, 0.05, 20.0), 0.0).astype(np.float32)


class CropSampler:
    """Random training crops of a ViewSet (see the module docstring)."""

    def __init__(self, views: ViewSet, half: np.ndarray, priority: np.ndarray, config: TrainingConfig) -> None:
        self.views, self.half, self.config = views, half, config
        self.rng = np.random.default_rng(config.seed)
        view, row, column = np.nonzero(priority[half] == 2)
        keep = self.rng.permutation(len(view))[:200_000]
        self.object_pixels = np.stack([view[keep], row[keep] * 2, column[keep] * 2], 1)

    def batch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rgb, depth, half labels) of config.batch_size crops."""
        size, rng = self.config.crop, self.rng
        count, height, width = self.views.label.shape
        rgb, depth, label = [], [], []
        for _ in range(self.config.batch_size):
            if len(self.object_pixels) and rng.random() < self.config.object_crop_share:
                view, row, column = self.object_pixels[rng.integers(len(self.object_pixels))]
                margin = size // 8  # the object lies anywhere but at the crop's very edge
                top = int(np.clip(row - rng.integers(margin, size - margin), 0, height - size)) // 2 * 2
                left = int(np.clip(column - rng.integers(margin, size - margin), 0, width - size)) // 2 * 2
            else:
                view = rng.integers(count)
                top, left = rng.integers(0, (height - size) // 2 + 1) * 2, rng.integers(0, (width - size) // 2 + 1) * 2
            rows, columns = slice(top, top + size), slice(left, left + size)
            half_rows, half_columns = slice(top // 2, (top + size) // 2), slice(left // 2, (left + size) // 2)
            colour = self.views.rgb[view, rows, columns].astype(np.float32) * rng.uniform(0.85, 1.15)
            crop = (np.clip(colour, 0, 255), self.views.depth[view, rows, columns], self.half[view, half_rows, half_columns])
            if rng.random() < 0.5:
                crop = tuple(part[:, ::-1] for part in crop)
            rgb.append(crop[0]), depth.append(crop[1]), label.append(crop[2])
        return np.stack(rgb).astype(np.uint8), np.stack(depth), np.stack(label)


def train_detector(views: ViewSet, classes: DetectorClasses, objects: Mapping[str, tuple[float, float, float]],
                   out: Path, config: TrainingConfig, progress: Callable[[str], None] = print) -> dict[str, object]:
    """Train (or continue training) the detector into `out` (`objects`: the small-object classes and their sizes,
    kept in the network's config); the card written with the weights."""
    import torch
    from emmoe_core.perception.network import (NetworkConfig, SegmentationNet, load_network, network_input,
                                               save_network)
    from torch.nn import functional

    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    priority = object_priority(classes, set(objects))
    half = half_labels(views.label, priority)
    weights = torch.from_numpy(class_weights(half, len(classes)))
    network = SegmentationNet(NetworkConfig(classes.names, tuple(sorted(objects)),
                                            tuple(objects[name] for name in sorted(objects))))
    if config.init:
        start_from = load_network(Path(config.init))
        if start_from.config.classes != classes.names:
            raise ValueError(f"{config.init} labels other classes than these views: it cannot be fine-tuned on them")
        network.load_state_dict(start_from.state_dict())
    optimiser = torch.optim.AdamW(network.parameters(), lr=config.learning_rate, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: 0.05 + 0.95 * 0.5 * (1 + np.cos(np.pi * min(step / config.steps, 1.0))))
    sampler = CropSampler(views, half, priority, config)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint, start, spent = out / "checkpoint.pt", 0, 0.0
    if checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if saved["config"] != asdict(config):
            raise ValueError(f"{checkpoint} was written with other settings ({saved['config']}); remove it to "
                             "start again")
        network.load_state_dict(saved["network"]), optimiser.load_state_dict(saved["optimiser"])
        schedule.load_state_dict(saved["schedule"])
        sampler.rng.bit_generator.state = saved["rng"]
        start, spent = int(saved["step"]), float(saved["seconds"])
        progress(f"[detector] resuming at step {start}/{config.steps}")
    began, running = time.perf_counter() - spent, 0.0
    network.train()
    for step in range(start + 1, config.steps + 1):
        rgb, depth, label = sampler.batch()
        logits = network(network_input(rgb, depth))
        loss = functional.cross_entropy(logits, torch.from_numpy(label).long(), weight=weights)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        running = 0.98 * running + 0.02 * loss.item() if step > start + 1 else loss.item()
        elapsed = time.perf_counter() - began
        if step % 50 == 0 or step == config.steps:
            eta = elapsed / step * (config.steps - step)
            progress(f"[detector] step {step}/{config.steps} loss {running:.3f} {elapsed / 60:.1f} min "
                     f"(about {eta / 60:.1f} min left)")
        if step % config.checkpoint_every == 0 and step < config.steps:
            torch.save({"config": asdict(config), "network": network.state_dict(), "optimiser":
                        optimiser.state_dict(), "schedule": schedule.state_dict(), "rng": sampler.rng.bit_generator.state,
                        "step": step, "seconds": elapsed}, checkpoint.with_suffix(".tmp"))
            checkpoint.with_suffix(".tmp").replace(checkpoint)
    card = {"views": len(views), "training": asdict(config), "wall_minutes": round((time.perf_counter() - began) / 60, 1),
            "final_loss": round(running, 4)}
    save_network(network.eval(), out, card)
    checkpoint.unlink(missing_ok=True)
    (out / "training.json").write_text(json.dumps(card, indent=2) + "\n")
    return card
