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


def surface_normals(points: np.ndarray, step: int = 1) -> np.ndarray:
    """(H, W, 3) unit surface normals of an organised point image, from the points `step` pixels to either side and
    above and below (NaN where a neighbour is missing)."""
    across = np.full(points.shape, np.nan)
    down = np.full(points.shape, np.nan)
    across[:, step:-step] = points[:, 2 * step:] - points[:, :-2 * step]
    down[step:-step] = points[2 * step:] - points[:-2 * step]
    normal = np.cross(across, down)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit: np.ndarray = normal / np.linalg.norm(normal, axis=-1, keepdims=True)
    return unit


def upward_normals(points: np.ndarray) -> np.ndarray:
    """(H, W) z component of the unit surface normal of an organised point image (NaN at edges and holes); about 1
    on floors, table tops and shelves."""
    upward: np.ndarray = np.abs(surface_normals(points)[..., 2])
    return upward


def upright_normals(points: np.ndarray) -> np.ndarray:
    """(H, W, 2) unit horizontal normals of the surfaces of an organised point image (from the points two pixels to
    either side and above and below); NaN where a neighbour is missing or the surface is not upright (its normal
    more than 45 degrees off the horizontal)."""
    normal = surface_normals(points, step=2)
    horizontal = np.linalg.norm(normal[..., :2], axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        upright = horizontal > 0.7
        flat: np.ndarray = normal[..., :2] / horizontal[..., None]
    flat[~upright] = np.nan
    return flat


def valid(points: np.ndarray) -> np.ndarray:
    """Rows of an (N, 3) array without NaN."""
    kept: np.ndarray = points[np.isfinite(points).all(axis=-1)]
    return kept
