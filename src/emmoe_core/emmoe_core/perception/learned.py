"""The learned detector: the U-Net of emmoe_core.perception.network on the head views, behind the Detector
interface. Nothing of the simulator's ground truth is read: only RGB, depth and the cameras' poses.

One network pass labels every pixel of all views of an observation (kept until the next observation); a pixel whose
most likely class is less likely than `min_confidence` is background. A class's connected regions of at least
`min_pixels` pixels whose mean confidence reaches `object_confidence` (small objects) or `furniture_confidence` are its
detections (a region the network is unsure of is more often wrong than right far from the robot, and a wrong one
would be remembered); for small objects the pixels whose depth lies far from the region's median
are dropped (a mask at half resolution brought back to full resolution spills onto what lies behind a small thing),
and a region whose surface, measured with depth and the camera's focal length, is under `min_area_share` of its
class's smallest face (the catalog's size, in the network's config) is dropped: a patch of a few square centimetres
that looks like a can is a reflection or a print, not a can, at any distance. A furniture region keeps only its
main depth layer (`main_layer`: its pixels on a nearer thing in front of the furniture are dropped) and is no
detection when that layer covers under `min_furniture_area`: a few pixels of "kitchen counter" on a fridge's side
would otherwise be the nearest counter the robot knows of.
Tracks: a region whose back-projected points come within `track_radius` of the points last seen of a track of the
same class continues that track; otherwise it starts a new one. Tracks are forgotten when the observation time goes
backwards (a new episode).

For the planner's text observation (`visible`) a small object's place is read from the image too: the furniture
class under it (the band of pixels just below its mask), "in" for the closed furniture (fridge, cabinet), "on"
otherwise. The simulator says "in kitchen_counter" for an object in a drawer; this reads "on kitchen_counter".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from emmoe_core.names import AliasTable, default_alias_table, normalize
from emmoe_core.perception.detector import Detection
from emmoe_core.robot.state import CameraView, Observation

# Where the committed weights live, relative to the repository root (the `models/` folder).
DEFAULT_WEIGHTS = Path(__file__).resolve().parents[4] / "models" / "detector"
_INSTANCE_SUFFIX = re.compile(r"_\d+$")


# Furniture an object is "in" rather than "on" (the alias table's canonical names).
ENCLOSING = frozenset({"fridge", "frl_apartment_wall_cabinet_02"})


@dataclass(frozen=True)
class Region:
    """One labelled region of one view: class, full-resolution mask, track, median depth, where it rests ("on
    <canonical>", "in <canonical>", or "" for furniture and where nothing is seen under it)."""

    view: str
    label: str
    mask: np.ndarray
    track: int
    depth: float
    location: str = ""


class ViewLabels(NamedTuple):
    """The network's answer for one view at full resolution: class indices (0 where it is unsure) and the
    probability of each pixel's most likely class."""

    labels: np.ndarray
    confidence: np.ndarray


def back_project(mask: np.ndarray, depth: np.ndarray, camera: CameraView) -> np.ndarray:
    """(N, 3) world points of the mask's pixels with a finite, positive depth."""
    rows, columns = np.nonzero(mask)
    z = depth[rows, columns]
    keep = np.isfinite(z) & (z > 0)
    rows, columns, z = rows[keep], columns[keep], z[keep]
    optical = np.stack([(columns + 0.5 - camera.cx) / camera.fx * z, (rows + 0.5 - camera.cy) / camera.fy * z, z], 1)
    points: np.ndarray = optical @ np.asarray(camera.rotation).T + np.asarray(camera.position)
    return points


def main_layer(depths: np.ndarray, gap: float = 0.3, share: float = 0.1) -> tuple[float, float]:
    """The (nearest, farthest) depth of the layer holding most of a region's pixels, layers being split where the
    sorted depths jump by more than `gap` metres or `share` of the depth: the pixels of a half-resolution mask that
    spill onto a nearer thing in front of a piece of furniture form a layer of their own."""
    ordered = np.sort(depths)
    jumps = np.flatnonzero(np.diff(ordered) > np.maximum(gap, share * ordered[:-1])) + 1
    starts = np.concatenate([[0], jumps])
    ends = np.concatenate([jumps, [len(ordered)]])
    largest = int(np.argmax(ends - starts))
    return float(ordered[starts[largest]]), float(ordered[ends[largest] - 1])


def surface(mask: np.ndarray, depth: np.ndarray, camera: CameraView) -> float:
    """Square metres the mask's pixels cover, facing the camera (each pixel covers (depth / focal)^2)."""
    values = depth[mask]
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.sum(values.astype(np.float64) ** 2) / (camera.fx * camera.fy))


