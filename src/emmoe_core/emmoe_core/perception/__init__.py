"""How the robot finds things in its images: the `Detector` interface and the segmentation stand-in (detector), the
detector trained on the simulator's renders (learned, on the network of network), and the names of the two
perceptions every component offers (`PERCEPTIONS`, `create_detector`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emmoe_core.perception.detector import Detector

# `learned`: the trained detector on RGB-D; `segmentation`: the simulator's instance masks standing in for one.
PERCEPTIONS: tuple[str, ...] = ("learned", "segmentation")


def create_detector(perception: str) -> Detector:
    """A new detector of a perception (each user gets its own: the learned one keeps per-episode tracks).

    Raises:
        ValueError: an unknown perception.
        emmoe_core.perception.network.NetworkLoadError: the learned detector's weights are missing.
    """
    if perception not in PERCEPTIONS:
        raise ValueError(f"perception: expected one of {', '.join(PERCEPTIONS)}, got {perception!r}")
    if perception == "segmentation":
        from emmoe_core.perception.detector import SegmentationDetector

        return SegmentationDetector()
    from emmoe_core.perception.learned import LearnedDetector

    return LearnedDetector()
