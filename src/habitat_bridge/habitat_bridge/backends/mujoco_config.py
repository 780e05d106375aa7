"""The MuJoCo backend's settings (habitat_bridge.backends.mujoco_backend)."""

from __future__ import annotations

from dataclasses import dataclass, field

from habitat_bridge.backends import fetch_model


@dataclass(frozen=True)
class MujocoBackendConfig:
    """Settings of the MuJoCo backend.

    Attributes:
        image_width: pixels per view.
        image_height: pixels per view.
        timestep: physics step (seconds).
        cameras: head-camera field of view and tilt, third-person camera placement.
        settle_seconds: physics time run at reset so objects come to rest.
        visible_min_pixels: pixels an instance needs in a view's segmentation to count as visible.
        torso_height: torso lift at reset (metres).
    """

    image_width: int = 256
    image_height: int = 256
    timestep: float = 0.004
    cameras: fetch_model.FetchCameraConfig = field(default_factory=fetch_model.FetchCameraConfig)
    settle_seconds: float = 0.2
    visible_min_pixels: int = 30
    torso_height: float = 0.15

    def __post_init__(self) -> None:
        if not (16 <= self.image_width <= 1024 and 16 <= self.image_height <= 1024):
            raise ValueError(f"image size must be within 16..1024 pixels, got {self.image_width}x{self.image_height}")
        if not 0.0005 <= self.timestep <= 0.01:
            raise ValueError(f"timestep must be within [0.0005, 0.01] s, got {self.timestep}")
        if not 0.0 <= self.settle_seconds <= 5.0:
            raise ValueError(f"settle_seconds must be within [0, 5], got {self.settle_seconds}")
        if self.visible_min_pixels < 1:
            raise ValueError(f"visible_min_pixels must be at least 1, got {self.visible_min_pixels}")
        if not 0.0 <= self.torso_height <= 0.3861:
            raise ValueError(f"torso_height must be within [0, 0.3861] m, got {self.torso_height}")
