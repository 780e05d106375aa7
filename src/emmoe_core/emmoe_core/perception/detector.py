"""Finding named things in the head-camera images, behind one interface.

A `Detector` takes an observation and a name as the planner wrote it (or as the executor resolved it) and returns
the image regions where things of that category are seen. The sensor-only skills back-project those regions with
depth; nothing else of the detector's answer is used.

`LearnedDetector` (emmoe_core.perception.learned), the default, is a network trained on the simulator's renders: it
reads RGB and depth only. `SegmentationDetector`, kept for comparison (`--perception segmentation`), reads the
camera's instance segmentation: it stands in for an open-vocabulary detector (Grounding DINO + SAM, for example),
and every result produced with it says so. It answers
by category: a name is reduced to its alias-table entry, so "apple_0", "apple" and "red apple" all find every
visible apple, and which one the skill uses is decided from the images (nearest first), never from the scene's
ground truth. A real detector plugs in by implementing `detect` (over the remote policy protocol, for example).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from emmoe_core.names import AliasTable, default_alias_table, normalize
from emmoe_core.robot.state import Observation


@dataclass(frozen=True)
class Detection:
    """One thing seen in one view.

    Attributes:
        view: the camera view.
        mask: (H, W) bool pixels of the thing.
        label: the category found (an alias-table entry or the name as asked).
        track: an identifier that is the same for the same thing across views and calls (the detector's own
            tracking; not a scene name).
        score: confidence in [0, 1].
    """

    view: str
    mask: np.ndarray
    label: str
    track: int
    score: float = 1.0


class Detector(Protocol):
    """Finds things of a named category in an observation (see the module docstring).

    Attributes:
        name: how it finds things, for logs and result tables.
        needs_segmentation: whether it reads the simulator's instance segmentation (observe with
            segmentation=True); a detector that does not must never be given it.
    """

    name: str
    needs_segmentation: bool

    def detect(self, observation: Observation, query: str) -> list[Detection]:
        """Detections of `query` in every view of `observation` (empty when nothing is seen)."""
        ...


class SegmentationDetector:
    """The simulator's instance segmentation as a category detector (the stand-in for an open-vocabulary one)."""

    name = "segmentation (simulator instance masks standing in for an open-vocabulary detector)"
    needs_segmentation = True

    def __init__(self, table: AliasTable | None = None, min_pixels: int = 12) -> None:
        """Match categories with `table` (the default alias table); ignore regions under `min_pixels`."""
        self.table = table or default_alias_table()
        self.min_pixels = min_pixels

    def categories(self, observation: Observation, query: str) -> set[str]:
        """The canonical names `query` stands for: an instance's own category, else the alias-table entries."""
        wanted = normalize(query)
        for name, canonical in zip(observation.instance_names, observation.instance_canonicals):
            if normalize(name) == wanted:
                return {canonical}
        return set(self.table.canonicals(query)) | {query}

    def detect(self, observation: Observation, query: str) -> list[Detection]:
        """Every instance of the query's category seen in each view, as a mask (see the class docstring)."""
        wanted = {normalize(name) for name in self.categories(observation, query)}
        tracks = [index for index, canonical in enumerate(observation.instance_canonicals)
                  if normalize(canonical) in wanted]
        detections = []
        for view, segmentation in observation.segmentation.items():
            for track in tracks:
                mask = segmentation == track
                if int(mask.sum()) >= self.min_pixels:
                    detections.append(Detection(view, mask, observation.instance_canonicals[track], track))
        return detections
