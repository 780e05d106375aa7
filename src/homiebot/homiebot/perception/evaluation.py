"""The learned detector measured on rendered views of tasks it never saw (homiebot.perception.views shards).

Three figures per class: pixel precision, recall and IoU of the full-resolution masks; for small objects, instance
recall (a ground-truth region of at least `min_pixels` pixels counts as found when the detector's regions of its
class cover at least a quarter of it), split by distance; and instance precision (a detected region is right when at
least a quarter of it is its class). For the planner's text observation: precision and recall of the names each
view shows, against the names of the ground truth's regions of at least `min_pixels` pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from emmoe_core.robot.state import VIEWS, CameraView, Observation
from scipy import ndimage

from homiebot.perception.training import load_views

# Distance bands (metres, median depth of the ground-truth region) of the instance recall, and their names.
BANDS: tuple[tuple[float, float], ...] = ((0.0, 1.5), (1.5, 2.5), (2.5, 99.0))
BAND_NAMES: tuple[str, ...] = tuple(f"{low:g}-{high:g}m" if high < 99 else f">{low:g}m" for low, high in BANDS)


def _percent(part: int, whole: int) -> float | None:
    """100 part / whole to one decimal; None for an empty whole."""
    return round(100.0 * part / whole, 1) if whole else None


@dataclass
class ClassScores:
    """Counts of one class over all views."""

    true_pixels: int = 0
    predicted_pixels: int = 0
    overlap: int = 0
    found: dict[str, list[int]] = field(default_factory=dict)  # band -> [found, all]
    detections: list[int] = field(default_factory=lambda: [0, 0])  # [right, all]

    def row(self) -> dict[str, float | int | None]:
        """The figures of the module docstring."""
        row: dict[str, float | int | None] = {
            "pixel_precision": _percent(self.overlap, self.predicted_pixels),
            "pixel_recall": _percent(self.overlap, self.true_pixels),
            "iou": _percent(self.overlap, self.true_pixels + self.predicted_pixels - self.overlap),
            "detection_precision": _percent(*self.detections)}
        for band, (found, count) in sorted(self.found.items()):
            row[f"recall_{band}"], row[f"instances_{band}"] = _percent(found, count), count
        return row


def _band(depth: float) -> str:
    for (low, high), name in zip(BANDS, BAND_NAMES):
        if low <= depth < high:
            return name
    return "unknown"


def _camera(shape: tuple[int, ...], focal: float) -> CameraView:
    """A view's intrinsics, at the world's origin (the scores need sizes, not places)."""
    height, width = shape[:2]
    return CameraView.centred(width, height, focal, (0.0, 0.0, 0.0), np.eye(3))


def evaluate_detector(weights: Path, shards: Sequence[Path], min_pixels: int = 12) -> dict[str, object]:
    """Scores of the detector in `weights` on `shards` (see the module docstring)."""
    from emmoe_core.perception.learned import LearnedDetector

    detector = LearnedDetector(weights, min_pixels=min_pixels)
    classes, small = detector.classes, set(detector.network.config.objects)
    views = load_views(shards)
    if views.focal is None:
        raise ValueError("these view shards keep no focal length (rendered by an older version): remove them so "
                         "they are rendered again")
    scores = {name: ClassScores() for name in classes[1:]}
    names_right = names_shown = names_true = 0
    for start in range(0, len(views), len(VIEWS)):
        batch = range(start, min(start + len(VIEWS), len(views)))
        observation = Observation(time=float(start), rgb={VIEWS[i - start]: views.rgb[i] for i in batch},
                                  depth={VIEWS[i - start]: views.depth[i] for i in batch},
                                  cameras={VIEWS[i - start]: _camera(views.rgb[i].shape, float(views.focal[i]))
                                           for i in batch})
        regions = detector.regions(observation)
        shown = {view: {label for label, _ in seen} for view, seen in detector.visible(observation).items()}
        for i in batch:
            view, truth = VIEWS[i - start], views.label[i]
            predicted = np.zeros(truth.shape, np.int16)
            for region in (item for item in regions if item.view == view):
                index = classes.index(region.label)
                predicted[region.mask] = index
                right = np.mean(truth[region.mask] == index) >= 0.25
                counts = scores[region.label].detections
                counts[0], counts[1] = counts[0] + int(right), counts[1] + 1
            true_names = set()
            for index, name in enumerate(classes[1:], 1):
                is_true, is_predicted = truth == index, predicted == index
                score = scores[name]
                score.true_pixels += int(is_true.sum())
                score.predicted_pixels += int(is_predicted.sum())
                score.overlap += int((is_true & is_predicted).sum())
                components, count = ndimage.label(is_true)
                sizes = ndimage.sum_labels(is_true, components, range(1, count + 1)) if count else []
                for number, size in enumerate(sizes, 1):
                    if size < min_pixels:
                        continue
                    true_names.add(name)
                    if name in small:
                        component = components == number
                        depth = float(np.median(views.depth[i][component]))
                        tally = score.found.setdefault(_band(depth), [0, 0])
                        tally[0] += int(np.sum(is_predicted & component) >= 0.25 * size)
                        tally[1] += 1
            names_true += len(true_names)
            names_shown += len(shown[view])
            names_right += len(true_names & shown[view])
    per_class = {name: score.row() for name, score in scores.items()}
    objects = [scores[name] for name in classes if name in small]
    total = {band: [sum(s.found.get(band, [0, 0])[k] for s in objects) for k in (0, 1)]
             for band in sorted({band for s in objects for band in s.found})}
    return {"views": len(views), "classes": per_class,
            "object_recall": {band: {"found": found, "instances": count, "recall": _percent(found, count)}
                              for band, (found, count) in total.items()},
            "object_detection_precision": _percent(sum(s.detections[0] for s in objects),
                                                   sum(s.detections[1] for s in objects)),
            "visible_names": {"precision": _percent(names_right, names_shown),
                              "recall": _percent(names_right, names_true)}}


def report_lines(scores: dict[str, object]) -> list[str]:
    """The scores as a table: one row per class, then the object recall by distance and the text observation."""
    classes: dict[str, dict[str, object]] = scores["classes"]  # type: ignore[assignment]
    bands = BAND_NAMES

    def cell(value: object) -> str:
        return "-" if value is None else f"{value}"

    lines = [f"{scores['views']} views; pixel precision / recall / IoU, detection precision, object recall by "
             f"distance ({', '.join(bands)})",
             f"{'class':32} {'P':>6} {'R':>6} {'IoU':>6} {'detP':>6} " + " ".join(f"{band:>14}" for band in bands)]
    for name, row in classes.items():
        recall = " ".join(f"{cell(row.get(f'recall_{band}')):>7}/{cell(row.get(f'instances_{band}')):<6}"
                          for band in bands)
        lines.append(f"{name:32} {cell(row['pixel_precision']):>6} {cell(row['pixel_recall']):>6} "
                     f"{cell(row['iou']):>6} {cell(row['detection_precision']):>6} {recall}")
    lines.append(f"objects: recall {scores['object_recall']}, detection precision "
                 f"{scores['object_detection_precision']}")
    lines.append(f"visible names (the planner's text): {scores['visible_names']}")
    return lines