class LearnedDetector:
    """Finds things with the trained network (see the module docstring)."""

    name = "learned (a U-Net trained on simulator renders, models/detector; no ground truth at run time)"
    needs_segmentation = False

    def __init__(self, weights: Path = DEFAULT_WEIGHTS, table: AliasTable | None = None, min_pixels: int = 12,
                 min_confidence: float = 0.4, object_confidence: float = 0.5, furniture_confidence: float = 0.8,
                 min_area_share: float = 0.3, min_furniture_area: float = 0.03, track_radius: float = 0.08,
                 threads: int = 2) -> None:
        """Load the network from `weights` (a folder with config.json and model.safetensors); a pixel whose most
        likely class has a probability under `min_confidence` counts as background, a region whose mean probability
        is under `object_confidence` (small objects) or `furniture_confidence` (the rest) is no detection, nor is a
        small object's region whose surface is under `min_area_share` of its class's smallest face, nor a furniture
        region whose main depth layer covers under `min_furniture_area` square metres.

        Raises:
            emmoe_core.perception.network.NetworkLoadError: no usable weights there.
        """
        import torch

        from emmoe_core.perception.network import load_network

        torch.set_num_threads(threads)
        self.network = load_network(weights)
        # channels_last runs the convolutions faster on the CPU (torch's stubs lack the keyword)
        self.network.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.classes = self.network.config.classes
        self.table = table or default_alias_table()
        self.min_pixels = min_pixels
        self.min_confidence = min_confidence
        self.object_confidence = object_confidence
        self.furniture_confidence = furniture_confidence
        self.min_furniture_area = min_furniture_area
        config = self.network.config
        # class index -> the least surface (square metres) a region of it may show: a share of its smallest face
        self._least_area = {self.classes.index(name): min_area_share * float(np.prod(sorted(size)[:2]))
                            for name, size in zip(config.objects, config.sizes)}
        self.track_radius = track_radius
        self._small = {index for index, name in enumerate(self.classes) if name in self.network.config.objects}
        self._known = {normalize(name) for name in self.classes[1:]}
        self._tracks: list[tuple[str, cKDTree | None]] = []
        self._last_time = -np.inf
        self._cached: tuple[int, float, list[Region]] | None = None

    # ---- the network ------------------------------------------------------------------------------------------
    def label_views(self, observation: Observation) -> dict[str, ViewLabels]:
        """View -> its labels and confidence at full resolution (views without depth are labelled with depth 0)."""
        import torch

        from emmoe_core.perception.network import network_input

        views = list(observation.rgb)
        rgb = np.stack([observation.rgb[view] for view in views])
        depth = np.stack([observation.depth.get(view, np.zeros(rgb.shape[1:3], np.float32)) for view in views])
        with torch.inference_mode():
            logits = self.network(network_input(rgb, depth).contiguous(memory_format=torch.channels_last))
        confidence, best = (part.numpy() for part in logits.softmax(1).max(1))
        half = np.where(confidence >= self.min_confidence, best, 0).astype(np.uint8)
        return {view: ViewLabels(_full(labels), _full(sure)) for view, labels, sure in zip(views, half, confidence)}

    # ---- regions and tracks -----------------------------------------------------------------------------------
    def regions(self, observation: Observation) -> list[Region]:
        """Every labelled region of the observation, with its track (computed once per observation)."""
        key = (id(observation), observation.time)
        if self._cached is not None and self._cached[:2] == key:
            return self._cached[2]
        if observation.time < self._last_time:
            self._tracks = []
        self._last_time = observation.time
        found = []
        for view, (labels, confidence) in self.label_views(observation).items():
            depth = observation.depth.get(view)
            components, count = ndimage.label(labels > 0)
            for number, box in enumerate(ndimage.find_objects(components), 1):
                if box is None:
                    continue
                inside = components[box] == number
                for index in np.unique(labels[box][inside]):
                    mask = np.zeros(labels.shape, bool)
                    mask[box] = inside & (labels[box] == index)
                    if float(confidence[mask].mean()) < (self.object_confidence if index in self._small
                                                         else self.furniture_confidence):
                        continue
                    region = self._region(view, int(index), mask, depth, observation.cameras.get(view), labels)
                    if region is not None:
                        found.append(region)
        self._cached = (key[0], key[1], found)
        return found

    def _region(self, view: str, index: int, mask: np.ndarray, depth: np.ndarray | None,
                camera: CameraView | None, labels: np.ndarray) -> Region | None:
        if int(mask.sum()) < self.min_pixels:
            return None
        median = np.inf
        if depth is not None:
            values = depth[mask]
            finite = values[np.isfinite(values) & (values > 0)]
            if len(finite):
                if index in self._small:
                    median = float(np.median(finite))
                    mask = mask & (np.abs(depth - median) < max(0.12, 0.1 * median))
                    least = self._least_area.get(index, 0.0)
                else:
                    near, far = main_layer(finite)
                    mask = mask & (depth >= near) & (depth <= far)
                    least = self.min_furniture_area
                if int(mask.sum()) < self.min_pixels // 2 or \
                        (camera is not None and surface(mask, depth, camera) < least):
                    return None
                median = float(np.median(depth[mask]))
        label = self.classes[index]
        points = back_project(mask, depth, camera) if depth is not None and camera is not None else np.zeros((0, 3))
        location = self._support(mask, labels) if index in self._small else ""
        return Region(view, label, mask, self._track(label, points), median, location)

    def _support(self, mask: np.ndarray, labels: np.ndarray) -> str:
        """Where a small object's mask rests: the most common furniture class in the 8 rows under each of its
        columns."""
        rows, columns = np.nonzero(mask)
        under = []
        for column in np.unique(columns):
            bottom = int(rows[columns == column].max())
            under.extend(labels[bottom + 1: bottom + 9, column].tolist())
        furniture = [value for value in under if value > 0 and value not in self._small]
        if not furniture:
            return ""
        name = self.classes[int(np.bincount(furniture).argmax())]
        return f"{'in' if name in ENCLOSING else 'on'} {name}"

    def _track(self, label: str, points: np.ndarray) -> int:
        """The track these points continue, else a new one (a region without points always starts one)."""
        if len(points) > 400:
            points = points[np.linspace(0, len(points) - 1, 400).astype(int)]
        for number, (known, tree) in enumerate(self._tracks):
            if known == label and tree is not None and len(points) and np.isfinite(
                    tree.query(points, distance_upper_bound=self.track_radius)[0]).any():
                self._tracks[number] = (label, cKDTree(np.concatenate([tree.data, points])[-800:]))
                return number
        self._tracks.append((label, cKDTree(points) if len(points) else None))
        return len(self._tracks) - 1

    # ---- the Detector interface -------------------------------------------------------------------------------
    def categories(self, query: str) -> set[str]:
        """Canonical names `query` stands for ("apple_0", "apple" and "red apple" all give 013_apple; a part's
        instance name, "fridge_0_door", its furniture's)."""
        words = query.split("_")
        for end in range(len(words), 0, -1):  # the whole name first, then ever shorter heads of it
            names = self._names("_".join(words[:end]))
            if names & self._known:
                return names
        return self._names(query)

    def _names(self, query: str) -> set[str]:
        bare = _INSTANCE_SUFFIX.sub("", query)
        return {normalize(name) for name in
                set(self.table.canonicals(query)) | set(self.table.canonicals(bare)) | {query, bare}}

    def detect(self, observation: Observation, query: str) -> list[Detection]:
        """Every region of the query's category in each view."""
        wanted = self.categories(query)
        return [Detection(region.view, region.mask, region.label, region.track, 1.0)
                for region in self.regions(observation) if normalize(region.label) in wanted]

    def visible(self, observation: Observation) -> dict[str, list[tuple[str, str]]]:
        """View -> (canonical name, location) of every region seen in it, nearest first (the planner's "Visible
        objects")."""
        regions = self.regions(observation)
        return {view: [(region.label, region.location)
                       for region in sorted((item for item in regions if item.view == view), key=lambda item: item.depth)]
                for view in observation.rgb}


def _full(half: np.ndarray) -> np.ndarray:
    """A half-resolution image brought to full resolution, each value filling 2x2 pixels."""
    full: np.ndarray = half.repeat(2, axis=0).repeat(2, axis=1)
    return full
