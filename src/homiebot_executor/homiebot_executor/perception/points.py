"""Depth images to world points, with the camera intrinsics and pose of emmoe_core.robot.state.CameraView."""

from __future__ import annotations

import numpy as np
from emmoe_core.robot.state import CameraView


def point_image(depth: np.ndarray, camera: CameraView, max_range: float = 6.0) -> np.ndarray:
    """(H, W, 3) world points of every pixel; NaN where the depth is missing, not finite or beyond `max_range`."""
    rows, columns = depth.shape
    v, u = np.mgrid[0:rows, 0:columns]
    z = np.where(np.isfinite(depth) & (depth > 0.0) & (depth <= max_range), depth, np.nan).astype(np.float64)
    optical = np.stack([(u + 0.5 - camera.cx) / camera.fx * z, (v + 0.5 - camera.cy) / camera.fy * z, z], axis=-1)
    world: np.ndarray = optical @ camera.rotation.T + np.asarray(camera.position)
    return world


def upward_normals(points: np.ndarray) -> np.ndarray:
    """(H, W) z component of the unit surface normal of an organised point image (NaN at edges and holes); about 1
    on floors, table tops and shelves."""
    du = np.full_like(points, np.nan)
    dv = np.full_like(points, np.nan)
    du[:, 1:-1] = points[:, 2:] - points[:, :-2]
    dv[1:-1, :] = points[2:, :] - points[:-2, :]
    normal = np.cross(du, dv)
    length = np.linalg.norm(normal, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        upward: np.ndarray = np.abs(normal[..., 2]) / length
    return upward


def valid(points: np.ndarray) -> np.ndarray:
    """Rows of an (N, 3) array without NaN."""
    kept: np.ndarray = points[np.isfinite(points).all(axis=-1)]
    return kept
